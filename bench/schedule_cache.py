"""Schedule cache: the lowering time of a program the first time and again on new buffers (a cache hit), beside the
time numpy takes to compute it, for a few programs (MLP forward, conv2d + bias + relu, softmax).

Prints one machine-readable line per program:
    schedule_cache program=<name> kernels=<N> first_ms=<lowering, miss> cached_ms=<key + lookup, hit>
    speedup=<first / cached> run_ms=<python backend, kernels> numpy_ms=<numpy compute>
first_ms is the cache key plus the pipeline (canonicalize, tensor-to-kernel) and the kernels' compiles; cached_ms
is the cache key of the same program rebuilt on new buffers plus the lookup. Each figure is the best of a few runs
(the first lowering is measured on a fresh cache each time). Nothing is asserted. Run: python3 bench/schedule_cache.py
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from uopir.backends import get_backend  # noqa: E402
from uopir.backends import realize as R  # noqa: E402
from uopir.frontend.tensor import Tensor  # noqa: E402

REPEAT = 3


def _data(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _mlp(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    return ((x @ w1 + b1).relu() @ w2 + b2).softmax()


def _np_mlp(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    e = np.exp(h - h.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _np_conv(img: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(img, (kh, kw), axis=(2, 3))  # n, c, oh, ow, kh, kw
    return np.maximum(np.einsum("ncxyij,ocij->noxy", win, w) + b[None, :, None, None], 0)


def _np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


PROGRAMS: list[tuple[str, Callable[..., Tensor], Callable[..., np.ndarray], list[tuple[int, ...]]]] = [
    ("mlp_forward", _mlp, _np_mlp, [(16, 64), (64, 128), (128,), (128, 10), (10,)]),
    ("conv2d_bias_relu", lambda i, w, b: i.conv2d(w, b).relu(), _np_conv, [(2, 3, 16, 16), (8, 3, 3, 3), (8,)]),
    ("softmax", lambda x: x.softmax(), _np_softmax, [(64, 256)]),
]


def _best(fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(REPEAT))


def measure(name: str, build: Callable[..., Tensor], ref: Callable[..., np.ndarray],
            shapes: list[tuple[int, ...]]) -> str:
    backend = get_backend("python")
    seed = iter(range(10_000))

    def lower(fresh: bool) -> float:
        if fresh:
            R.clear_schedule_cache()
        root = build(*(Tensor(a) for a in _data(next(seed), *shapes))).uop
        t0 = time.perf_counter()
        key, inputs, _, _ = R.cache_key(root)
        R.plan(backend, key, len(inputs))
        return time.perf_counter() - t0

    first = _best(lambda: lower(True))
    cached = _best(lambda: lower(False))

    def run() -> float:
        t = build(*(Tensor(a) for a in _data(next(seed), *shapes)))
        t0 = time.perf_counter()
        t.realize()
        return time.perf_counter() - t0

    run_s = _best(run)
    arrays = _data(0, *shapes)

    def numpy_time() -> float:
        t0 = time.perf_counter()
        ref(*arrays)
        return time.perf_counter() - t0

    np_s = _best(numpy_time)
    kernels = len(build(*(Tensor(a) for a in arrays)).schedule())
    return (f"schedule_cache program={name} kernels={kernels} first_ms={first * 1e3:.3f} cached_ms={cached * 1e3:.3f} "
            f"speedup={first / cached:.1f} run_ms={run_s * 1e3:.3f} numpy_ms={np_s * 1e3:.3f}")


def main() -> None:
    os.environ.pop(R.SCHEDULE_CACHE_ENV, None)
    os.environ.pop(R.DEBUG_ENV, None)
    for name, build, ref, shapes in PROGRAMS:
        print(measure(name, build, ref, shapes), flush=True)


if __name__ == "__main__":
    main()
