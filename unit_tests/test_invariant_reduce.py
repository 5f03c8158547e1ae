"""A reduction that depends on no output range (softmax, layernorm, `x - x.mean()`, `x / x.sum()` over one row) runs
once, not once per output element: on a cpu kernel-optimize gives the output range to the cores (a global id, which
the renderers make a loop over the rest of the program), and device-linearize places the reduction before that id.
The work is counted in the compiled programs (uopir.backends.estimates), not timed: the quadratic schedule did
~N flops per output element."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends import available
from uopir.backends.estimates import estimate
from uopir.dialects import device as D

DEVICES = [d for d in ("c", "llvm") if d in available()]
N = 4096


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layernorm(x: np.ndarray) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)


CASES: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "softmax": (lambda t: t.softmax(-1), _softmax),
    "layernorm": (lambda t: t.layernorm(), _layernorm),
    "center": (lambda t: t - t.mean(), lambda x: x - x.mean()),
    "normalize": (lambda t: t / t.sum(), lambda x: x / x.sum()),
}


def _flops(t: Tensor) -> int:
    progs = t.programs()
    assert all(p.program.op is D.PROGRAM for p in progs)
    return sum(estimate(p.program).flops for p in progs)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_row_reduction_broadcast_over_the_row_runs_once(dev: str, case: str) -> None:
    fn, ref = CASES[case]
    x = np.random.default_rng(0).standard_normal((1, N)).astype(np.float32)
    out = fn(Tensor(x, device=dev))
    flops = _flops(out)
    # softmax's exp is a ~30-op polynomial on the host, evaluated twice per element: ~63 flops per element; the
    # quadratic schedule did at least N (4096) per element
    assert flops < 100 * N, f"{case}: {flops} flops for {N} elements (each element recomputes the row's reduction)"
    np.testing.assert_allclose(out.numpy(), ref(x), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("dev", DEVICES)
def test_the_work_grows_linearly_with_the_row(dev: str) -> None:
    f = [_flops(Tensor(np.ones((1, n), np.float32), device=dev).softmax(-1)) for n in (N, 4 * N)]
    assert f[1] < 4.5 * f[0]  # quadratic: 16x


@pytest.mark.parametrize("dev", DEVICES)
def test_rows_keep_one_reduction_per_row(dev: str) -> None:
    rows, cols = 64, 256
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    out = Tensor(x, device=dev).softmax(-1)
    assert _flops(out) < 100 * rows * cols
    np.testing.assert_allclose(out.numpy(), _softmax(x), rtol=2e-5, atol=2e-6)
