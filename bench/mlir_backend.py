"""Compile and run time of the mlir backend beside llvm and c, per kernel, on a few programs.

Programs: matmul 64x64 (the llvm backend took minutes at O3 on the 128 one), and elementwise and a softmax-style
row reduction over 1024x1024 f32 (256 with --quick).
Each graph is lowered once per backend (its own pipeline) and every kernel of the schedule is compiled with the disk
cache off (UOPIR_DISABLE_CACHE=1), timed from the device program to a loaded, callable kernel (render or export, the
compiler, the JIT); the mlir figure is also split into its steps (export without xDSL's verifier, the mlir-opt +
mlir-translate processes, LLVM and object code in llvmlite). Run time is the best of a few realizes after a warm-up
(the mlir backend runs each kernel on one core; llvm and c split a parallel kernel across the cores). The machine
may be shared: compare the backends within one run (ratios), not across runs. Lines (nothing asserted):
    mlir_backend compile program=<p> kernels=<n> device=<d> ms_per_kernel=<wall> [export_ms= tools_ms= llvm_ms=]
    mlir_backend run program=<p> device=<d> us=<best realize> ratio_to_llvm=<llvm time / this time>
    mlir_backend batch kernels=<n> one_batch_ms=<all in one tool pair> one_by_one_ms=<a tool pair each>
Run: python3 bench/mlir_backend.py [--quick]
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _timing import best  # noqa: E402  (bench/ is the script's folder)

from uopir.backends import get_backend  # noqa: E402
from uopir.backends.realize import cache_key  # noqa: E402
from uopir.dialects import device as D  # noqa: E402
from uopir.frontend.tensor import Tensor  # noqa: E402
from uopir.ir.regions import regions_of  # noqa: E402
from uopir.ir.uop import UOp  # noqa: E402


def programs(n: int, mm: int) -> dict[str, UOp]:
    rng = np.random.default_rng(0)
    a, b, c = (Tensor(rng.standard_normal((n, n)).astype(np.float32), device="python") for _ in range(3))
    p, q = (Tensor(rng.standard_normal((mm, mm)).astype(np.float32), device="python") for _ in range(2))
    return {f"matmul{mm}": (p @ q).uop, f"elementwise{n}": (a * b + c).relu().uop,
            f"reduction{n}": (a - a.max(1, keepdim=True)).exp().sum(1).uop}


def kernels(backend, root: UOp) -> list[UOp]:
    key, _, _, _ = cache_key(root)
    lowered = backend.lower(key)
    return [r for u in lowered.toposort() for r in regions_of(u) if r.op is D.PROGRAM]


def compile_times(name: str, root: UOp, devices: list[str]) -> None:
    for d in devices:
        be = get_backend(d)
        progs = kernels(be, root)
        t0 = time.perf_counter()
        try:
            for p in progs:
                be.runtime.ready(be.compile(p))
        except Exception as e:  # noqa: BLE001 - a figure line says why there is none
            print(f"mlir_backend compile program={name} device={d} failed: {str(e).splitlines()[:3]}", flush=True)
            continue
        dt = (time.perf_counter() - t0) / len(progs)
        extra = ""
        if d == "mlir":
            from uopir.backends.mlir.compiler import to_llvm_ir

            t1 = time.perf_counter()
            srcs = [be.source(p) for p in progs]
            t2 = time.perf_counter()
            irs = [to_llvm_ir([s], be.compiler.tools)[0] for s in srcs]
            t3 = time.perf_counter()
            for s, ir in zip(srcs, irs, strict=True):
                be.compiler.object_code(s, ir)
            t4 = time.perf_counter()
            k = len(progs)
            extra = f" export_ms={(t2 - t1) / k * 1e3:.1f} tools_ms={(t3 - t2) / k * 1e3:.1f} " \
                    f"llvm_ms={(t4 - t3) / k * 1e3:.1f}"
        print(f"mlir_backend compile program={name} kernels={len(progs)} device={d} ms_per_kernel={dt * 1e3:.1f}"
              f"{extra}", flush=True)


def run_times(name: str, root: UOp, devices: list[str]) -> None:
    times = {}
    for d in devices:
        try:
            times[d] = best(lambda d=d: get_backend(d).realize(root), 5)
        except Exception as e:  # noqa: BLE001
            print(f"mlir_backend run program={name} device={d} failed: {str(e).splitlines()[:3]}", flush=True)
    for d, t in times.items():
        ratio = f" ratio_to_llvm={times['llvm'] / t:.2f}" if "llvm" in times else ""
        print(f"mlir_backend run program={name} device={d} us={t * 1e6:.1f}{ratio}", flush=True)


def batching(roots: list[UOp]) -> None:
    from uopir.backends.mlir.compiler import to_llvm_ir

    be = get_backend("mlir")
    srcs = []
    for r in roots:
        for p in kernels(be, r):
            try:
                srcs.append(be.source(p))
            except Exception:  # noqa: BLE001 - a program the exporter rejects (reported above)
                pass
    srcs *= 4  # about a dozen kernels
    t0 = time.perf_counter()
    to_llvm_ir(srcs, be.compiler.tools)
    t1 = time.perf_counter()
    for s in srcs:
        to_llvm_ir([s], be.compiler.tools)
    t2 = time.perf_counter()
    print(f"mlir_backend batch kernels={len(srcs)} one_batch_ms={(t1 - t0) * 1e3:.1f} "
          f"one_by_one_ms={(t2 - t1) * 1e3:.1f}", flush=True)


def main() -> None:
    mlir = get_backend("mlir")
    if not mlir.available:
        print(f"mlir_backend skipped: {mlir.reason}")
        return
    os.environ["UOPIR_DISABLE_CACHE"] = "1"  # every compile runs
    devices = [d for d in ("mlir", "llvm", "c") if get_backend(d).available]
    # matmul at 64: one of 256 and more holds a heap kernel.local, whose export is not valid MLIR yet (see the notes)
    n = 256 if "--quick" in sys.argv else 1024
    progs = programs(n, 64)
    for name, root in progs.items():
        compile_times(name, root, devices)
    for name, root in progs.items():
        run_times(name, root, devices)
    batching(list(progs.values()))


if __name__ == "__main__":
    main()
