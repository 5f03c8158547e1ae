"""The ONNX low-precision types (uopir/onnx/lowp.py): conversions into float8/float4/e8m0/int4/int2 computed on the
device, compared bit for bit with onnx's reference (ml_dtypes `astype`, `onnx.numpy_helper.saturate_cast` and
`to_float8e8m0`) on every value of each type, the ties between neighbours (and one float32 ulp either side), the
overflow boundary, subnormals, signed zeros, NaN of both signs and infinities; and models that take, move and give
back such tensors."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from uopir.frontend.tensor import Tensor  # noqa: E402
from uopir.onnx import OnnxImportError, from_onnx  # noqa: E402
from uopir.onnx.lowp import LOWP, cast_to, from_storage  # noqa: E402

F8 = [17, 18, 19, 20, 23]  # e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, float4e2m1
INTS = [21, 22, 25, 26]    # uint4, int4, uint2, int2
_F32_SPECIALS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00000, 0x7F800000, 0xFF800000, 0, 0x80000000,
                          1, 0x80000001, 0x007FFFFF, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32).view(np.float32)


def _edge_values(code: int) -> np.ndarray:
    """Every finite value of the type, the midpoints of neighbours (ties) and a float32 ulp either side, values past
    the largest one (the overflow tie and around it), and float32's specials; both signs."""
    dt = LOWP[code].np_dtype
    vals = np.arange(256, dtype=np.uint8)[: 16 if code == 23 else 256].view(dt).astype(np.float64)
    vals = np.unique(np.abs(vals[np.isfinite(vals)]))
    top = vals[-1] + (vals[-1] - vals[-2]) * np.array([0.5, 1.0, 1.5, 2.0, 64.0])
    mids = ((vals[1:] + vals[:-1]) / 2).astype(np.float32)
    pos = np.concatenate([vals.astype(np.float32), mids, np.nextafter(mids, np.float32(0)),
                          np.nextafter(mids, np.float32(np.inf)), top.astype(np.float32)])
    return np.concatenate([pos, -pos, _F32_SPECIALS]).astype(np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).view(np.uint8)


def _device_cast(x: np.ndarray, code: int, **kw: object) -> np.ndarray:
    """The conversion on the device, as the type's ml_dtypes array; the storage values (float32 for the float
    types) must be exactly the reference's decoding of it, NaN bits and zero signs included."""
    lt = LOWP[code]
    storage = cast_to(Tensor(x), lt, **kw).numpy()
    got = from_storage(storage, lt)
    if lt.is_float:
        decoded = got.astype(np.float32)
        bad = np.nonzero(storage.view(np.uint32) != decoded.view(np.uint32))[0]
        assert bad.size == 0, [(float(x[i]), hex(int(storage.view(np.uint32)[i]))) for i in bad[:8]]
    return got


def _reference(x: np.ndarray, code: int, saturate: bool) -> np.ndarray:
    dt = LOWP[code].np_dtype
    return numpy_helper.saturate_cast(x, dt) if saturate and code != 23 else x.astype(dt)


def _assert_same_bits(got: np.ndarray, want: np.ndarray, x: np.ndarray) -> None:
    bad = np.nonzero(_bits(got) != _bits(want))[0]
    assert bad.size == 0, [(float(x[i]), hex(int(_bits(got)[i])), hex(int(_bits(want)[i]))) for i in bad[:8]]


@pytest.mark.parametrize(("code", "saturate"), [(c, s) for c in F8 for s in (True, False) if c != 23 or s],
                         ids=lambda v: LOWP[v].name if isinstance(v, int) and not isinstance(v, bool) else
                         ("sat" if v else "nosat"))
def test_float32_to_float8_and_float4_bit_exact(code: int, saturate: bool) -> None:
    """float4e2m1 has no saturate attribute (ml_dtypes always saturates it): only the default."""
    x = _edge_values(code)
    with np.errstate(all="ignore"):
        _assert_same_bits(_device_cast(x, code, saturate=saturate), _reference(x, code, saturate), x)


@pytest.mark.parametrize("code", [17, 19, 20], ids=lambda c: LOWP[c].name)
def test_float16_and_float64_to_float8(code: int) -> None:
    """float16 inputs round once (their values are float32's); float64 inputs round from the double itself
    (1 + 2^-4 + 2^-30 is above the tie that float32 would make of it)."""
    x = _edge_values(code)
    with np.errstate(all="ignore"):
        x16 = x.astype(np.float16)
        _assert_same_bits(_device_cast(x16, code), _reference(x16, code, True), x16.astype(np.float32))
        x64 = np.concatenate([x.astype(np.float64), [1 + 2 ** -4 + 2 ** -30, -(1 + 2 ** -4 + 2 ** -30), 1e300]])
        _assert_same_bits(_device_cast(x64, code, saturate=False), _reference(x64, code, False), x64)


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_float8e8m0_rounding_and_saturation(mode: str) -> None:
    p = 2.0 ** np.arange(-126, 128, 5)
    x = np.concatenate([p, p * (1 + 2.0 ** -23), p * 1.5, p * 1.25, p * 1.75, p * (1.5 - 2.0 ** -23),
                        [3.4e38, 2.0 ** 127 * 1.5, 2.0 ** -127, 1e-45, 0.0, -2.0, -3.0]]).astype(np.float32)
    x = np.concatenate([x, _F32_SPECIALS])
    for saturate in (True, False):
        want = numpy_helper.to_float8e8m0(x, saturate, mode)
        _assert_same_bits(_device_cast(x, 24, saturate=saturate, round_mode=mode), want, x)


