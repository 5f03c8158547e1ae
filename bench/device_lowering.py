"""Compile time of the lowering to device programs, pass by pass (`default{target=c}` minus the tensor passes), on a
512x512 matmul, a small CNN forward (2 conv + linear, batch 8, 28x28), and the growth of kernel-to-device +
device-linearize with kernel size (one kernel of a long elementwise chain over a reduction: 2*10^3 .. 2*10^4 ops; a
ratio near 10 per 10x is linear). Then the reference interpreter on one 64x64x64 matmul: the kernel level
(data-parallel) and the linearized program (loops). Usage: python bench/device_lowering.py"""
from __future__ import annotations

import time

import numpy as np

import uopir  # noqa: F401  (registers the dialects)
import uopir.backends  # noqa: F401  (registers the device targets)
from uopir.backends.python import run_kernel, run_program
from uopir.dialects import kernel, tensor
from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.manager import PassManager

DEVICE_PASSES = ["kernel-to-device{target=c}", "device-decompose{target=c}", "device-devectorize{target=c}",
                 "device-linearize"]


def _per_pass(g: UOp) -> list[tuple[str, float]]:
    out = []
    for p in ["canonicalize", "tensor-to-kernel", *DEVICE_PASSES]:
        pm = PassManager.parse(p)
        t = time.perf_counter()
        g = pm.run(g)
        out.append((p.split("{")[0], time.perf_counter() - t))
    return out


def _rand(*shape: int) -> Tensor:
    return Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))


def _cnn() -> UOp:
    x = _rand(8, 1, 28, 28)
    c1 = x.conv2d(_rand(4, 1, 3, 3), _rand(4)).relu()
    c2 = c1.conv2d(_rand(8, 4, 3, 3), _rand(8)).relu()
    return UOp.sink((c2.reshape(8, 8 * 24 * 24) @ _rand(8 * 24 * 24, 10)).uop)


def _chain_kernel(n: int) -> UOp:
    """out[i] = f(sum_j x[i, j]) with f a chain of n multiply-adds, written at kernel level (tensor-to-kernel
    recurses over long chains)."""
    f32, idx = dtypes.float32, dtypes.index
    out, x = (UOp(kernel.PARAM, f32.ptr(), (), i) for i in range(2))
    i = UOp(kernel.RANGE, idx, (UOp.const(idx, 4),), (0, "loop"))
    j = UOp(kernel.RANGE, idx, (UOp.const(idx, 16),), (1, "reduce"))
    y = UOp(kernel.REDUCE, f32, (UOp(kernel.LOAD, f32, (UOp(kernel.INDEX, x.dtype, (x, i * 16 + j)),)), j), "add")
    for k in range(n):
        y = y * UOp.const(f32, 1.0001) + UOp.const(f32, 0.5 if k % 2 else 0.25)
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, out.dtype, (out, i)), y))
    return UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st, i)),), "chain")


def main() -> None:
    for label, g in (("matmul 512", UOp.sink((_rand(512, 512) @ _rand(512, 512)).uop)), ("cnn", _cnn())):
        steps = _per_pass(g)
        total = sum(t for _, t in steps)
        print(f"{label}: total {total * 1e3:.1f} ms | " + ", ".join(f"{n} {t * 1e3:.1f}" for n, t in steps))
    prev = None
    for n in (1000, 3000, 10000):
        sched = _chain_kernel(n)
        t = time.perf_counter()
        PassManager.parse(",".join(DEVICE_PASSES)).run(sched)
        dt = time.perf_counter() - t
        ratio = "" if prev is None else f" (x{dt / prev[1]:.1f} for x{n / prev[0]:.0f} ops)"
        print(f"device passes, kernel of ~{2 * n} ops: {dt * 1e3:.0f} ms{ratio}")
        prev = (n, dt)
    a, b = _rand(64, 64), _rand(64, 64)
    sched = PassManager.parse("tensor-to-kernel").run(UOp.sink((a @ b).uop))
    call = next(u for u in sched.toposort() if u.op is tensor.CALL)
    kdef = call.arg[0]
    prog = PassManager.parse(",".join(DEVICE_PASSES)).run(kdef)
    bufs = [np.zeros(64 * 64, np.float32), a.numpy().reshape(-1), b.numpy().reshape(-1)]
    assert kdef.op is kernel.DEF
    for label, fn, body in (("run_kernel", run_kernel, kdef), ("run_program", run_program, prog)):
        t = time.perf_counter()
        fn(body, bufs)
        print(f"interpreter {label} 64^3 matmul: {(time.perf_counter() - t) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
