"""Tensor creation, dtypes, devices, laziness and realization."""
from __future__ import annotations

import gc

import numpy as np
import pytest
from tensor_testing import check, rnd

from uopir import Tensor, dtypes, print_ir
from uopir.backends.buffers import BUFFERS
from uopir.dialects import core as C
from uopir.dialects import tensor as T


# ---- from data -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data, dtype", [
    ([1, 2, 3], dtypes.int32), ([1.0, 2.5], dtypes.float32), ([True, False], dtypes.bool),
    ([[1, 2], [3, 4]], dtypes.int32), ([1, 2.5], dtypes.float32), ((1, 2), dtypes.int32), ([], dtypes.float32),
])
def test_python_data_default_dtypes(data, dtype):
    t = Tensor(data)
    assert t.dtype is dtype
    check(t, np.array(data, dtype=np.dtype(dtype.np_name)) if data else np.zeros((0,), np.float32))


@pytest.mark.parametrize("npdt", ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                                  "uint16", "uint32", "uint64", "bool"])
def test_numpy_data_keeps_dtype(npdt):
    a = rnd((2, 3), npdt)
    t = Tensor(a)
    assert t.dtype is dtypes.from_numpy(npdt)
    check(t, a)


def test_numpy_input_is_copied():
    a = np.arange(4.0, dtype=np.float32)
    t = Tensor(a)
    a[0] = 100
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    out = t.numpy()
    out[1] = 50
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("v, dtype", [(3, dtypes.int32), (2.5, dtypes.float32), (True, dtypes.bool)])
def test_scalar_is_a_0d_const(v, dtype):
    t = Tensor(v)
    assert t.shape == () and t.dtype is dtype and t.uop.op is C.CONST
    assert t.item() == v


def test_explicit_dtype_and_names():
    assert Tensor([1, 2], dtype=dtypes.float16).dtype is dtypes.float16
    assert Tensor([1, 2], dtype="float64").dtype is dtypes.float64
    assert Tensor([1, 2], dtype="u8").dtype is dtypes.uint8
    assert Tensor([1, 2], dtype=np.int16).dtype is dtypes.int16
    check(Tensor([1.7, -1.7], dtype=dtypes.int32), np.array([1, -1], np.int32))
    with pytest.raises(TypeError, match="unknown dtype"):
        Tensor([1], dtype="complex-ish")


def test_bfloat16_rounds_on_creation():
    t = Tensor([1.0, 1.00390625, 3.14159], dtype=dtypes.bfloat16)
    assert t.dtype is dtypes.bfloat16
    got = t.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array([1.0, 1.0, 3.140625], np.float32))


def test_bad_data():
    with pytest.raises(TypeError):
        Tensor(object())
    with pytest.raises(ValueError, match="ragged"):
        Tensor([[1, 2], [3]])


# ---- factories -------------------------------------------------------------------------------------------------------
def test_full_zeros_ones_are_shaped_consts():
    z = Tensor.zeros(2, 3)
    assert z.uop.op is C.CONST and z.dtype is dtypes.float32
    check(z, np.zeros((2, 3), np.float32))
    check(Tensor.ones((4,), dtype=dtypes.int8), np.ones(4, np.int8), dtype="int8")
    check(Tensor.full((2, 2), 7), np.full((2, 2), 7, np.int32), dtype="int32")
    check(Tensor.full((2,), 1.5), np.full(2, 1.5, np.float32), dtype="float32")
    check(Tensor.full((), True), np.array(True), dtype="bool")
    check(Tensor.zeros(0, 3), np.zeros((0, 3), np.float32))
    check(Tensor.ones(), np.ones((), np.float32))
    with pytest.raises(ValueError, match="non-negative"):
        Tensor.zeros(-1, 2)


