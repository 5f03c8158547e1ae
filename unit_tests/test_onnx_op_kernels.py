"""ONNX operators whose lowering bench/onnx_ops.py found far slower than onnxruntime, pinned by the work their
kernels do (uopir.backends.estimates) beside their values: an integer nearest upscale is movement only."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from uopir.backends.estimates import estimate  # noqa: E402
from uopir.onnx import from_onnx  # noqa: E402


def _resize_model(shape: tuple[int, ...], scales: list[float], **attrs: object) -> onnx.ModelProto:
    out = [int(s * f) for s, f in zip(shape, scales, strict=True)]
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], **attrs)], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                          [numpy_helper.from_array(np.array(scales, np.float32), "s")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("attrs", [{}, {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}])
def test_resize_nearest_2x_is_a_repeat(attrs: dict) -> None:
    x = np.random.default_rng(0).standard_normal((1, 3, 5, 6)).astype(np.float32)
    m = from_onnx(_resize_model(x.shape, [1, 1, 2, 2], mode="nearest", **attrs), device="python")
    y = m.run_graph({"x": x})["y"]
    assert sum(estimate(p.program).flops for p in y.programs()) == 0  # no one-hot gather (a sum over the source)
    assert np.array_equal(y.numpy(), x.repeat(2, axis=2).repeat(2, axis=3))


def test_steady_calls_read_the_feeds_in_place() -> None:
    """The native replay reads a caller's contiguous feed in place (no launch of an Add writes an input), and
    feeds it cannot read so (a strided view, an unaligned array, one array fed twice) are copied first: the values
    stay right and an input returned as an output is still a copy."""
    from uopir.backends import available
    from uopir.backends.cpu.graph import native
    if "c" not in available() or native() is None:
        pytest.skip("needs the c backend and its native launch graph")
    f = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"]), helper.make_node("Identity", ["x"], ["xi"])],
                          "a", [helper.make_tensor_value_info(n, f, [4, 8]) for n in ("x", "z")],
                          [helper.make_tensor_value_info(n, f, [4, 8]) for n in ("y", "xi")])
    model = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), device="c")
    rng = np.random.default_rng(2)
    x, z = rng.standard_normal((2, 4, 8)).astype(np.float32)
    for _ in range(3):
        out = model.run(x=x, z=z)
    jit = next(iter(model._plans.values()))
    assert jit._graph.writes_inputs is False
    wide = rng.standard_normal((4, 16)).astype(np.float32)
    raw = np.zeros(4 * 32 + 1, np.uint8)
    odd = raw[1:].view(np.float32).reshape(4, 8)  # not 4-byte aligned
    odd[:] = z
    for a, b in ((x, z), (wide[:, ::2], z), (x, odd), (x, x)):
        out = model.run(x=a, z=b)
        np.testing.assert_array_equal(out["y"], a + b)
        assert not np.shares_memory(out["xi"], a)
        np.testing.assert_array_equal(out["xi"], a)


@pytest.mark.parametrize("rows,t,kernels", [(32, 32, 2), (4, 32, 1), (32, 24, 1), (32, 37, 2)])
def test_matmul_by_a_transpose_reads_a_copy(rows: int, t: int, kernels: int) -> None:
    """q @ Transpose(k) (BERT's attention scores) with >= 16 rows of q and t a multiple of 16 or at least 32 (ViT's
    197 tokens: whole vectors of columns and a short one): k^T is copied to (d, t) first, a kernel of its own, so
    the matmul reads B's rows as vectors (12 heads of 128 x 64: 213 -> ~140 us; 6 of 197 x 64 on one core: ~300 ->
    147 us); with fewer rows, or a ragged t under two vectors, the matmul reads k as it is."""
    f = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
                           helper.make_node("MatMul", ["q", "kt"], ["y"])], "qk",
                          [helper.make_tensor_value_info("q", f, [2, rows, 8]),
                           helper.make_tensor_value_info("k", f, [2, t, 8])],
                          [helper.make_tensor_value_info("y", f, [2, rows, t])])
    m = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), device="python")
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((2, rows, 8)).astype(np.float32), rng.standard_normal((2, t, 8)).astype(np.float32)
    y = m.run_graph({"q": q, "k": k})["y"]
    assert len(y.programs()) == kernels
    np.testing.assert_allclose(y.numpy(), q @ k.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def _gelu_model(divisor: str) -> onnx.ModelProto:
    """erf(x / s): s a scalar initializer ("init") or a Constant node ("node")."""
    nodes = [helper.make_node("Div", ["x", "s"], ["q"]), helper.make_node("Erf", ["q"], ["y"])]
    s = numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "s")
    inits = [s] if divisor == "init" else []
    if divisor == "node":
        nodes.insert(0, helper.make_node("Constant", [], ["s"], value=s))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("divisor", ["init", "node"])
def test_scalar_constants_are_literals_in_a_plan(divisor: str) -> None:
    """A one-element float initializer no feed overrides, and a one-element float Constant, are constants in a
    captured plan: GELU's erf(x / sqrt 2) then multiplies by 1 / sqrt 2 (one division per element: erf's own).
    Feeding the initializer captures another plan that divides by the fed value."""
    from math import erf

    from uopir.ir.printer import print_ir
    x = np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32)
    model = from_onnx(_gelu_model(divisor), device="python")
    for _ in range(2):
        y = model.run(x=x)["y"]
    np.testing.assert_allclose(y, np.vectorize(erf)(x / np.float32(np.sqrt(2))), rtol=0, atol=5e-7)
    jit = next(j for j in model._plans.values() if j is not None)
    ir = " ".join(print_ir(ps.program.program) for st in jit.steps for ps in st.launch.plan.steps)
    assert ir.count("core.fdiv") + ir.count("core.recip") == 1
    if divisor == "init":
        y2 = model.run(x=x, s=np.array(2, np.float32))["y"]
        np.testing.assert_allclose(y2, np.vectorize(erf)(x / 2), rtol=0, atol=5e-7)
