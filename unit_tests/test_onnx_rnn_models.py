"""Recurrent ONNX models (uopir/onnx/testmodels_rnn.py: torch-shaped 2-layer LSTM, GRU and RNN) against
onnxruntime, and the shape of their programs: every time step of LSTM/GRU/RNN and every Scan/Loop iteration is the
same program (the step read through a bound variable, the state realized between steps), so the kernels compiled do
not grow with the sequence length, and an LSTM step is two kernels (the cell state with its three gate matmuls fused,
then h with the output gate's), a GRU or RNN step one.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from uopir.backends import realize as R  # noqa: E402
from uopir.onnx import from_onnx  # noqa: E402
from uopir.onnx.testmodels_rnn import gru, lstm, rnn  # noqa: E402


@pytest.mark.parametrize("build", [lstm, gru, rnn], ids=["lstm", "gru", "rnn"])
def test_model_matches_onnxruntime(build) -> None:  # noqa: ANN001
    ort = pytest.importorskip("onnxruntime")
    m, feeds = build(seq=7, inp=12, hidden=16)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    model = from_onnx(m, jit=True)
    for k in range(3):  # the capture, then replays on other inputs (the LSTM cell state is updated in place)
        x = {"x": feeds["x"] * (1 + k)}
        want, got = sess.run(None, x)[0], model.run(x)["y"]
        assert got.shape == want.shape == (7, 1, 16) and np.abs(want).max() > 0.1
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _counts(m, feeds) -> tuple[int, int]:  # noqa: ANN001
    """(kernels compiled by the first run, kernels a second run launches) of a model without the JIT."""
    model = from_onnx(m)
    c0 = R.STATS.compiles
    model.run(feeds)
    c1 = R.STATS.compiles
    with R.capture() as launches:
        model.run(feeds)
    return c1 - c0, sum(len(la.plan.steps) for la in launches)


@pytest.mark.parametrize("build,per_step", [(lstm, 2), (gru, 1), (rnn, 1)], ids=["lstm", "gru", "rnn"])
def test_steps_compile_once(build, per_step: int) -> None:  # noqa: ANN001
    # distinct widths per model, so no kernel of one is in the compiled-kernel cache from the other
    short_c, _ = _counts(*build(seq=3, inp=10, hidden=14))
    long_c, long_k = _counts(*build(seq=15, inp=11, hidden=13))
    assert long_c == short_c <= 14
    # per layer: W and R transposed, the input projection, the initial state, per_step kernels a step; then the
    # output stack
    assert long_k <= 2 * (15 * per_step + 6) + 2


def _scan_model(n: int, width: int):  # noqa: ANN202
    """Scan 9 with one state and one scan input: s = tanh(s + x_t * sum(s)) (a reduction, so an iteration is not
    one elementwise chain that fuses whole); the scan output is each new s doubled."""
    from onnx import TensorProto, helper
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["s"], ["t"], keepdims=1), helper.make_node("Mul", ["xt", "t"], ["u"]),
         helper.make_node("Add", ["s", "u"], ["v"]), helper.make_node("Tanh", ["v"], ["s2"]),
         helper.make_node("Add", ["s2", "s2"], ["y2"])], "body",
        [helper.make_tensor_value_info("s", f, [width]), helper.make_tensor_value_info("xt", f, [width])],
        [helper.make_tensor_value_info("s2", f, [width]), helper.make_tensor_value_info("y2", f, [width])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1)
    vi = helper.make_tensor_value_info
    g = helper.make_graph([node], "scan", [vi("s0", f, [width]), vi("x", f, [n, width])],
                          [vi("s", f, [width]), vi("y", f, [n, width])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    r = np.random.default_rng(n)
    return m, {"s0": r.standard_normal(width).astype(np.float32), "x": r.standard_normal((n, width)).astype(np.float32)}


def test_scan_iterations_compile_once() -> None:
    m, feeds = _scan_model(12, 5)
    out = from_onnx(m).run(feeds)
    s, ys = feeds["s0"], []
    for xt in feeds["x"]:
        s = np.tanh(s + xt * s.sum())
        ys.append(2 * s)
    np.testing.assert_allclose(out["y"], np.stack(ys), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["s"], s, rtol=1e-5, atol=1e-6)
    short_c, _ = _counts(*_scan_model(3, 6))
    long_c, _ = _counts(*_scan_model(14, 7))
    assert long_c == short_c <= 6


@pytest.mark.parametrize("build,gates", [(lstm, 4), (gru, 3), (rnn, 1)], ids=["lstm", "gru", "rnn"])
def test_steps_read_the_recurrence_weights_transposed(build, gates: int) -> None:  # noqa: ANN001
    # a step's vector of outputs then loads a contiguous row of R^T per reduction index; reading R (gates*hs, hs)
    # itself gathered a strided column lane by lane (the LSTM step kernel took 3x as long)
    hs, inp = 16, 12
    m, feeds = build(seq=3, inp=inp, hidden=hs, layers=1)
    model = from_onnx(m, jit=False)  # every realize recorded here (a jit's first call records into its own capture)
    with R.capture() as launches:
        model.run(feeds)
    steps = [la for la in launches if any(k.startswith("onnx_rnn_step") for k in la.var_vals)]
    assert len(steps) >= 3
    shapes = {tuple(b.shape) for la in steps for b in la.inputs}
    assert (hs, gates * hs) in shapes and (1, gates * hs, hs) not in shapes, shapes  # R^T, not the initializer R