def test_like_factories():
    x = Tensor(rnd((2, 3), "int16"))
    check(x.zeros_like(), np.zeros((2, 3), np.int16), dtype="int16")
    check(x.ones_like(dtype=dtypes.float32), np.ones((2, 3), np.float32), dtype="float32")
    check(x.full_like(5), np.full((2, 3), 5, np.int16), dtype="int16")
    check(Tensor.empty(2, 2), np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("args", [(5,), (2, 7), (1, 10, 3), (10, 1, -2), (0, 1, 0.25), (3, 3), (-2.5, 2.5, 0.5)])
def test_arange(args):
    t = Tensor.arange(*args)
    expected = np.arange(*args)
    assert t.dtype is (dtypes.int32 if expected.dtype.kind == "i" else dtypes.float32)
    check(t, expected.astype(np.dtype(t.dtype.np_name)))
    with pytest.raises(ValueError):
        Tensor.arange(0, 5, 0)


def test_linspace_eye():
    check(Tensor.linspace(0, 1, 5), np.linspace(0, 1, 5).astype(np.float32))
    check(Tensor.linspace(-2, 3, 1), np.linspace(-2, 3, 1).astype(np.float32))
    for n, m in [(3, None), (2, 4), (4, 2), (1, 1), (0, 3)]:
        check(Tensor.eye(n, m), np.eye(n, m, dtype=np.float32))
    check(Tensor.eye(3, dtype=dtypes.int32), np.eye(3, dtype=np.int32), dtype="int32")
    assert all(u.op is not T.BUFFER for u in Tensor.eye(3).uop.toposort())  # lazy, no host data


def test_random_reproducible_and_in_range():
    Tensor.manual_seed(42)
    a = Tensor.rand(3, 4).numpy()
    Tensor.manual_seed(42)
    b = Tensor.rand(3, 4).numpy()
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and (a >= 0).all() and (a < 1).all()
    n = Tensor.randn(2000).numpy()
    assert abs(n.mean()) < 0.15 and 0.85 < n.std() < 1.15
    r = Tensor.randint(50, low=2, high=5)
    assert r.dtype is dtypes.int32 and set(r.tolist()) <= {2, 3, 4}
    u = Tensor.uniform(100, low=-2.0, high=-1.0, dtype=dtypes.float64)
    assert u.dtype is dtypes.float64 and ((u.numpy() >= -2) & (u.numpy() < -1)).all()
    g = Tensor.normal(2000, mean=3.0, std=0.5).numpy()
    assert abs(g.mean() - 3) < 0.1
    assert Tensor.rand((2, 2), dtype=dtypes.float16).dtype is dtypes.float16
    assert Tensor.kaiming_uniform(4, 3).shape == (4, 3) and Tensor.glorot_uniform(4, 3).shape == (4, 3)
    assert abs(Tensor.scaled_uniform(4, 4).numpy()).max() <= 0.25
    with pytest.raises(ValueError):
        Tensor.randint(3, low=5, high=5)


# ---- dtypes ----------------------------------------------------------------------------------------------------------
def test_casts():
    a = rnd((5,), "float32")
    x = Tensor(a)
    check(x.half(), a.astype(np.float16), dtype="float16")
    check(x.int(), a.astype(np.int32), dtype="int32")
    check(x.bool(), a.astype(bool), dtype="bool")
    check(x.double(), a.astype(np.float64), dtype="float64")
    check(x.long(), a.astype(np.int64), dtype="int64")
    check(x.cast("uint8").float(), np.clip(np.trunc(a), 0, None).astype(np.float32))
    assert x.cast(dtypes.float32) is x


def test_bitcast():
    a = np.array([1.0, -2.0, 0.5], np.float32)
    check(Tensor(a).bitcast(dtypes.int32), a.view(np.int32), dtype="int32")
    check(Tensor(a).bitcast(dtypes.uint32).bitcast("float32"), a)
    h = np.array([1.0, -0.5], np.float16)
    check(Tensor(h).bitcast(dtypes.int16), h.view(np.int16))
    # another byte size rescales the last axis, as numpy's view (tinygrad's and torch's rule)
    m = np.arange(12, dtype=np.float32).reshape(2, 6) - 5.5
    check(Tensor(m).bitcast(dtypes.int16), m.view(np.int16), dtype="int16")
    check(Tensor(m).bitcast(dtypes.uint8), m.view(np.uint8), dtype="uint8")
    check(Tensor(m).bitcast(dtypes.float64), m.view(np.float64), dtype="float64")
    check(Tensor(m.view(np.uint8)).bitcast(dtypes.float32), m)
    with pytest.raises(ValueError, match=r"3xf32.*float64: the last axis must hold a whole number of 8-byte"):
        Tensor(a).bitcast(dtypes.float64)


# ---- laziness, realize, buffers --------------------------------------------------------------------------------------
def test_lazy_until_realize_and_realize_replaces_uop():
    x = Tensor([1.0, 2.0, 3.0])
    y = (x * 2).exp2() + 1
    assert y.uop.op is not T.BUFFER  # nothing ran
    text = print_ir(y.uop)
    assert "core.exp2" in text and "tensor.buffer" in text
    y.realize()
    assert y.uop.op is T.BUFFER
    first = y.uop
    y.realize()
    assert y.uop is first  # no recompute
    check(y, np.exp2(np.array([2.0, 4.0, 6.0], np.float32)) + 1)


def test_buffers_freed_when_unreferenced():
    t = Tensor(np.ones(8, np.float32))
    bid = t.uop.arg[0]
    assert bid in BUFFERS
    del t
    gc.collect()
    assert bid not in BUFFERS


def test_item_tolist_scalars():
    x = Tensor([[1, 2], [3, 4]])
    assert x.tolist() == [[1, 2], [3, 4]]
    assert x.sum().item() == 10
    assert float(Tensor(2.5)) == 2.5 and int(Tensor([7])) == 7
    assert bool(Tensor([True]))
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        x.item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x)
    assert len(x) == 2 and [r.tolist() for r in x] == [[1, 2], [3, 4]]
    np.testing.assert_array_equal(np.asarray(x), np.array([[1, 2], [3, 4]], np.int32))


