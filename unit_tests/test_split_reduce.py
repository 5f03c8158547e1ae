"""tensor-split-reduce: a large reduction to fewer outputs than threads becomes per-thread partials and a combine.

The IR checks use a two-thread host description directly; the value checks run on c and llvm with the constants
made small (and the `c`/`llvm` targets given 4 threads, so the split happens on any host), against numpy: float
sums within the accumulate tolerance, everything else (int sums, max, min, argmax, bool any) exact, including sizes
that leave a tail, NaN in the partials or in the tail, and dtype extremes."""
from __future__ import annotations

import numpy as np
import pytest

import uopir.backends  # noqa: F401 - registers the c/llvm targets
from uopir import Tensor
from uopir.backends.realize import clear_schedule_cache
from uopir.backends.registry import get_backend
from uopir.dialects import tensor
from uopir.ir.parser import parse_ir
from uopir.passes.target import CPU, register_target, target
from uopir.passes.tensor import split_reduce as SR

HOST2 = CPU.derive(name="host2", threads=2, reassociate_float_reductions=True)
DEVICES = [d for d in ("c", "llvm") if get_backend(d).available]


def _ops(root, op):
    return [u for u in root.toposort() if u.op is op]


def _graph(shape, dtype="f32", op="add", axes=None):
    dims = "x".join(map(str, shape))
    axes = list(range(len(shape))) if axes is None else axes
    out = "x".join("1" if i in axes else str(s) for i, s in enumerate(shape))
    return parse_ir(f"%0 = tensor.buffer {{id = 0, device = \"c\"}} : tensor<{dims}x{dtype}>\n"
                    f"%1 = tensor.reduce %0 {{op = {op}, axes = {axes}}} : tensor<{out}x{dtype}>\ncore.sink %1\n")


def test_full_sum_splits_into_partials_and_combine():
    root, n = SR.split_reductions(_graph((1 << 24,)), HOST2)
    assert n == 1
    reds = _ops(root, tensor.REDUCE)
    (c,) = _ops(root, tensor.CONTIGUOUS)
    assert c.shape == (2, 1)  # one partial per thread, the chunk reduced inside it
    assert sorted(r.shape for r in reds) == [(1, 1), (2, 1)]
    assert root.src[0].shape == (1,)


