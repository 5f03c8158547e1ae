"""uopir.onnx's importer: errors that name the node, its operator and its opset (raised at import, before running),
dim_param binding, opset versions where an operator's meaning changed, optional inputs and initializers."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from uopir import Tensor  # noqa: E402
from uopir.onnx import OnnxImportError, OnnxOpError, from_onnx, lookup  # noqa: E402

F = TP.FLOAT


def model(nodes, inputs, outputs, opset=17, inits=()):  # noqa: ANN001, ANN201
    ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    outs = [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs]
    g = helper.make_graph(nodes, "g", ins, outs, initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_add_relu_with_initializer_and_dim_param() -> None:
    w = np.array([[1.0, -2.0, 0.5]], np.float32)
    m = from_onnx(model([helper.make_node("Add", ["x", "w"], ["z"]), helper.make_node("Relu", ["z"], ["y"])],
                        [("x", F, ["N", 3])], [("y", F, ["N", 3])], inits=[("w", w)]), device="python")
    assert m.initializers["w"].uop.op.name == "tensor.buffer"  # realized once, at import
    for n in (1, 4):  # the dim N is bound from the input, per call
        x = np.linspace(-3, 3, 3 * n, dtype=np.float32).reshape(n, 3)
        out = m({"x": x})
        assert list(out) == ["y"] and isinstance(out["y"], Tensor)
        np.testing.assert_allclose(out["y"].numpy(), np.maximum(x + w, 0), rtol=1e-6)
    np.testing.assert_allclose(m.run(x=Tensor(x, device="python"))["y"], np.maximum(x + w, 0), rtol=1e-6)


def test_unsupported_operator_is_rejected_at_import_naming_node_op_and_opset() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NoSuchOp", ["a"], ["y"], name="weird_7")]
    with pytest.raises(OnnxImportError, match=r"^node 'weird_7' \(NoSuchOp, opset 13\): unsupported operator$"):
        from_onnx(model(nodes, [("x", F, [2])], [("y", F, [2])], opset=13))
    # an op registered only from a later opset is unsupported at an earlier one (Gelu: opset 20)
    assert lookup("Gelu", "", 19) is None and lookup("Gelu", "", 20) is not None


def test_unsupported_dtypes_and_types_are_named() -> None:
    with pytest.raises(OnnxImportError, match="graph input 's': unsupported dtype string"):
        from_onnx(model([helper.make_node("Identity", ["s"], ["y"])], [("s", TP.STRING, [2])], [("y", TP.STRING, [2])]))
    seq = helper.make_tensor_sequence_value_info("q", F, None)  # sequences of tensors are taken (ops_sequence)
    seq2 = helper.make_value_info("q", helper.make_sequence_type_proto(seq.type))
    mp = helper.make_value_info("q", helper.make_map_type_proto(TP.INT64, helper.make_tensor_type_proto(F, None)))
    for vi, what in ((seq2, "sequence of sequence of tensor"), (mp, "map")):
        g = helper.make_graph([helper.make_node("Identity", ["q"], ["y"])], "g", [vi], [seq])
        with pytest.raises(OnnxImportError, match=f"graph input 'q': unsupported type: {what}"):
            from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    cast = helper.make_node("Cast", ["x"], ["y"], name="c8", to=TP.FLOAT8E4M3FN)  # float8: held in float32
    m8 = from_onnx(model([cast], [("x", F, [2])], [("y", F, [2])]))  # but the output is declared float
    with pytest.raises(OnnxImportError, match="graph output 'y' is declared f32, the graph computes float8e4m3fn"):
        m8({"x": np.zeros(2, np.float32)})
    cast = helper.make_node("Cast", ["x"], ["y"], name="c16", to=TP.COMPLEX64)
    with pytest.raises(OnnxImportError, match=r"'c16' \(Cast, opset 17\): attribute 'to': unsupported dtype complex64"):
        from_onnx(model([cast], [("x", F, [2])], [("y", F, [2])]))
    m = from_onnx(model([helper.make_node("Cast", ["x"], ["y"], name="c9")], [("x", F, [2])], [("y", F, [2])]))
    with pytest.raises(OnnxImportError, match=r"node 'c9' \(Cast, opset 17\): missing required attribute 'to'"):
        m({"x": np.zeros(2, np.float32)})


def test_tensor_errors_name_the_node_and_bad_inputs_are_clear() -> None:
    m = from_onnx(model([helper.make_node("Add", ["x", "y"], ["z"], name="add_1")],
                        [("x", F, [2, 3]), ("y", F, [4])], [("z", F, None)]), device="python")
    with pytest.raises(OnnxOpError, match=r"node 'add_1' \(Add, opset 17\): .*broadcast"):
        m({"x": np.zeros((2, 3), np.float32), "y": np.zeros(4, np.float32)})
    with pytest.raises(OnnxImportError, match="input 'y' is not given"):
        m({"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(OnnxImportError, match="input 'x': dtype i32, the model wants f32"):
        m({"x": np.zeros((2, 3), np.int32), "y": np.zeros(4, np.float32)})
    m2 = from_onnx(model([helper.make_node("Add", ["x", "y"], ["z"])], [("x", F, ["N"]), ("y", F, ["N"])],
                         [("z", F, ["N"])]), device="python")
    with pytest.raises(OnnxImportError, match="dim 'N' is 3 here but 2 in an earlier input"):
        m2({"x": np.zeros(2, np.float32), "y": np.zeros(3, np.float32)})


def test_opset_versions_where_meaning_changed() -> None:
    x = np.array([[-2.0, 0.5, 3.0]], np.float32)
    # Clip: min/max attributes up to opset 10, optional inputs from 11 ("" omits one)
    old = from_onnx(model([helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=1.0)], [("x", F, [1, 3])],
                          [("y", F, [1, 3])], opset=6), device="python")
    np.testing.assert_array_equal(old.run(x=x)["y"], [[-1, 0.5, 1]])
    new = from_onnx(model([helper.make_node("Clip", ["x", "", "hi"], ["y"])], [("x", F, [1, 3])],
                          [("y", F, [1, 3])], opset=13, inits=[("hi", np.array(1.0, np.float32))]), device="python")
    np.testing.assert_array_equal(new.run(x=x)["y"], [[-2, 0.5, 1]])
    # ReduceSum: axes attribute up to opset 12, an input from 13
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    r11 = from_onnx(model([helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)], [("x", F, [2, 3])],
                          [("y", F, [2])], opset=11), device="python")
    r13 = from_onnx(model([helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0)], [("x", F, [2, 3])],
                          [("y", F, [2])], opset=13, inits=[("ax", np.array([1], np.int64))]), device="python")
    np.testing.assert_array_equal(r11.run(x=a)["y"], [3, 12])
    np.testing.assert_array_equal(r13.run(x=a)["y"], [3, 12])
    # Softmax: before opset 13 the input is coerced to 2-D at axis (1 = over everything after dim 0)
    t = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    s11 = from_onnx(model([helper.make_node("Softmax", ["x"], ["y"])], [("x", F, [2, 2, 2])], [("y", F, [2, 2, 2])],
                          opset=11), device="python").run(x=t)["y"]
    s13 = from_onnx(model([helper.make_node("Softmax", ["x"], ["y"])], [("x", F, [2, 2, 2])], [("y", F, [2, 2, 2])],
                          opset=13), device="python").run(x=t)["y"]
    e = np.exp(t - t.max())
    np.testing.assert_allclose(s11, (e.reshape(2, 4) / e.reshape(2, 4).sum(1, keepdims=True)).reshape(2, 2, 2),
                               rtol=1e-5)
    np.testing.assert_allclose(s13, e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_int_division_truncates_and_outputs_keep_their_dtype() -> None:
    m = from_onnx(model([helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("ReduceSum", ["a"], ["s"])],
                        [("a", TP.INT32, [4]), ("b", TP.INT32, [4])], [("q", TP.INT32, [4]), ("s", TP.INT32, [1])]),
                  device="python")
    out = m.run(a=np.array([7, -7, 7, -7], np.int32), b=np.array([2, 2, -2, -2], np.int32))
    np.testing.assert_array_equal(out["q"], [3, -3, -3, 3])  # C truncation, not floor
    assert out["q"].dtype == np.int32 and out["s"].dtype == np.int32 and out["s"].tolist() == [0]


def test_exclusive_cumsum_and_cumprod_shift_the_scan_by_one() -> None:
    """Exclusive CumSum / CumProd shift the inclusive scan by one, the identity first, forward and reversed. Guards the
    defect where exclusive CumSum was the scan minus the input: an infinite input made its own slot NaN, not 0."""
    x = np.array([[np.inf, 1.0, 2.0], [3.0, -np.inf, 4.0]], np.float32)
    nodes = [helper.make_node("CumSum", ["x", "ax"], ["s"], exclusive=1),
             helper.make_node("CumSum", ["x", "ax"], ["sr"], exclusive=1, reverse=1),
             helper.make_node("CumProd", ["x", "ax"], ["pr"], exclusive=1, reverse=1)]
    m = from_onnx(model(nodes, [("x", F, [2, 3])], [(n, F, [2, 3]) for n in ("s", "sr", "pr")], opset=26,
                        inits=[("ax", np.array(1, np.int64))]))
    out = m.run(x=x)
    inf = np.inf
    np.testing.assert_array_equal(out["s"], [[0, inf, inf], [0, 3, -inf]])
    np.testing.assert_array_equal(out["sr"], [[3, 2, 0], [-inf, 4, 0]])
    np.testing.assert_array_equal(out["pr"], [[2, 2, 1], [-inf, 4, 1]])


def test_docs_list_every_registered_operator() -> None:
    import re
    from pathlib import Path

    from uopir.onnx import supported_ops_text
    text = (Path(__file__).resolve().parent.parent / "docs" / "onnx.md").read_text()
    listed = re.search(r"<!-- ops:.*?-->\n(.*?)<!-- /ops -->", text, re.S)
    assert listed is not None
    assert listed.group(1).strip() == supported_ops_text(), "regenerate the list in docs/onnx.md (see its comment)"


def test_if_builds_the_taken_branch_which_sees_outer_values() -> None:
    def branch(op: str) -> onnx.GraphProto:  # no inputs of its own: reads x from the outer graph
        return helper.make_graph([helper.make_node(op, ["x"], ["b"])], op, [],
                                 [helper.make_tensor_value_info("b", F, [3])])
    node = helper.make_node("If", ["c"], ["y"], name="if_0", then_branch=branch("Neg"), else_branch=branch("Abs"))
    m = from_onnx(model([node], [("c", TP.BOOL, []), ("x", F, [3])], [("y", F, [3])], opset=16), device="python")
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    np.testing.assert_array_equal(m.run(c=np.array(True), x=x)["y"], [1, -2, 3])
    np.testing.assert_array_equal(m.run(c=np.array(False), x=x)["y"], [1, 2, 3])
    bad = helper.make_node("If", ["c"], ["y"], name="if_1", then_branch=branch("Neg"), else_branch=branch("NoSuchOp"))
    with pytest.raises(OnnxImportError, match=r"node 'if_1/NoSuchOp_0' \(NoSuchOp, opset 16\): unsupported operator"):
        from_onnx(model([bad], [("c", TP.BOOL, []), ("x", F, [3])], [("y", F, [3])], opset=16))


def test_loop_is_unrolled_with_carried_values_and_scan_outputs() -> None:
    # body(i, cond, acc) -> (cond, acc + i, acc): 4 trips give acc 0+0+1+2+3 and the scan [0, 0, 1, 3]
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Add", ["acc", "fi"], ["acc2"]),
         helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["acc"], ["s"])], "body",
        [helper.make_tensor_value_info("i", TP.INT64, []), helper.make_tensor_value_info("c", TP.BOOL, []),
         helper.make_tensor_value_info("acc", F, [])],
        [helper.make_tensor_value_info("c2", TP.BOOL, []), helper.make_tensor_value_info("acc2", F, []),
         helper.make_tensor_value_info("s", F, [])])
    node = helper.make_node("Loop", ["m", "", "a0"], ["acc", "scan"], body=body)
    m = from_onnx(model([node], [("m", TP.INT64, []), ("a0", F, [])], [("acc", F, []), ("scan", F, [4])], opset=16),
                  device="python")
    out = m.run(m=np.array(4, np.int64), a0=np.array(0.0, np.float32))
    assert out["acc"].tolist() == 6.0 and out["scan"].tolist() == [0.0, 0.0, 1.0, 3.0]


def test_rnn_with_shorter_sequence_lens_keeps_the_state_and_outputs_zeros() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 2)).astype(np.float32)  # (seq, batch, input)
    w = rng.standard_normal((1, 4, 2)).astype(np.float32)
    r = rng.standard_normal((1, 4, 4)).astype(np.float32)
    node = helper.make_node("RNN", ["x", "w", "r", "", "lens"], ["y", "yh"], hidden_size=4)
    m = from_onnx(model([node], [("x", F, [3, 2, 2]), ("lens", TP.INT32, [2])],
                        [("y", F, [3, 1, 2, 4]), ("yh", F, [1, 2, 4])], opset=14, inits=[("w", w), ("r", r)]),
                  device="python")
    out = m.run(x=x, lens=np.array([3, 1], np.int32))
    h = np.zeros((2, 4), np.float32)
    want = np.zeros((3, 1, 2, 4), np.float32)
    for t in range(3):
        hn = np.tanh(x[t] @ w[0].T + h @ r[0].T)
        live = np.array([[t < 3], [t < 1]])
        h = np.where(live, hn, h)
        want[t, 0] = np.where(live, hn, 0)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["yh"][0], h, rtol=1e-5, atol=1e-6)  # batch row 1 stopped after step 0
