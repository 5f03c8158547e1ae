"""Target descriptions: what a device can do, as data that lowering passes read and backends fill.

A generic pass never branches on a backend's name; it asks the target (`target("c").vector_width(dtypes.float32)`,
`op in t.native_ops`, `t.has_local`). Two generic descriptions are always registered: `cpu` (what `kernel-to-device
{target=cpu}` may assume of any host: scalar code, loops, no local memory) and `gpu` (thread/block ids, local
memory, barriers). A backend registers its own description under its device name (`python`, `c`, `llvm`,
`opencl`, `cuda`, `mlir`) when `uopir.backends` loads, usually derived from a generic one
(`CPU.derive(name="c", ...)` or `host_cpu("c")`, which reads the host's vector width and core count).

Words: a *device* is what the frontend and the runtime name; a *target* is what the lowering passes take. Every
device has a target of the same name; `cpu` and `gpu` are targets without a device.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from uopir.dialects import core as C
from uopir.ir.dtype import DType, dtypes
from uopir.ir.once import FirstUse
from uopir.ir.ops import OpDef
from uopir.ir.registration import Sites
from uopir.passes.errors import did_you_mean

__all__ = ["Target", "UnknownTargetError", "target", "targets", "check_target_option", "register_target", "host_cpu",
           "read_cpuinfo", "CPU", "GPU", "ALL_DTYPES", "PARALLEL_KINDS"]

TargetKind = Literal["cpu", "gpu"]
# what a cpu kernel does per iteration, as kernel-optimize tells it (Target.parallel_min_work_by_kind): no reduction
# (each iteration loads and stores its element), a depthwise conv's or a pool's window tile, a dot-product tile, any
# other reduction (a register-tiled matmul or conv, a row reduction)
PARALLEL_KINDS = ("elementwise", "window", "dot", "reduce")

ALL_DTYPES: frozenset[DType] = frozenset((
    dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32,
    dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.index))


class UnknownTargetError(ValueError):
    """`target(name)` for a name nobody registered; the message lists the known ones."""


@dataclass(frozen=True)
class Target:
    """What one target can do. Frozen and hashable, so a pass may key a cache on it.

    Sizes are in elements unless the name says bytes. A limit of 0 means "none" (a cpu has no local memory, no
    warps); launch limits are per dimension (x, y, z)."""

    name: str
    kind: TargetKind
    dtypes: frozenset[DType] = ALL_DTYPES  # scalar dtypes the target computes in (others are emulated or rejected)
    native_ops: frozenset[OpDef] = frozenset(C.ALU_OPS)  # ops it implements directly; device-decompose does the rest
    max_vector_bytes: int = 0  # the widest vector register; 0 = scalar code only
    vector_widths: tuple[tuple[DType, int], ...] = ()  # per-dtype lane counts that override max_vector_bytes
    has_local: bool = False  # workgroup-shared memory and barriers
    local_bytes: int = 0
    max_threads_per_block: int = 1
    max_local_dims: tuple[int, int, int] = (1, 1, 1)
    max_global_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    warp_size: int = 1
    threads: int = 1  # cpu: cores an outer loop may be split across
    parallel_min_work: int = 1 << 15  # cpu: iterations below which a kernel stays on one core (kernel-optimize)
    # cpu: rows (kind, iterations) where a kind of kernel (PARALLEL_KINDS; kernel-optimize names a kernel's) splits
    # from another count than parallel_min_work: an iteration of an elementwise kernel (a load and a store) takes
    # longer than one of a register-tiled dot product, so it pays for waking a second core from fewer iterations
    parallel_min_work_by_kind: tuple[tuple[str, int], ...] = (("dot", 1 << 18),)
    upcast_sizes: tuple[int, ...] = (4, 2)  # preferred upcast factors for register tiling, best first
    unroll_sizes: tuple[int, ...] = (4, 2)  # preferred unroll factors for small reduction loops, best first
    max_upcast: int = 32  # register budget: the product of all upcast factors of one kernel
    tensor_cores: tuple[str, ...] = ()  # names of the device.wmma shapes the target has
    # a float add/mul reduction may be split across threads and its partial results combined in another order than
    # the semantics' sequential one (the differential tolerances' `accumulate` class covers it); integer, bool and
    # max/min reductions are exact in any order and may always be split
    reassociate_float_reductions: bool = False
    # an f32 float sum's `acc + a * b` may be one fused multiply-add (device-contract: `device.fma`, rounded once):
    # within the `accumulate` class a reassociated sum is held to already; set where the host has the instruction
    contract_multiply_add: bool = False
    # f32/f64 vector exp2/log2 are rewritten into polynomial core ops (device-transcendental: within the
    # differential tolerance's `transcendental` class, not bit-exact) instead of one library call per lane
    vector_transcendentals: bool = False
    # the backend takes a vector of any lane count as one value (LLVM on AVX-512 legalizes a <14 x float> itself);
    # without it device-devectorize splits vectors into power-of-two parts (14 = 8 + 4 + 2: C keeps a vector of
    # another size lane by lane)
    masked_vectors: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("cpu", "gpu"):
            raise ValueError(f"target {self.name!r}: kind must be 'cpu' or 'gpu', got {self.kind!r}")
        if self.has_local and self.local_bytes <= 0:
            raise ValueError(f"target {self.name!r} has local memory but local_bytes = {self.local_bytes}")
        for d, n in self.vector_widths:
            if n < 1:
                raise ValueError(f"target {self.name!r}: vector width of {d} must be >= 1, got {n}")
        for k, n in self.parallel_min_work_by_kind:
            if k not in PARALLEL_KINDS or n < 0:
                raise ValueError(f"target {self.name!r}: parallel_min_work_by_kind row ({k!r}, {n}): the kind must be "
                                 f"one of {', '.join(PARALLEL_KINDS)} and the iterations >= 0")

    def vector_width(self, dtype: DType) -> int:
        """How many lanes of `dtype` one vector holds (1: no vectors of it)."""
        d = dtype.scalar
        for k, n in self.vector_widths:
            if k is d:
                return n
        if self.max_vector_bytes <= 0 or d.itemsize <= 0 or d not in self.dtypes:
            return 1
        return max(1, self.max_vector_bytes // d.itemsize)

    def parallel_work(self, kind: str) -> int:
        """The iterations from which a cpu kernel of `kind` (PARALLEL_KINDS) is split across cores: its row of
        parallel_min_work_by_kind, else parallel_min_work."""
        return next((n for k, n in self.parallel_min_work_by_kind if k == kind), self.parallel_min_work)

    def supports(self, dtype: DType) -> bool:
        return dtype.scalar in self.dtypes

    def is_native(self, op: OpDef) -> bool:
        return op in self.native_ops

    def derive(self, **changes: object) -> Target:
        """A copy with some fields changed (a backend's description from a generic one)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


CPU = Target(name="cpu", kind="cpu", max_vector_bytes=16, threads=1)
GPU = Target(name="gpu", kind="gpu", max_vector_bytes=16, has_local=True, local_bytes=48 * 1024,
             max_threads_per_block=1024, max_local_dims=(1024, 1024, 64), warp_size=32, upcast_sizes=(4, 2),
             unroll_sizes=(4,), max_upcast=16, reassociate_float_reductions=True)

_TARGETS: dict[str, Target] = {}  # built or registered descriptions
_FACTORIES: dict[str, Callable[[], Target]] = {}  # name -> what builds it (kept after the build: `targets()` lists it)
_FIRST_USE = FirstUse("target")  # several threads asking for a target first: its factory runs once
_SITES = Sites("target")  # where each name was registered


def register_target(t: Target | Callable[[], Target], name: str | None = None, *, replace: bool = False) -> None:
    """Register a description, or a factory that builds it on first use (probing hardware can be slow).

    A factory needs `name`. Registering a name taken on another line is a RegistrationError naming both places
    unless `replace=True`."""
    if isinstance(t, Target):
        key = t.name if name is None else name
        if key != t.name:
            raise ValueError(f"target registered as {key!r} but named {t.name!r}")
    elif name is None:
        raise ValueError("a target factory needs a name")
    else:
        key = name
    _SITES.claim(key, key in _TARGETS or key in _FACTORIES, replace)
    _TARGETS.pop(key, None)
    _FACTORIES.pop(key, None)
    if isinstance(t, Target):
        _TARGETS[key] = t
    else:
        _FACTORIES[key] = t


def targets() -> list[str]:
    """The registered target names, sorted."""
    return sorted(set(_TARGETS) | set(_FACTORIES))


def check_target_option(name: str) -> None:
    """For the `__post_init__` of a pass's options: an UnknownTargetError when no target is registered as `name`. Its
    `option` ("target") lets the pipeline parser point at that option in the pipeline text."""
    if name not in _TARGETS and name not in _FACTORIES:
        import sys
        why = "" if "uopir.backends" in sys.modules else " (a device's target is registered when uopir.backends is " \
                                                         "imported; it is not yet)"
        e = UnknownTargetError(f"unknown target {name!r}; known targets: {', '.join(targets())}{why}"
                               f"{did_you_mean(name, targets())}")
        e.option = "target"  # type: ignore[attr-defined]
        raise e


def target(name: str) -> Target:
    """The description registered as `name`; UnknownTargetError lists the known names."""
    if not isinstance(name, str):
        raise TypeError(f"a target name must be a string, got {type(name).__name__}")
    t = _TARGETS.get(name)
    if t is not None:
        return t
    make = _FACTORIES.get(name)
    if make is None:
        raise UnknownTargetError(f"unknown target {name!r}; known targets: {', '.join(targets())} (a device's "
                                 f"target is registered when uopir.backends is imported)")
    return _FIRST_USE.get(_TARGETS, name, lambda: _built(name, make))


def _built(name: str, make: Callable[[], Target]) -> Target:
    t = make()
    if not isinstance(t, Target) or t.name != name:
        what = f"a target named {t.name!r}" if isinstance(t, Target) else f"a {type(t).__name__}"
        raise ValueError(f"the factory of target {name!r} built {what}")
    return t


# ---- the host CPU ----------------------------------------------------------------------------------------------------
def _vector_bytes_from_flags(flags: Iterable[str]) -> int:
    """The widest SIMD register the cpuinfo flags promise (x86 avx512f/avx2/avx/sse2, arm neon/asimd)."""
    f = set(flags)
    if "avx512f" in f:
        return 64
    if "avx2" in f or "avx" in f:
        return 32
    if f & {"sse2", "neon", "asimd"}:
        return 16
    return 0


def _cpu_flags(cpuinfo: str) -> list[str]:
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return value.split()
    return []


def read_cpuinfo() -> str:
    """The text of /proc/cpuinfo ("" where it cannot be read): the host's model and ISA flags."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def host_cpu(name: str = "host", cpuinfo: str | None = None) -> Target:
    """The generic cpu description filled from this machine: vector width from /proc/cpuinfo's flags (16 bytes if
    the file is unreadable), threads from the cores this process may use. `cpuinfo` replaces the file's text. Its
    float sums may keep partial results in vector lanes (kernel-optimize's accumulators): what a host backend
    promises for them is the differential tolerance of the `accumulate` class, not the sequential order (the
    generic `cpu` keeps that order: lowering tests compare it with the interpreter bit for bit); its vector
    exp2/log2 are polynomials (device-transcendental), held to the `transcendental` class alike; where the cpu has an
    FMA instruction, an f32 sum's multiply-adds are fused (device-contract), within the `accumulate` class too."""
    if cpuinfo is None:
        cpuinfo = read_cpuinfo()
    flags = _cpu_flags(cpuinfo)
    vbytes = _vector_bytes_from_flags(flags) or CPU.max_vector_bytes
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return CPU.derive(name=name, max_vector_bytes=vbytes, threads=max(1, cores), reassociate_float_reductions=True,
                      vector_transcendentals=True, contract_multiply_add=_has_fma(flags))


def _has_fma(flags: Iterable[str]) -> bool:
    """Whether the cpuinfo flags promise a fused multiply-add instruction (x86 fma, arm asimd: every AArch64 core)."""
    return bool(set(flags) & {"fma", "asimd"})


register_target(CPU)
register_target(GPU)