def test_introspection():
    x = Tensor(np.zeros((2, 3, 4), np.float16))
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.numel() == 24 and x.dtype is dtypes.float16
    assert x.element_size() == 2 and x.nbytes() == 48 and x.size(-1) == 4
    assert "shape (2, 3, 4)" in repr(x)
    assert Tensor(3.0).ndim == 0 and Tensor(3.0).numel() == 1
    assert Tensor.zeros(0, 5).numel() == 0


def test_hash_and_eq_return_tensor():
    a, b = Tensor([1, 2]), Tensor([1, 3])
    assert isinstance(a == b, Tensor) and (a == b).tolist() == [True, False]
    assert len({a, b}) == 2 and {a: 1}[a] == 1


# ---- devices ---------------------------------------------------------------------------------------------------------
def test_devices(monkeypatch):
    from uopir.backends import available

    monkeypatch.delenv("UOPIR_DEVICE", raising=False)
    assert Tensor([1]).device == available()[0]  # the best available: c where a C compiler is installed
    assert Tensor([1], device="PYTHON").device == "python"
    with pytest.raises(ValueError, match="valid devices: python, c, llvm, opencl, cuda"):
        Tensor([1], device="tpu")
    monkeypatch.setenv("UOPIR_DEVICE", "c")
    assert Tensor([1.0]).device == "c"
    monkeypatch.setenv("UOPIR_DEVICE", "nope")
    with pytest.raises(ValueError, match="unknown device 'nope'"):
        Tensor([1.0])


def test_to_device_and_unavailable_device():
    x = Tensor([1.0, 2.0], device="python")
    y = x.to("cuda") * 2  # building works (cuda: no GPU on a test machine, so it stays unavailable)
    assert y.device == "cuda" and "tensor.copy" in print_ir(y.uop)
    with pytest.raises(RuntimeError, match="device 'cuda' cannot"):
        y.realize()
    back = y.to("python")
    check(back, np.array([2.0, 4.0], np.float32))
    assert x.to("python") is x
    with pytest.raises(ValueError, match="different devices"):
        x + x.to("opencl")
    with pytest.raises(ValueError, match="unknown device"):
        x.to("metal")


