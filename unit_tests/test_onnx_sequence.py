"""ONNX sequence / optional values (uopir/onnx/ops_sequence.py), the random operators (ops_random.py) and bfloat16
outputs in their ONNX type. Sequences are checked against onnxruntime; seeded random operators against onnx's
reference evaluator, whose draws (numpy's RandomState(seed)) uopir follows; every model on the python device.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from uopir.frontend.tensor import Tensor  # noqa: E402
from uopir.ir.dtype import dtypes  # noqa: E402
from uopir.onnx import OnnxImportError, from_onnx  # noqa: E402

F = TensorProto.FLOAT
SEQ_F = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))


def _model(nodes: list, ins: list, outs: list, opset: int = 18) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "g", ins, outs), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)  # the onnxruntime of the test extra reads IR <= 10
    return m


def _tensor(name: str, shape: list | None = None, t: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, t, shape)


def test_sequence_ops_match_onnxruntime() -> None:
    """Split, insert (front, negative position), erase, at, length and concat/stack of the result, vs onnxruntime."""
    mk = helper.make_node
    nodes = [
        mk("SplitToSequence", ["x", "sizes"], ["s0"], axis=1),
        mk("SequenceInsert", ["s0", "y", "p0"], ["s1"]),
        mk("SequenceInsert", ["s1", "y", "pm1"], ["s2"]),
        mk("SequenceErase", ["s2", "p1"], ["s3"]),
        mk("SequenceAt", ["s3", "pm1"], ["last"]),
        mk("SequenceLength", ["s3"], ["n"]),
        mk("ConcatFromSequence", ["s3"], ["cat"], axis=1),
        mk("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
        mk("ConcatFromSequence", ["rows"], ["stacked"], axis=-1, new_axis=1),
        mk("SequenceEmpty", [], ["e"]),
        mk("SequenceInsert", ["e", "last"], ["e1"]),
        mk("ConcatFromSequence", ["e1"], ["one"], axis=0),
    ]
    consts = {"sizes": np.array([1, 3, 2], np.int64), "p0": np.array(0, np.int64), "pm1": np.array(-1, np.int64),
              "p1": np.array(1, np.int64)}
    for k, v in consts.items():
        nodes.insert(0, mk("Constant", [], [k], value=onnx.numpy_helper.from_array(v, k)))
    m = _model(nodes, [_tensor("x", [2, 6]), _tensor("y", [2, 2])],
               [_tensor("last", None), _tensor("n", None, TensorProto.INT64), _tensor("cat", None),
                _tensor("stacked", None), _tensor("one", None)])
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "y": -np.ones((2, 2), np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = from_onnx(m, device="python").run(feeds)
    for o, w in zip(m.graph.output, want, strict=True):
        assert got[o.name].dtype == w.dtype and got[o.name].shape == w.shape, o.name
        np.testing.assert_array_equal(got[o.name], w, err_msg=o.name)
    assert got["n"] == 4 and got["cat"].shape == (2, 9)  # y, 3, y, 2 columns


def test_sequence_input_and_output() -> None:
    """A sequence graph input is a list of arrays, a sequence output a list (of Tensors from model(), arrays from
    run); an optional input may be left out (empty)."""
    opt_t = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    m = _model([helper.make_node("SequenceInsert", ["s", "x"], ["out"]),
                helper.make_node("OptionalHasElement", ["o"], ["has"])],
               [helper.make_value_info("s", SEQ_F), _tensor("x", [2]), helper.make_value_info("o", opt_t)],
               [helper.make_value_info("out", SEQ_F), _tensor("has", [], TensorProto.BOOL)])
    model = from_onnx(m, device="python")
    a, b = np.ones(3, np.float32), np.array([5.0, 6.0], np.float32)
    out = model({"s": [a], "x": b})
    assert isinstance(out["out"], list) and all(isinstance(t, Tensor) for t in out["out"])
    got = model.run(s=[a], x=b, o=b)
    assert [g.tolist() for g in got["out"]] == [[1, 1, 1], [5, 6]] and bool(got["has"])
    assert not bool(model.run(s=[], x=b)["has"])
    with pytest.raises(OnnxImportError, match="input 's': element 0 has dtype i64"):
        model.run(s=[np.ones(2, np.int64)], x=b)
    with pytest.raises(OnnxImportError, match="input 's': a sequence is given as a list"):
        model.run(s=a, x=b)


def test_optional_through_if() -> None:
    """If returns an optional that is empty on one branch and holds a sequence on the other (onnx's test_if_opt)."""
    seq5 = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2]))
    then_g = helper.make_graph([helper.make_node("Optional", [], ["e"], type=seq5)], "t", [],
                               [helper.make_value_info("e", helper.make_optional_type_proto(seq5))])
    else_g = helper.make_graph([helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0]),
                                helper.make_node("SequenceConstruct", ["c", "c"], ["sq"]),
                                helper.make_node("Optional", ["sq"], ["o"])], "e", [],
                               [helper.make_value_info("o", helper.make_optional_type_proto(seq5))])
    m = _model([helper.make_node("If", ["cond"], ["r"], then_branch=then_g, else_branch=else_g)],
               [_tensor("cond", [], TensorProto.BOOL)], [helper.make_value_info("r", helper.make_optional_type_proto(
                   seq5))])
    model = from_onnx(m, device="python")
    assert model.run(cond=np.array(True))["r"] is None
    assert [x.tolist() for x in model.run(cond=np.array(False))["r"]] == [[1, 2], [1, 2]]


