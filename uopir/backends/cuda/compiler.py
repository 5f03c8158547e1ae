"""CUDA C -> PTX, with NVRTC (the `nvidia-cuda-nvrtc` wheel, or a system libnvrtc, through ctypes) or `nvcc -ptx`,
whichever is present (NVRTC first: no subprocess, no temporary files), for a chosen `sm_XX`.

Flags: `--fmad=false` (a*b+c stays two roundings, as the semantics say), IEEE division and sqrt (the defaults,
kept explicit: `--prec-div=true --prec-sqrt=true`), `-arch=compute_XX` / `-arch=sm_XX`. The PTX goes through the
disk cache (namespace: the compiler, its version and the arch). `$UOPIR_CUDA_ARCH` (e.g. `sm_80`) overrides the
default arch, which is the GPU's compute capability where pycuda sees one, else sm_90; `$NVCC` names nvcc.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from uopir.backends.interface import CompileError as BaseCompileError
from uopir.backends.interface import Compiler
from uopir.ir import env

__all__ = ["CUDACompiler", "CompileError", "find_nvrtc", "find_nvcc", "cuda_include_dirs", "default_arch",
           "ARCH_ENV"]

ARCH_ENV = env.CUDA_ARCH.name
DEFAULT_ARCH = "sm_90"
FLAGS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "-std=c++17")
_ARCH = re.compile(r"sm_\d+[a-z]?")


class CompileError(BaseCompileError):
    """NVRTC or nvcc rejected a kernel (the message holds its log)."""


def _nvidia_dirs() -> list[Path]:
    """The folders of the `nvidia` namespace package (where the nvidia-* wheels install)."""
    out = []
    for base in sys.path:
        p = Path(base) / "nvidia"
        if p.is_dir():
            out.append(p)
    return out


@cache
def find_nvrtc() -> ctypes.CDLL | None:
    """libnvrtc from the nvidia-cuda-nvrtc wheel or the system, or None."""
    candidates = []
    for d in _nvidia_dirs():
        candidates += sorted(glob.glob(str(d / "**" / "libnvrtc.so*"), recursive=True), reverse=True)
    found = ctypes.util.find_library("nvrtc")
    if found:
        candidates.append(found)
    candidates += sorted(glob.glob("/usr/local/cuda*/lib64/libnvrtc.so*"), reverse=True)
    for c in candidates:
        if "builtins" in os.path.basename(c):
            continue
        try:
            return ctypes.CDLL(c)
        except OSError:
            continue
    return None


def find_nvcc() -> str | None:
    """$NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc; None when there is none."""
    nvcc = env.NVCC.get()
    if nvcc:
        return nvcc if shutil.which(nvcc) else None
    return shutil.which("nvcc") or (shutil.which("/usr/local/cuda/bin/nvcc"))


@cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Folders holding cuda_fp16.h / cuda_bf16.h for NVRTC (wheels' include folders, then the toolkit's)."""
    out = []
    for d in _nvidia_dirs():
        out += [str(Path(p).parent) for p in glob.glob(str(d / "**" / "include" / "cuda_fp16.h"), recursive=True)]
    out += [str(Path(p).parent) for p in sorted(glob.glob("/usr/local/cuda*/include/cuda_fp16.h"))]
    return tuple(dict.fromkeys(out))


def default_arch() -> str:
    """$UOPIR_CUDA_ARCH, else the GPU's compute capability (when pycuda sees one), else sm_90."""
    arch = env.CUDA_ARCH.get()
    if arch:
        if not _ARCH.fullmatch(arch):
            raise ValueError(f"${ARCH_ENV} must look like sm_90, got {arch!r}")
        return arch
    from uopir.backends.cuda.runtime import gpu_compute_capability

    cc = gpu_compute_capability()
    return f"sm_{cc[0]}{cc[1]}" if cc is not None else DEFAULT_ARCH


def _nvrtc_version(lib: ctypes.CDLL) -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


