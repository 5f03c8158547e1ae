"""The MLIR compiler: exported MLIR text -> LLVM dialect (`mlir-opt`) -> LLVM IR (`mlir-translate`) -> object code
(llvmlite, as the llvm backend).

    func/scf/arith/math/memref/vector --mlir-opt LOWERING--> llvm dialect --mlir-translate--> LLVM IR
        --LLVMCompiler.optimize (O3, host cpu)--> object code (disk cache) --> the llvm backend's JIT

Both tools are subprocesses (LLVM's Debian package `mlir-19-tools`; found by `tools.find_mlir_tool`). A process
start costs tens of milliseconds, so kernels are lowered in batches: one `mlir-opt --split-input-file` and one
`mlir-translate --split-input-file` for every kernel waiting (`compile_async` queues a kernel; a worker thread takes
all the queued ones at once, so the kernels of one schedule share one pair of processes). A batch the tools reject
is retried kernel by kernel, so an error names its own kernel. The LLVM IR goes through the llvm backend's
`LLVMCompiler.optimize` (parse, verify, O3 with the vectorizers for the host cpu) on a thread pool; llvmlite's
LLVM (22 with llvmlite 0.50) reads mlir-translate-19's IR as it is (older IR parses in newer LLVM), so no `llc` step
is needed. The runtime calls a small wrapper, `NAME.DIGEST` (a digest of the MLIR text, as the llvm backend's
symbols), that takes one pointer per buffer, the call of the C and LLVM kernels (uopir.backends.cpu.runtime), and
fills in the memref descriptors of MLIR's calling convention (`use-bare-ptr-memref-call-conv` rejects the dynamic
`memref<?xT>` arguments the exporter writes); the kernel is internal, inlined into it, so the descriptors cost nothing.

The cache entry is the object code, keyed by the MLIR text and namespaced by the tools' and LLVM's versions and the
host (a hit runs neither tool).
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import subprocess
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from uopir.backends.cache import cache_get, cache_key, cache_put
from uopir.backends.interface import Compiler
from uopir.backends.llvm.compiler import CompileError, LLVMCompiler, symbol
from uopir.backends.mlir.tools import find_mlir_tool

__all__ = ["LOWERING", "MLIRTools", "MLIRCompiler", "MLIRCompileError", "mlir_tools", "to_llvm_ir", "entry_name",
           "BATCH_MAX"]

# mlir-opt's passes, in order:
# - canonicalize, which also hoists the allocas of an scf.parallel body's memref.alloca_scope and inlines the scope
#   (it must be gone before scf-to-cf splits its body into blocks; the loops run one after the other, so the
#   iterations may share the allocas);
# - every bf16 <-> f32 conversion as integer ops (LLVM's own fptrunc/fpext of bfloat flush subnormals to zero on x86;
#   uopir rounds to nearest even and keeps them; arith-emulate-unsupported-floats is left out: it loses the rounding
#   after each bf16 op);
# - affine and vector transfers to scf, math to LLVM intrinsics and what has none to libm calls (unrolled over vectors
#   into vector ops, so before the vector lowering), scf to cf, then every dialect to llvm. Memref arguments keep
#   MLIR's descriptor convention (the bare-pointer one rejects the `memref<?xT>` the exporter writes): `wrapper` adds
#   the function the runtime calls, with one pointer per buffer.
LOWERING: tuple[str, ...] = (
    "canonicalize", "lower-affine", "arith-expand{include-bf16=true}", "convert-vector-to-scf",
    "convert-math-to-llvm", "convert-math-to-libm", "convert-scf-to-cf", "convert-vector-to-llvm",
    "expand-strided-metadata", "finalize-memref-to-llvm", "convert-arith-to-llvm", "convert-index-to-llvm",
    "convert-func-to-llvm", "convert-cf-to-llvm", "reconcile-unrealized-casts")
PIPELINE = f"builtin.module({','.join(LOWERING)})"
SPLIT = "\n// -----\n"  # the separator of --split-input-file
BATCH_MAX = 64  # kernels per pair of tool processes
TIMEOUT_S = 600


class MLIRCompileError(CompileError):
    """mlir-opt or mlir-translate rejected a kernel (the message holds the tool's own words)."""


@dataclass(frozen=True)
class MLIRTools:
    opt: str  # the mlir-opt executable
    translate: str  # the mlir-translate executable
    version: str  # `mlir-opt --version`'s LLVM version line


@cache
def mlir_tools() -> MLIRTools | None:
    """mlir-opt and mlir-translate with their version, or None when either is missing (or does not run)."""
    opt, tr = find_mlir_tool("mlir-opt"), find_mlir_tool("mlir-translate")
    if opt is None or tr is None:
        return None
    try:
        out = subprocess.run([opt, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    line = next((x.strip() for x in out.stdout.splitlines() if "version" in x.lower()), out.stdout.strip())
    return MLIRTools(opt, tr, line)


_ENTRY = re.compile(r"func\.func\s+(?:public\s+)?@(\"[^\"]*\"|[\w$.\-]+)\s*\(")


def entry_name(source: str) -> str:
    """The name of the kernel function an MLIR module defines (its first public func.func)."""
    m = _ENTRY.search(source)
    if m is None:
        raise MLIRCompileError("the MLIR module defines no public func.func (the kernel)")
    return m.group(1).strip('"')


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside any bracket."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return parts


_SCALARS = {"index": "i64", "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "f16": "half",
            "bf16": "bfloat", "f32": "float", "f64": "double"}


def entry_args(source: str) -> list[str]:
    """The MLIR types of the kernel function's arguments, in order."""
    m = _ENTRY.search(source)
    if m is None:
        raise MLIRCompileError("the MLIR module defines no public func.func (the kernel)")
    depth, i = 1, m.end()
    start = i
    while depth and i < len(source):
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    types = []
    for arg in _split_top(source[start:i - 1]):
        _, _, rest = arg.partition(":")
        depth, ty = 0, []
        for ch in rest.strip():  # the type ends where the attribute dictionary starts
            if ch == "{" and depth == 0:
                break
            depth += {"<": 1, ">": -1}.get(ch, 0)
            ty.append(ch)
        types.append("".join(ty).strip())
    return types


def wrapper(source: str, sym: str) -> str:
    """LLVM IR of `sym`: the kernel called with one pointer per memref argument (its descriptor filled in: the
    pointer twice, offset 0, sizes 0, unit strides; the exporter's memrefs are contiguous and read no size) and the
    scalar arguments as they are (an index is an i64), which is how the cpu runtime calls kernels."""
    name = entry_name(source)
    params, args = [], []
    for k, ty in enumerate(entry_args(source)):
        if ty.startswith("memref<"):
            dims = [d for d in ty[len("memref<"):-1].split(",")[0].split("x")[:-1]]
            rank = len(dims)
            strides = []
            for j in range(rank):  # row-major unit strides of a static shape (1 where a size is dynamic)
                inner = dims[j + 1:]
                strides.append(math.prod(int(d) for d in inner) if all(d.isdigit() for d in inner) else 1)
            params.append(f"ptr %a{k}")
            args += [f"ptr %a{k}", f"ptr %a{k}", "i64 0", *(["i64 0"] * rank), *(f"i64 {st}" for st in strides)]
        elif ty in _SCALARS:
            params.append(f"{_SCALARS[ty]} %a{k}")
            args.append(f"{_SCALARS[ty]} %a{k}")
        else:
            raise MLIRCompileError(f"kernel {name}: argument {k} has type {ty}, which the cpu runtime cannot pass")
    return (f'\ndefine void @"{sym}"({", ".join(params)}) {{\n  call void @"{name}"({", ".join(args)})\n'
            f"  ret void\n}}\n")


def _tool(args: list[str], text: str, what: str) -> str:
    try:
        out = subprocess.run(args, input=text, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise MLIRCompileError(f"{what} did not finish within {TIMEOUT_S} s") from None
    except OSError as e:
        raise MLIRCompileError(f"{what} could not run: {e}") from None
    if out.returncode != 0:
        err = out.stderr.strip() or f"exit status {out.returncode}"
        raise MLIRCompileError(f"{what} rejected the kernel's MLIR:\n{err}")
    return out.stdout


def _lower(sources: Sequence[str], tools: MLIRTools) -> list[str]:
    """One mlir-opt and one mlir-translate process for all of `sources`; their LLVM IR in order (raises on any
    error)."""
    split = ["--split-input-file"] if len(sources) > 1 else []
    llvm_dialect = _tool([tools.opt, *split, f"--pass-pipeline={PIPELINE}", "-"], SPLIT.join(sources), "mlir-opt")
    ir = _tool([tools.translate, *split, "--mlir-to-llvmir", "-"], llvm_dialect, "mlir-translate")
    if len(sources) == 1:
        return [ir]
    parts = re.split(r"^(?=; ModuleID = )", ir, flags=re.M)  # the translated modules, each with its header
    parts = [p for p in parts if p.strip()]
    if len(parts) != len(sources):
        raise MLIRCompileError(f"mlir-translate gave {len(parts)} modules for {len(sources)} kernels")
    return parts


def to_llvm_ir(sources: Sequence[str], tools: MLIRTools | None = None) -> list[str | MLIRCompileError]:
    """The LLVM IR of each MLIR module, lowered BATCH_MAX at a time (one pair of tool processes per batch); a batch
    that fails is lowered module by module, so each error belongs to its own module."""
    tools = tools or mlir_tools()
    if tools is None:
        raise MLIRCompileError("mlir-opt and mlir-translate are not installed (Debian package mlir-19-tools)")
    out: list[str | MLIRCompileError] = []
    for i in range(0, len(sources), BATCH_MAX):
        chunk = list(sources[i:i + BATCH_MAX])
        try:
            out.extend(_lower(chunk, tools))
            continue
        except MLIRCompileError as e:
            if len(chunk) == 1:
                out.append(e)
                continue
        for s in chunk:
            try:
                out.extend(_lower([s], tools))
            except MLIRCompileError as e:
                out.append(e)
    return out


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="uopir-mlir")
        return _POOL


class _Batcher:
    """Kernels waiting for the tools: a worker thread takes every queued one at once (one batch), lowers them, and
    hands each to the LLVM thread pool; kernels queued meanwhile form the next batch."""

    def __init__(self, compiler: MLIRCompiler):
        self.compiler = compiler
        self._lock = threading.Lock()
        self._pending: list[tuple[str, bool, Future[bytes]]] = []
        self._running = False

    def submit(self, source: str, quick: bool) -> Future[bytes]:
        fut: Future[bytes] = Future()
        with self._lock:
            self._pending.append((source, quick, fut))
            start, self._running = not self._running, True
        if start:
            threading.Thread(target=self._work, name="uopir-mlir-tools", daemon=True).start()
        return fut

    def _work(self) -> None:
        while True:
            with self._lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._running = False
                    return
            try:
                irs: list[str | MLIRCompileError] = list(to_llvm_ir([s for s, _, _ in batch], self.compiler.tools))
            except Exception as e:  # noqa: BLE001 - every kernel of the batch gets the error
                irs = [MLIRCompileError(str(e))] * len(batch)
            for (src, quick, fut), ir in zip(batch, irs, strict=True):
                if isinstance(ir, Exception):
                    fut.set_exception(ir)
                else:
                    _pool().submit(self._finish, src, quick, ir, fut)

    def _finish(self, source: str, quick: bool, ir: str, fut: Future[bytes]) -> None:
        try:
            binary = self.compiler.object_code(source, ir, quick)
            cache_put(self.compiler.name, self.compiler.key(source, quick), binary)
            fut.set_result(binary)
        except Exception as e:  # noqa: BLE001 - the kernel's first call raises it
            fut.set_exception(e)


_LOCAL = threading.local()
# cpu features whose bf16 conversions flush subnormals to zero (VCVTNEPS2BF16 and the AVX-NE-CONVERT forms): LLVM
# picks them for every bfloat fptrunc and for the f32 round trip it legalizes bfloat selects and arithmetic with
FLUSHING_BF16 = ("avx512bf16", "avxneconvert")


def _exact_bf16(c: LLVMCompiler) -> LLVMCompiler:
    """`c` with the FLUSHING_BF16 features off: LLVM then converts to bf16 with integer code that keeps subnormals,
    as uopir's semantics do."""
    if c.host is not None:
        feats = [f for f in c.host.features.split(",") if f.lstrip("+-") not in FLUSHING_BF16]
        c.host = replace(c.host, features=",".join(feats + [f"-{f}" for f in FLUSHING_BF16]))
    return c


class MLIRCompiler(Compiler):
    """MLIR text -> object code through mlir-opt, mlir-translate and llvmlite (through the disk cache): LLVM at the
    level of `llvm` (O3), or of `quick_llvm` (O1) for a kernel that does little work (the C backend's rule: the
    compile, which a first realize waits for, costs more than the run; uopir has unrolled and vectorized the kernel
    already, and O1 takes half of O3's time)."""

    def __init__(self, llvm: LLVMCompiler | None = None, quick_llvm: LLVMCompiler | None = None):
        self.llvm = llvm if llvm is not None else _exact_bf16(LLVMCompiler())
        self.quick_llvm = quick_llvm if quick_llvm is not None else _exact_bf16(LLVMCompiler(opt=1))
        self.tools = mlir_tools()
        self.flags = (PIPELINE, *self.llvm.flags)
        self.quick_flags = (PIPELINE, *self.quick_llvm.flags)
        self._batcher = _Batcher(self)

    def key(self, source: str, quick: bool = False) -> str:
        """The disk cache key of `source` at the quick or the full level."""
        return cache_key(self.name, self.quick_flags if quick else self.flags, source)

    def missing(self) -> list[str]:
        """What this machine lacks for compiling (empty when it can)."""
        out = []
        if self.tools is None:
            out.append("mlir-opt/mlir-translate (Debian package mlir-19-tools)")
        if not self.llvm.available:
            out.append("llvmlite (pip install llvmlite, or the test extra)")
        return out

    @property
    def available(self) -> bool:
        return not self.missing()

    @property
    def name(self) -> str:  # type: ignore[override]
        """The cache namespace: the MLIR tools' version and the llvm compiler's namespace (LLVM, host)."""
        ident = "none" if self.tools is None else self.tools.version
        return "mlir-" + hashlib.sha256(f"{ident}\0{self.llvm.name}".encode()).hexdigest()[:16]

    def _tm(self) -> Any:
        tm = getattr(_LOCAL, "tm", None)  # one target machine per thread
        if tm is None:
            assert self.llvm.host is not None
            tm = _LOCAL.tm = self.llvm.host.target_machine()
        return tm

    def object_code(self, source: str, llvm_ir: str, quick: bool = False) -> bytes:
        """The object code of `llvm_ir` (translated from the MLIR `source`) with the `wrapper` the runtime calls,
        `NAME.DIGEST`, at O3 (the kernel itself made internal, so it is inlined into the wrapper)."""
        name = entry_name(source)
        sym = symbol(name, source)
        ir, n = re.subn(rf'^define (.*?)@"?{re.escape(name)}"?\(', lambda m: f'define internal {m.group(1)}@"{name}"(',
                        llvm_ir, count=1, flags=re.M)
        if n != 1:
            raise MLIRCompileError(f"mlir-translate's LLVM IR does not define the kernel {name}")
        mod = (self.quick_llvm if quick else self.llvm).optimize(ir + wrapper(source, sym))
        if not any(f.name == sym and not f.is_declaration for f in mod.functions):
            raise MLIRCompileError(f"the compiled module lost the kernel's entry {sym}")
        return bytes(self._tm().emit_object(mod))

    def compile(self, source: str, quick: bool = False) -> bytes:
        ir = to_llvm_ir([source], self.tools)[0]
        if isinstance(ir, Exception):
            raise ir
        return self.object_code(source, ir, quick)

    def compile_async(self, source: str, quick: bool = False) -> bytes | Future[bytes]:
        """The object code: bytes on a cache hit, else a Future of a compile batched with the other kernels queued
        now (see _Batcher)."""
        hit = cache_get(self.name, self.key(source, quick))
        if hit is not None:
            return hit
        return self._batcher.submit(source, quick)

    def compile_many(self, sources: Sequence[str], quick: bool = False) -> list[bytes]:
        """Every source's object code (cached ones read, the others in one batch); the first error raises."""
        futs = [self.compile_async(s, quick) for s in sources]
        return [f.result() if isinstance(f, Future) else f for f in futs]
