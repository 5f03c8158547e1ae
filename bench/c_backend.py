"""The C backend: cold compile + run, steady-state matmul GFLOP/s and elementwise GB/s, beside numpy and a plain C loop.

Prints machine-readable lines (nothing is asserted):
    c_backend cold program=matmul512 seconds=<first realize in a fresh process: lowering, compile, run>
    c_backend matmul n=<N> gflops=<uopir on c> numpy_gflops=<numpy> ratio=<c / numpy> cpu_gflops=.. numpy_cpu_gflops=..
        cpu_ratio=.. (the same from process CPU time) [tinygrad_gflops=<tinygrad's CPU device, when installed>]
    c_backend elementwise op=a*b+c n=16777216 gbps=<uopir on c> plain_c_gbps=<the same loop in C> ratio=<c / plain>
    c_backend tiled_matmul n=1024 gflops=<a hand-tiled device program (4 rows x 32 columns of f32x16 accumulators),
        split across the cores> threads=<cores>: what the renderer and runtime reach on kernel-optimize's forms
Steady-state figures are the best of a few runs after a warm-up; the cold figure uses a fresh cache folder.
Skipped (one line saying so) when no C compiler is installed. Run: python3 bench/c_backend.py [--quick]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _timing import best  # noqa: E402  (bench/ is the script's folder)

from uopir.backends import get_backend  # noqa: E402
from uopir.backends.c.compiler import find_cc  # noqa: E402
from uopir.dialects import core as C  # noqa: E402
from uopir.dialects import device as D  # noqa: E402
from uopir.dialects import kernel as K  # noqa: E402
from uopir.frontend.tensor import Tensor  # noqa: E402
from uopir.ir.dtype import dtypes  # noqa: E402
from uopir.ir.uop import UOp  # noqa: E402

REPEAT = 5
COLD = """
import time, numpy as np
t0 = time.perf_counter()
from uopir import Tensor
a = Tensor(np.ones((512, 512), np.float32), device="c")
b = Tensor(np.ones((512, 512), np.float32), device="c")
(a @ b).numpy()
print(time.perf_counter() - t0)
"""
PLAIN = r"""
#include <stdint.h>
void axpb(float* restrict o, const float* restrict a, const float* restrict b, const float* restrict c, int64_t n) {
  for (int64_t i = 0; i < n; i++) o[i] = a[i] * b[i] + c[i];
}
"""



def cold() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
        env = {**os.environ, "UOPIR_CACHE_DIR": cache, "UOPIR_C_TIERED": "1"}  # _timing turned it off for the rest
        out = subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, env=env, timeout=600,
                             cwd=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        secs = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else f"failed({out.stderr.strip()[-200:]})"
        print(f"c_backend cold program=matmul512 seconds={secs}")


def best_cpu(fn, repeat: int = REPEAT) -> float:
    """The least process CPU time (all threads) of a few runs: the work, less sensitive than wall time to other
    processes sharing the cores."""
    fn()
    ts = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        ts.append(time.process_time() - t)
    return min(ts)


def tinygrad_seconds(a: np.ndarray, b: np.ndarray) -> float | None:
    """Steady-state seconds of a @ b on tinygrad's CPU device, when tinygrad is installed."""
    try:
        from tinygrad import Tensor as TgTensor
    except ImportError:
        return None
    ta, tb = TgTensor(a, device="CPU").realize(), TgTensor(b, device="CPU").realize()
    return best(lambda: (ta @ tb).realize(), 2)