def test_contiguous_clone_detach():
    a = rnd((2, 3))
    x = Tensor(a)
    for t in (x.contiguous(), x.clone(), x.detach()):
        check(t, a)


def test_frontend_ir_round_trips_through_text():
    from uopir import parse_ir

    x = Tensor.randn(2, 3)
    y = (x[:, ::2] @ Tensor.ones(2, 4)).softmax().cumsum(1).pad(((1, 1), (0, 0)), value=2.0)
    assert parse_ir(print_ir(y.uop)) is y.uop


def test_positional_device_accepted():
    t = Tensor([1.0], "python")
    assert t.device == "python" and t.numpy().tolist() == [1.0]


def test_requires_grad_is_accepted_and_kept():
    for flag in (None, False, True):
        t = Tensor([1.0], requires_grad=flag)
        assert t.requires_grad is flag and t.numpy().tolist() == [1.0] and t.grad is None


# ---- Python ints at creation (issue 8 item 11: they wrapped silently) -----------------------------------------------
@pytest.mark.parametrize("value, dtype", [
    (2**40, dtypes.int64), (-(2**31) - 1, dtypes.int64), (2**31 - 1, dtypes.int32), (-(2**63), dtypes.int64),
    (2**63, dtypes.uint64), (2**64 - 1, dtypes.uint64),
])
def test_large_python_int_takes_the_dtype_numpy_holds_it_in(value, dtype):
    for t in (Tensor(value), Tensor.full((2,), value)):
        assert t.dtype is dtype
        assert t.numpy().reshape(-1)[0].item() == value
    t = Tensor([value, 1])
    assert t.dtype is dtype and t.tolist() == [value, 1]
    assert Tensor(value).item() == value


@pytest.mark.parametrize("value", [2**70, 2**64, -(2**63) - 1, -(2**70)])
def test_python_int_beyond_64_bits_raises(value):
    for make in (lambda: Tensor(value), lambda: Tensor([value]), lambda: Tensor([[1], [value]]),
                 lambda: Tensor.full((2,), value), lambda: Tensor([True]).where(value, 0)):
        with pytest.raises(OverflowError, match=str(value)):
            make()


def test_python_ints_needing_int64_and_uint64_at_once_raise():
    with pytest.raises(OverflowError, match="do not fit one integer dtype"):
        Tensor([2**63, -1])  # numpy makes float64 here, silently losing the ints
    t = Tensor([2**63, 1])  # numpy: float64 again; uint64 holds both exactly
    assert t.dtype is dtypes.uint64 and t.tolist() == [2**63, 1]


@pytest.mark.parametrize("value, dtype", [(300, dtypes.int8), (-1, dtypes.uint8), (2**31, dtypes.int32),
                                          (2**64, dtypes.uint64)])
def test_python_int_outside_an_explicit_dtype_raises(value, dtype):
    for make in (lambda: Tensor(value, dtype=dtype), lambda: Tensor([1, value], dtype=dtype),
                 lambda: Tensor.full((2,), value, dtype=dtype), lambda: Tensor.arange(value, value + 1, dtype=dtype)):
        with pytest.raises(OverflowError, match=str(value)):
            make()


def test_huge_python_ints_become_floats_when_asked_or_mixed_with_floats():
    check(Tensor([2**70], dtype=dtypes.float32), np.array([2.0**70], np.float32))
    check(Tensor(2**70, dtype=dtypes.float64), np.float64(2.0**70))
    t = Tensor([1.5, 2**70])
    assert t.dtype is dtypes.float32
    check(t, np.array([1.5, 2.0**70], np.float32))
    check(Tensor([1e19, -1.0]), np.array([1e19, -1.0], np.float32))  # genuine floats are no overflow


def test_arange_beyond_int32_is_int64():
    t = Tensor.arange(2**40, 2**40 + 3)
    assert t.dtype is dtypes.int64 and t.tolist() == [2**40, 2**40 + 1, 2**40 + 2]
    assert Tensor.arange(5).dtype is dtypes.int32