@pytest.mark.parametrize("code", INTS, ids=lambda c: LOWP[c].name)
def test_to_int4_int2_from_float_and_int(code: int) -> None:
    """From floats: truncated toward 0, 0 when out of range (NaN, inf too); from ints: the low bits (wrapping)."""
    dt = LOWP[code].np_dtype
    xf = np.concatenate([np.arange(-20, 20, 0.25), [7.99, -8.99, 1e9, -1e9]]).astype(np.float32)
    xf = np.concatenate([xf, _F32_SPECIALS])
    xi = np.arange(-300, 300, 7).astype(np.int32)
    with np.errstate(all="ignore"):
        got_f, got_i = _device_cast(xf, code), _device_cast(xi, code)
        np.testing.assert_array_equal(got_f.astype(np.int32), xf.astype(dt).astype(np.int32))
    np.testing.assert_array_equal(got_i.astype(np.int32), xi.astype(dt).astype(np.int32))


# ---- models ------------------------------------------------------------------------------------------------------
def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None, opset: int = 23) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_model_float8_input_moved_and_cast_back() -> None:
    """A float8 input is decoded, moved (Transpose, Reshape, Concat with a float8 initializer) and given back in its
    ml_dtypes dtype by `run`; a Cast to float gives its float32 values, NaN included."""
    f8 = ml_dtypes.float8_e4m3fn
    x = np.array([[0.5, -448, np.nan], [2 ** -9, -0.0, 3.75]], np.float32).astype(f8)
    w = numpy_helper.from_array(np.array([[1.0, -1.0, 0.125]], np.float32).astype(f8), "w")
    m = _model([helper.make_node("Transpose", ["x"], ["t"]), helper.make_node("Reshape", ["t", "s"], ["r"]),
                helper.make_node("Concat", ["r", "w"], ["y"], axis=0), helper.make_node("Cast", ["y"], ["z"], to=1)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [2, 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [3, 3]),
                helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 3])],
               [w, numpy_helper.from_array(np.array([2, 3], np.int64), "s")])
    out = from_onnx(m).run(x=x)
    want = np.concatenate([x.T.reshape(2, 3), np.array([[1.0, -1.0, 0.125]], np.float32).astype(f8)])
    assert out["y"].dtype == f8
    _assert_same_bits(out["y"].reshape(-1), want.reshape(-1), want.astype(np.float32).reshape(-1))
    np.testing.assert_array_equal(out["z"], want.astype(np.float32))


def test_model_quantize_dequantize_int4_with_zero_point() -> None:
    x = np.array([[-20.0, -3.3, 0.0, 2.5, 3.5, 40.0]], np.float32)
    zp = numpy_helper.from_array(np.array(1, ml_dtypes.int4), "zp")
    sc = numpy_helper.from_array(np.array(0.5, np.float32), "sc")
    m = _model([helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"]),
                helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["d"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
               [helper.make_tensor_value_info("q", TensorProto.INT4, [1, 6]),
                helper.make_tensor_value_info("d", TensorProto.FLOAT, [1, 6])], [zp, sc])
    model = from_onnx(m)
    for xi in (x, -x):  # the second call replays the captured plan: still given back as int4
        out = model.run(x=xi)
        q = np.clip(np.rint(xi / 0.5) + 1, -8, 7)
        assert out["q"].dtype == ml_dtypes.int4
        np.testing.assert_array_equal(out["q"].astype(np.int32), q)
        np.testing.assert_array_equal(out["d"], (q - 1) * 0.5)
    assert model.stats["replays"] == 1


def test_model_rejects_arithmetic_on_float8_and_strings() -> None:
    m = _model([helper.make_node("Add", ["x", "x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT8E5M2, [2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT8E5M2, [2])])
    model = from_onnx(m)
    with pytest.raises(OnnxImportError, match=r"\(Add, opset 23\): unsupported dtype float8e5m2 of an input"):
        model.run(x=np.zeros(2, ml_dtypes.float8_e5m2))
    with pytest.raises(OnnxImportError, match="input 'x': dtype float32, the model wants float8e5m2"):
        model.run(x=np.zeros(2, np.float32))
    s = _model([helper.make_node("Identity", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
               [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    with pytest.raises(OnnxImportError, match="unsupported dtype string"):
        from_onnx(s)