def test_odd_size_reduces_the_tail_beside_the_partials():
    n = (1 << 21) + 4097
    root, _ = SR.split_reductions(_graph((n,), op="max"), HOST2)
    shrinks = [u.attrs.bounds for u in _ops(root, tensor.SHRINK)]
    main = 2 * (n // (2 * SR.SPLIT_ALIGN) * SR.SPLIT_ALIGN)
    assert sorted(shrinks) == [((0, main),), ((main, n),)]


def test_column_sum_of_few_columns_and_nd_full_reduce():
    root, n = SR.split_reductions(_graph((1 << 21, 1), axes=[0]), HOST2)
    assert n == 1 and _ops(root, tensor.CONTIGUOUS)[0].shape == (2, 1)
    root, n = SR.split_reductions(_graph((3, 1 << 20)), HOST2)  # both axes: merged into one of 3M
    assert n == 1


@pytest.mark.parametrize("why, graph, t", [
    ("one thread", _graph((1 << 24,)), CPU),
    ("float sum, no reassociation", _graph((1 << 24,)), HOST2.derive(reassociate_float_reductions=False)),
    ("small", _graph((SR.SPLIT_MIN_WORK - 1,)), HOST2),
    ("as many outputs as threads", _graph((2, 1 << 22), axes=[1]), HOST2),
])
def test_left_alone(why, graph, t):
    root, n = SR.split_reductions(graph, t)
    assert n == 0 and root is graph, why


def test_exact_reductions_split_without_reassociation():
    t = HOST2.derive(reassociate_float_reductions=False)
    assert SR.split_reductions(_graph((1 << 24,), op="max"), t)[1] == 1
    assert SR.split_reductions(_graph((1 << 24,), dtype="i32"), t)[1] == 1


def test_symbolic_size_is_left_alone():
    g = parse_ir('%n = tensor.var {name = "n", min = 1, max = 16777216} : index\n'
                 '%0 = tensor.buffer {id = 0, device = "c"} : tensor<16777216xf32>\n'
                 '%1 = tensor.shrink %0, %n {bounds = [[0, ?]]} : tensor<?xf32>\n'
                 '%2 = tensor.reduce %1 {op = add, axes = [0]} : tensor<1xf32>\ncore.sink %2\n')
    assert SR.split_reductions(g, HOST2)[1] == 0


def test_default_pipeline_runs_it_before_tensor_to_kernel():
    from uopir.passes.default import DefaultOptions, default_pipeline
    p = default_pipeline(DefaultOptions(target="c"))
    assert p.index("tensor-split-reduce{target=c}") < p.index("tensor-to-kernel")


# ---- values on the devices, with small constants and 4 threads -------------------------------------------------------
@pytest.fixture
def small_split(monkeypatch):
    monkeypatch.setattr(SR, "SPLIT_MIN_WORK", 4096)
    monkeypatch.setattr(SR, "SPLIT_ALIGN", 64)
    saved = {d: target(d) for d in DEVICES}
    for t in saved.values():
        register_target(t.derive(threads=4), replace=True)
    clear_schedule_cache()
    yield
    for t in saved.values():
        register_target(t, replace=True)
    clear_schedule_cache()


def _split_count(fn, x, device):
    """How many tensor.contiguous the pass adds to fn(x)'s graph for the device's target."""
    g = fn(Tensor(x, device=device)).uop
    return SR.split_reductions(g, target(device))[1]


SIZES = (4095, 4096, 4096 + 257, 3 * 4096 + 7, 1 << 15)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", SIZES)
def test_values_match_numpy(device, n, small_split):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    assert _split_count(lambda t: t.sum(), x, device) == (n >= 4096)
    t = Tensor(x, device=device)
    np.testing.assert_allclose(t.sum().numpy(), x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(t.mean().numpy(), x.astype(np.float64).mean(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((t * t).sum().numpy(), (x.astype(np.float64) ** 2).sum(), rtol=1e-5)
    assert t.max().numpy() == x.max() and t.min().numpy() == x.min()
    assert t.argmax().numpy() == x.argmax() and t.argmin().numpy() == x.argmin()
    xi = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int32)
    ti = Tensor(xi, device=device)
    assert ti.sum().numpy() == xi.astype(np.int64).sum()
    assert ti.max().numpy() == xi.max() and ti.min().numpy() == xi.min()


@pytest.mark.parametrize("device", DEVICES)
def test_dtype_edges_and_nan(device, small_split):
    n = 3 * 4096 + 7  # a tail of 7 + the chunks' remainders
    for where in (5, n - 3):  # in a partial's chunk, in the tail
        x = np.ones(n, np.float32)
        x[where] = np.nan
        t = Tensor(x, device=device)
        assert np.isnan(t.max().numpy()) and np.isnan(t.min().numpy()) and np.isnan(t.sum().numpy())
    for dt, lo, hi in ((np.int8, -128, 127), (np.uint8, 0, 255), (np.int64, -2**63, 2**63 - 1)):
        x = np.zeros(n, dt)
        x[n - 2], x[7] = lo, hi
        t = Tensor(x, device=device)
        assert t.max().numpy() == hi and t.min().numpy() == lo, dt
    b = np.zeros(n, bool)
    assert not Tensor(b, device=device).any().numpy()
    b[n - 1] = True
    assert Tensor(b, device=device).any().numpy() and not Tensor(b, device=device).all().numpy()
    h = np.random.default_rng(1).standard_normal(n).astype(np.float16)
    assert Tensor(h, device=device).max().numpy() == h.max()
    z = np.full(n, -0.0, np.float32)
    assert np.signbit(Tensor(z, device=device).min().numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_few_rows_and_columns(device, small_split):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4096 + 130)).astype(np.float32)  # 3 rows < 4 threads
    assert _split_count(lambda t: t.mean(1), a, device) == 1
    np.testing.assert_allclose(Tensor(a, device=device).mean(1).numpy(), a.mean(1), rtol=1e-5, atol=1e-6)
    c = rng.standard_normal((4096 * 2 + 5, 3)).astype(np.float32)
    np.testing.assert_allclose(Tensor(c, device=device).sum(0).numpy(), c.astype(np.float64).sum(0), rtol=1e-4)
    assert (Tensor(c, device=device).max(0).numpy() == c.max(0)).all()
    for rows in (1, 2):
        s = rng.standard_normal((rows, 1 << 14)).astype(np.float32)
        e = np.exp(s - s.max(1, keepdims=True))
        np.testing.assert_allclose(Tensor(s, device=device).softmax(-1).numpy(), e / e.sum(1, keepdims=True),
                                   rtol=1e-4, atol=1e-9)