def test_arange_and_where_across_int64s_end_are_uint64_never_a_float():
    # int64 beside uint64 joins in float16 in the promotion lattice: this arange was [inf inf inf]
    t = Tensor.arange(2**63 - 2, 2**63 + 1)
    assert t.dtype is dtypes.uint64 and t.tolist() == [2**63 - 2, 2**63 - 1, 2**63]
    with pytest.raises(OverflowError, match=r"arange\(-1, .* do not fit one integer dtype"):
        Tensor.arange(-1, 2**64, 2**63 + 1)  # -1 and 2**63
    t = Tensor([True, False]).where(2**63 - 1, 2**63)  # the same join of two weak scalars
    assert t.dtype is dtypes.uint64 and t.tolist() == [2**63 - 1, 2**63]


def test_arange_counts_huge_int_steps_exactly():
    # (stop - start) / step in floats rounds 2.0000000000000000017 to 2, 1.0000000000000000002 to 1: values lost
    assert Tensor.arange(5, -(2**63) - 3, -(2**62)).tolist() == [5, 5 - 2**62, 5 - 2**63]
    assert Tensor.arange(0, 2**62 + 1, 2**62).tolist() == [0, 2**62]  # numpy gives [0]


def test_int_linspace_is_exact_and_refuses_ends_outside_its_dtype():
    assert Tensor.linspace(2**60, 2**60 + 4, 5, dtype=dtypes.int64).tolist() == [2**60 + i for i in range(5)]
    assert Tensor.linspace(-(2**60) - 4, -(2**60), 3, dtype=dtypes.int64).tolist() == [-(2**60) - 4 + 2 * i
                                                                                         for i in range(3)]
    assert Tensor.linspace(-10, 0, 4, dtype=dtypes.int64).tolist() == [-10, -6, -3, 0]  # truncated, as numpy's cast
    with pytest.raises(OverflowError, match="300 is out of bounds"):
        Tensor.linspace(0, 300, 3, dtype=dtypes.int8)  # numpy's cast wraps: [0, -106, 44]
    with pytest.raises(OverflowError, match="out of bounds for dtypes.int64"):
        Tensor.linspace(0, 2**63 + 10, 3, dtype=dtypes.int64)
    check(Tensor.linspace(0, 2**65, 2), np.array([0, 2.0**65], np.float32))  # was numpy's object-array TypeError


def test_ragged_data_keeps_its_message():
    with pytest.raises(ValueError, match="ragged or non-numeric"):
        Tensor([[1], [2, 3]])
    with pytest.raises(ValueError, match="ragged or non-numeric"):
        Tensor([[1], [2, 3]], dtype=dtypes.int32)


@pytest.mark.parametrize("make", [lambda v: Tensor([v], dtype=dtypes.bfloat16),
                                  lambda v: Tensor(np.array([v]), dtype=dtypes.bfloat16),
                                  lambda v: Tensor(v, dtype=dtypes.bfloat16)])
def test_bfloat16_from_python_floats_rounds_once(make):
    # 1 + 2**-8 is a bf16 tie; the 2**-30 bit above it decides: rounding first to f32 drops it and ties to 1.0
    v = 1 + 2**-8 + 2**-30
    assert float(np.asarray(make(v).numpy()).reshape(-1)[0]) == 1.0078125


def test_random_init_shape_errors_are_value_errors():
    with pytest.raises(ValueError, match="non-negative"):
        Tensor.scaled_uniform((2, -3, 0))  # validated before 1/sqrt(numel)
    assert Tensor.scaled_uniform(2, 0).shape == (2, 0)
    for f in (Tensor.kaiming_uniform, Tensor.kaiming_normal):
        with pytest.raises(ValueError, match="one sequence or as separate ints"):
            f((-3, 3), 3)
        with pytest.raises(TypeError):  # still a TypeError too
            f((3, 3), 3)
