"""The gpu lowering's figures on one device (opencl or cuda): matmul GFLOP/s and a*b+c GB/s (as bench/backends.py),
a long sum (GB/s) and softmax rows (GB/s), each beside numpy in the same run, and the same workloads with
`UOPIR_NOOPT=1` (one work item per output element, global ids only: the lowering before work-groups and group
reductions) for a ratio. Nothing is asserted. Run: python3 bench/gpu_figures.py opencl|cuda [--quick]

    gpu_figures <workload> device=<d> value=<uopir> unit=<GFLOP/s|GB/s> numpy=<numpy> noopt=<uopir with NOOPT>
        ratio_numpy=<uopir / numpy> ratio_noopt=<uopir / noopt>
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _timing import best  # noqa: E402  (bench/ is the script's folder)

from uopir.frontend.tensor import Tensor  # noqa: E402


def timed(dev: str, build: Callable[[list[Tensor]], Tensor], arrays: list[np.ndarray], noopt: bool) -> float:
    """Best time of realizing build(inputs) on dev (inputs already on the device); NOOPT toggled for the lowering."""
    old = os.environ.get("UOPIR_NOOPT")
    os.environ["UOPIR_NOOPT"] = "1" if noopt else "0"
    try:
        ts = [Tensor(a, device=dev).realize() for a in arrays]
        return best(lambda: build(ts).realize(), 3)
    finally:
        if old is None:
            os.environ.pop("UOPIR_NOOPT", None)
        else:
            os.environ["UOPIR_NOOPT"] = old


def report(name: str, dev: str, work: float, unit: str, t: float, tn: float, t0: float) -> None:
    v, vn, v0 = work / t / 1e9, work / tn / 1e9, work / t0 / 1e9
    print(f"gpu_figures {name} device={dev} value={v:.2f} unit={unit} numpy={vn:.2f} noopt={v0:.2f} "
          f"ratio_numpy={tn / t:.3f} ratio_noopt={t0 / t:.3f}", flush=True)


def main() -> None:
    dev = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "opencl"
    quick = "--quick" in sys.argv
    from uopir.backends.registry import get_backend

    be = get_backend(dev)
    if not be.available:
        print(f"gpu_figures skipped: device {dev} is not available: {be.reason}")
        return
    rng = np.random.default_rng(0)
    n = 256 if quick else 1024
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    cases: list[tuple[str, Callable[[list[Tensor]], Tensor], list[np.ndarray], Callable[[], object], float, str]] = [
        (f"matmul n={n}", lambda t: t[0] @ t[1], [a, b], lambda: a @ b, 2.0 * n**3, "GFLOP/s")]
    m = 1 << (20 if quick else 24)
    x, y, z = (rng.standard_normal(m).astype(np.float32) for _ in range(3))
    out = np.empty_like(x)
    cases.append((f"elementwise op=a*b+c n={m}", lambda t: t[0] * t[1] + t[2], [x, y, z],
                  lambda: np.add(np.multiply(x, y, out=out), z, out=out), 16.0 * m, "GB/s"))
    s = rng.random(1 << 20).astype(np.float32)
    cases.append(("sum n=1048576", lambda t: t[0].sum(), [s], lambda: s.sum(), 4.0 * s.size, "GB/s"))
    r = rng.standard_normal((8, 2048) if quick else (64, 4096)).astype(np.float32)

    def np_softmax() -> object:
        e = np.exp(r - r.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    cases.append((f"softmax rows={r.shape[0]}x{r.shape[1]}", lambda t: t[0].softmax(-1), [r], np_softmax,
                  8.0 * r.size, "GB/s"))
    for name, build, arrays, np_fn, work, unit in cases:
        tn = best(np_fn, 3)
        t = timed(dev, build, arrays, False)
        t0 = timed(dev, build, arrays, True)
        report(name, dev, work, unit, t, tn, t0)


if __name__ == "__main__":
    main()