def test_sequence_errors_name_the_node() -> None:
    m = _model([helper.make_node("SequenceConstruct", ["x"], ["s"], name="mk"),
                helper.make_node("Relu", ["s"], ["y"], name="bad")], [_tensor("x", [2])], [_tensor("y", [2])])
    with pytest.raises(OnnxImportError, match=r"node 'bad' \(Relu.*sequence or optional value"):
        from_onnx(m, device="python").run(x=np.ones(2, np.float32))
    m = _model([helper.make_node("SequenceConstruct", ["x"], ["s"]),
                helper.make_node("Constant", [], ["p"], value_int=3),
                helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")], [_tensor("x", [2])], [_tensor("y")])
    with pytest.raises(OnnxImportError, match=r"node 'at'.*position 3 is out of range for a sequence of 1 tensor"):
        from_onnx(m, device="python").run(x=np.ones(2, np.float32))


def _one(op: str, attrs: dict, ins: dict[str, np.ndarray], out_t: int = F, nout: int = 1,
         opset: int = 18) -> onnx.ModelProto:
    gi = [_tensor(k, list(v.shape), helper.np_dtype_to_tensor_dtype(v.dtype)) for k, v in ins.items()]
    outs = [_tensor(f"y{i}", None, out_t if i == 0 else TensorProto.BOOL) for i in range(nout)]
    return _model([helper.make_node(op, list(ins), [o.name for o in outs], **attrs)], gi, outs, opset)


@pytest.mark.parametrize("op,attrs", [("RandomUniform", {"low": -2.0, "high": 3.0}),
                                      ("RandomNormal", {"mean": 1.0, "scale": 0.5})])
def test_seeded_random_matches_reference_and_repeats(op: str, attrs: dict) -> None:
    """A seed gives onnx's reference values, the same on every call (the captured plan's replays included)."""
    m = _one(op, {**attrs, "shape": [3, 4], "seed": 7.0}, {})
    want = ReferenceEvaluator(m).run(None, {})[0]
    model = from_onnx(m, device="python")
    for _ in range(3):
        np.testing.assert_array_equal(model.run()["y0"], want)
    like = _one(f"{op}Like", {**attrs, "seed": 7.0}, {"x": np.zeros((3, 4), np.float32)})
    np.testing.assert_array_equal(from_onnx(like, device="python").run(x=np.zeros((3, 4), np.float32))["y0"], want)


def test_unseeded_random_redraws_and_manual_seed_repeats() -> None:
    m = _one("RandomUniform", {"shape": [64]}, {})
    model = from_onnx(m, device="python")
    Tensor.manual_seed(3)
    a, b = model.run()["y0"], model.run()["y0"]
    assert not np.array_equal(a, b)  # each call (the second one a replay) draws again
    assert 0.3 < a.mean() < 0.7 and a.min() >= 0 and a.max() < 1
    Tensor.manual_seed(3)
    np.testing.assert_array_equal(from_onnx(m, device="python").run()["y0"], a)


def test_bernoulli_dropout_multinomial() -> None:
    p = np.linspace(0, 1, 24, dtype=np.float32).reshape(4, 6)
    got = from_onnx(_one("Bernoulli", {"seed": 5.0}, {"p": p}), device="python").run(p=p)["y0"]
    want = (np.random.RandomState(5).rand(4, 6).astype(np.float32) < p).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    r, t = np.array(0.5, np.float32), np.array(True)
    m = _one("Dropout", {"seed": 4}, {"x": x, "r": r, "t": t}, nout=2)
    ref, mask = ReferenceEvaluator(m).run(None, {"x": x, "r": r, "t": t})
    got = from_onnx(m, device="python").run(x=x, r=r, t=t)
    np.testing.assert_allclose(got["y0"], ref, rtol=1e-6)
    np.testing.assert_array_equal(got["y1"], mask)
    logits = np.log(np.array([[0.1, 0.2, 0.7], [1e-9, 1.0, 1e-9]], np.float32))
    got = from_onnx(_one("Multinomial", {"seed": 2.0, "sample_size": 5}, {"x": logits}, TensorProto.INT32),
                    device="python").run(x=logits)["y0"]
    u = np.random.RandomState(2).rand(2, 5).astype(np.float32)
    cdf = np.cumsum(np.exp(logits) / np.exp(logits).sum(1, keepdims=True), 1)
    want = np.stack([np.searchsorted(cdf[i], u[i], side="right") for i in range(2)]).astype(np.int32)
    np.testing.assert_array_equal(got, want)
    assert (got[1] == 1).all()


def test_bfloat16_output_in_its_type() -> None:
    """model(...) gives the bfloat16 Tensor, run(...) an ml_dtypes bfloat16 array (also once replays go steady)."""
    import ml_dtypes
    m = _one("Cast", {"to": TensorProto.BFLOAT16}, {"x": np.zeros(3, np.float32)}, TensorProto.BFLOAT16)
    model = from_onnx(m, device="python")
    x = np.array([1.1, -2.2, 3.3], np.float32)
    assert model(x=x)["y0"].dtype == dtypes.bfloat16
    for _ in range(3):
        y = model.run(x=x)["y0"]
        assert y.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(y, x.astype(ml_dtypes.bfloat16))


def test_uop_run_prints_a_sequence_output(tmp_path: pytest.TempPathFactory) -> None:
    import io

    from uopir.tools.uop_run import main
    m = _model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0)], [_tensor("x", [2, 3])],
               [helper.make_tensor_sequence_value_info("s", F, None)], opset=17)
    path = tmp_path / "split.onnx"  # type: ignore[operator]
    onnx.save(m, str(path))
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path), "--backend", "python"], out, err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["s[0]", "s[1]"] and "tensor<1x3xf32>" in lines[0]