def matmul(n: int) -> None:
    """Wall-clock GFLOP/s of uopir on c, numpy (and tinygrad when installed) in one run; and the same from process
    CPU time (`cpu_` fields: flops per second of core time, which a loaded machine disturbs less)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    ta, tb = Tensor(a, device="c").realize(), Tensor(b, device="c").realize()
    reps = 2 if n > 1024 else REPEAT
    t = best(lambda: (ta @ tb).realize(), reps)
    tn = best(lambda: a @ b)
    tc, tnc = best_cpu(lambda: (ta @ tb).realize(), reps), best_cpu(lambda: a @ b)
    tg = tinygrad_seconds(a, b)
    flops = 2 * n**3
    extra = f" tinygrad_gflops={flops / tg / 1e9:.2f}" if tg else ""
    print(f"c_backend matmul n={n} gflops={flops / t / 1e9:.2f} numpy_gflops={flops / tn / 1e9:.2f} "
          f"ratio={tn / t:.3f} cpu_gflops={flops / tc / 1e9:.2f} numpy_cpu_gflops={flops / tnc / 1e9:.2f} "
          f"cpu_ratio={tnc / tc:.3f}{extra}")


def elementwise(n: int = 16777216) -> None:
    import ctypes

    from uopir.backends.c.compiler import CCompiler
    from uopir.backends.c.runtime import load_library

    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    ta, tb, tc = (Tensor(x, device="c").realize() for x in (a, b, c))
    t = best(lambda: (ta * tb + tc).realize())
    lib = load_library(CCompiler().compile_cached(PLAIN))
    fn = lib.axpb
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64]
    o = np.empty_like(a)
    tp = best(lambda: fn(o.ctypes.data, a.ctypes.data, b.ctypes.data, c.ctypes.data, n))
    nbytes = 16 * n  # three reads and a write of f32
    print(f"c_backend elementwise op=a*b+c n={n} gbps={nbytes / t / 1e9:.2f} plain_c_gbps={nbytes / tp / 1e9:.2f} "
          f"ratio={tp / t:.3f}")


def _idx(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def tiled_program(n: int, rows: int = 4, vecs: int = 2, width: int = 16) -> UOp:
    """out = a @ b as a device program in kernel-optimize's register-tiled form: a global id over row blocks (split
    across the cores), per tile rows x vecs accumulators of `width` f32 lanes, a sequential k loop."""
    f32, v = dtypes.float32, dtypes.float32.vec(width)
    out, a, b = (UOp(K.PARAM, f32.ptr(), (), i) for i in range(3))
    io = UOp(D.SPECIAL, dtypes.index, (_idx(n // rows),), ("global_id", 0))
    jo = UOp(D.LOOP, dtypes.index, (_idx(n // (width * vecs)),), 0)
    accs = [[UOp(D.ACC, v, (UOp.const(v, 0.0),), r * vecs + c) for c in range(vecs)] for r in range(rows)]
    k = UOp(D.LOOP, dtypes.index, (_idx(n),), 1)
    ops = [io, jo, *(x for row in accs for x in row), k]
    bv = []
    for c in range(vecs):
        ld = UOp(K.LOAD, v, (UOp(K.INDEX, b.dtype, (b, k * _idx(n) + jo * _idx(width * vecs) + _idx(c * width))),))
        ops.append(ld)
        bv.append(ld)
    for r in range(rows):
        av = UOp(K.LOAD, f32, (UOp(K.INDEX, a.dtype, (a, (io * _idx(rows) + _idx(r)) * _idx(n) + k)),))
        bc = UOp(C.VECTORIZE, v, (av,) * width)
        ops += [av, bc]
        for c in range(vecs):
            m = UOp(C.MUL, v, (bc, bv[c]))
            s = UOp(C.ADD, v, (accs[r][c], m))
            ops += [m, s, UOp(D.ACCSTORE, dtypes.void, (accs[r][c], s))]
    ops.append(UOp(D.ENDLOOP, dtypes.void, (k,)))
    for r in range(rows):
        for c in range(vecs):
            off = (io * _idx(rows) + _idx(r)) * _idx(n) + jo * _idx(width * vecs) + _idx(c * width)
            ops.append(UOp(K.STORE, dtypes.void, (UOp(K.INDEX, out.dtype, (out, off)), accs[r][c])))
    ops.append(UOp(D.ENDLOOP, dtypes.void, (jo,)))
    return UOp(D.PROGRAM, dtypes.void, tuple(ops), f"tiled_mm{n}")


def tiled(n: int = 1024) -> None:
    be = get_backend("c")
    prog = be.compile(tiled_program(n))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    o = np.zeros((n, n), np.float32)
    t = best(lambda: be.runtime.launch(prog, [o, a, b]))
    err = float(np.abs(o - a @ b).max())
    print(f"c_backend tiled_matmul n={n} gflops={2 * n**3 / t / 1e9:.2f} threads={be.runtime.threads} "
          f"max_abs_err={err:.2e}")


def main() -> None:
    if find_cc() is None:
        print("c_backend skipped: no C compiler ($CC, clang or cc) is installed")
        return
    quick = "--quick" in sys.argv
    cold()
    elementwise(1 << 20 if quick else 16777216)
    tiled(512 if quick else 1024)
    for n in (256,) if quick else (1024, 2048):
        matmul(n)


if __name__ == "__main__":
    main()
