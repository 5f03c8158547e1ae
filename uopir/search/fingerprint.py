"""The fingerprint of a device: what must match for a tuning result measured on one machine to hold on another.

A CPU's is its model name, architecture, logical core count (thread splits depend on it) and a digest of the ISA
flags that change generated code (vector widths, FMA, the AVX-512 families, SVE); unrelated flags (a microcode bug
workaround, virtualization bits) are left out so that two machines of one model agree. A GPU's is its name, its
compute capability or OpenCL version, and its driver version (a driver update changes the compiler). The text reads
as `name | details | digest`, so a listing of a tuning cache says which machine each entry is from.
"""
from __future__ import annotations

import hashlib
import os
import platform
from functools import cache

from uopir.passes.target import read_cpuinfo

__all__ = ["ISA_FLAGS", "cpu_fingerprint", "device_fingerprint"]

# cpuinfo flags (x86 `flags`, arm `Features`) that decide which instructions a kernel compiles to
ISA_FLAGS = frozenset({
    "sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2",
    "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
    "neon", "asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "sme", "i8mm", "bf16",
})


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def cpu_fingerprint(cpuinfo: str | None = None) -> str:
    """This machine's CPU (or the one `cpuinfo`, the text of /proc/cpuinfo, describes, with this machine's core
    count and architecture)."""
    if cpuinfo is None:
        cpuinfo = read_cpuinfo()
    model, flags = "", set()
    parts: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Hardware", "cpu model") and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key in ("CPU implementer", "CPU part") and key not in parts:  # arm: no model name, these name the core
            parts[key] = value.strip()
    if not model:
        model = " ".join(parts.values()) or platform.processor() or "unknown cpu"
    isa = sorted(flags & ISA_FLAGS)
    arch, cores = platform.machine() or "unknown", os.cpu_count() or 1
    return f"cpu {' '.join(model.split())} | {arch}, {cores} cpus | {_digest(model, arch, str(cores), *isa)}"


@cache
def _host() -> str:
    return cpu_fingerprint()


def _opencl() -> str:
    from uopir.backends.opencl.runtime import cl_device

    d = cl_device().device  # OpenCLUnavailable (a RuntimeError) says why there is none
    name, platform_name = " ".join(d.name.split()), " ".join(d.platform.name.split())
    driver, version = d.driver_version.strip(), d.version.strip()
    return f"opencl {name} | {platform_name}, {version}, driver {driver} | " \
           f"{_digest(name, platform_name, version, driver)}"


def _cuda() -> str:
    from uopir.backends.cuda.runtime import cuda_context

    ctx = cuda_context()  # CUDAUnavailable (a RuntimeError) says why there is none
    name = ctx.device.name()
    cc = "{}.{}".format(*ctx.device.compute_capability())
    driver = str(ctx.drv.get_driver_version())
    return f"cuda {name} | sm {cc}, driver {driver} | {_digest(name, cc, driver)}"


def device_fingerprint(device: str) -> str:
    """The fingerprint of uopir device `device` (python, c, llvm: the host CPU; opencl, cuda: the device the
    backend opens). ValueError for an unknown device; RuntimeError (the backend's reason) when it is not here."""
    from uopir.backends.registry import canonical

    d = canonical(device)
    if d == "opencl":
        return _opencl()
    if d == "cuda":
        return _cuda()
    return _host()