class CUDACompiler(Compiler):
    """CUDA C -> PTX text (bytes) for `arch`, with NVRTC or nvcc (`use`: "auto", "nvrtc" or "nvcc")."""

    def __init__(self, arch: str | None = None, use: str = "auto"):
        if arch is not None and not _ARCH.fullmatch(arch):
            raise ValueError(f"a CUDA arch looks like sm_90, got {arch!r}")
        if use not in ("auto", "nvrtc", "nvcc"):
            raise ValueError(f"use must be auto, nvrtc or nvcc, got {use!r}")
        self._arch, self.use = arch, use

    @property
    def arch(self) -> str:
        if self._arch is None:
            self._arch = default_arch()
        return self._arch

    @property
    def tool(self) -> str | None:
        """"nvrtc" or "nvcc", whichever compiles here (NVRTC first), or None."""
        if self.use in ("auto", "nvrtc") and find_nvrtc() is not None:
            return "nvrtc"
        if self.use in ("auto", "nvcc") and find_nvcc() is not None:
            return "nvcc"
        return None

    @property
    def available(self) -> bool:
        return self.tool is not None

    @property
    def flags(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*FLAGS, f"-arch={self.arch}")

    @property
    def name(self) -> str:  # type: ignore[override]
        tool = self.tool
        if tool == "nvrtc":
            ident = "nvrtc " + _nvrtc_version(find_nvrtc())
        elif tool == "nvcc":
            ident = _nvcc_version(find_nvcc())
        else:
            ident = "none"
        return "cuda-" + hashlib.sha256(f"{ident}|{self.arch}".encode()).hexdigest()[:16]

    def compile(self, source: str) -> bytes:
        tool = self.tool
        if tool == "nvrtc":
            return self._nvrtc(source)
        if tool == "nvcc":
            return self._nvcc(source)
        raise CompileError("no CUDA compiler: install the nvidia-cuda-nvrtc wheel (pip install 'uopir[cuda]') or the "
                           "CUDA toolkit (nvcc)")

    def _nvcc(self, source: str) -> bytes:
        nvcc = find_nvcc()
        assert nvcc is not None
        with tempfile.TemporaryDirectory(prefix="uopir-nvcc-") as tmp:
            src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.ptx"
            src.write_text(source, encoding="utf-8")
            args = [nvcc, "-ptx", *self.flags, "-o", str(out), str(src)]
            try:
                r = subprocess.run(args, capture_output=True, timeout=600)
            except (OSError, subprocess.SubprocessError) as e:
                raise CompileError(f"could not run nvcc ({nvcc}): {e}") from e
            if r.returncode != 0 or not out.exists():
                raise CompileError(f"nvcc failed (exit {r.returncode}): {' '.join(args)}\n"
                                   f"{r.stderr.decode(errors='replace').strip()}")
            return out.read_bytes()

    def _nvrtc(self, source: str) -> bytes:
        lib = find_nvrtc()
        assert lib is not None
        prog = ctypes.c_void_p()
        _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None),
               "nvrtcCreateProgram")
        try:
            arch = "compute_" + self.arch[len("sm_"):]
            opts = [*FLAGS, f"-arch={arch}", *(f"-I{d}" for d in cuda_include_dirs())]
            arr = (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts))
            rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
            if rc != 0:
                size = ctypes.c_size_t()
                lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                lib.nvrtcGetProgramLog(prog, log)
                raise CompileError(f"NVRTC failed ({' '.join(opts)}):\n{log.value.decode(errors='replace').strip()}")
            size = ctypes.c_size_t()
            _check(lib, lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
            ptx = ctypes.create_string_buffer(size.value)
            _check(lib, lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
            return ptx.raw.rstrip(b"\0")
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _check(lib: ctypes.CDLL, rc: int, what: str) -> None:
    if rc != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise CompileError(f"{what} failed: {lib.nvrtcGetErrorString(rc).decode()}")


@cache
def _nvcc_version(nvcc: str) -> str:
    try:
        r = subprocess.run([nvcc, "--version"], capture_output=True, timeout=60)
        return f"{nvcc}|{r.stdout.decode(errors='replace').strip()}"
    except (OSError, subprocess.SubprocessError):
        return nvcc
