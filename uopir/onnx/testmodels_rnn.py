"""Recurrent real-shaped ONNX models built with onnx.helper, laid out as torch's exporter writes `nn.LSTM` /
`nn.GRU` (one LSTM/GRU node per layer, the direction axis squeezed between layers, zero initial states as
initializers), for the model tests (unit_tests/test_onnx_rnn_models.py) and the bench (bench/onnx_models.py):

- `lstm`: 2 stacked LSTM layers over `seq` time steps -> (seq, batch, hidden) outputs.
- `gru`: 2 stacked GRU layers (linear_before_reset=1, as torch exports) -> (seq, batch, hidden) outputs.
- `rnn`: 2 stacked tanh RNN layers (`nn.RNN`) -> (seq, batch, hidden) outputs.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from uopir.onnx.testmodels import _finish, _helpers


def _stacked(op: str, gates: int, seq: int, batch: int, inp: int, hidden: int, layers: int,
             seed: int) -> tuple[Any, dict[str, np.ndarray]]:
    onnx, helper, _ = _helpers()
    r = np.random.default_rng(seed)
    k = 1 / np.sqrt(hidden)  # torch's init range

    def u(*s: int) -> np.ndarray:
        return r.uniform(-k, k, s).astype(np.float32)

    inits: dict[str, np.ndarray] = {"sq_axis": np.array([1], np.int64)}
    nodes, x = [], "x"
    for i in range(layers):
        n_in = inp if i == 0 else hidden
        inits |= {f"w{i}": u(1, gates * hidden, n_in), f"r{i}": u(1, gates * hidden, hidden),
                  f"b{i}": u(1, 2 * gates * hidden), f"h0_{i}": np.zeros((1, batch, hidden), np.float32)}
        ins = [x, f"w{i}", f"r{i}", f"b{i}", "", f"h0_{i}"]
        attrs: dict[str, Any] = {"hidden_size": hidden}
        if op == "LSTM":
            inits[f"c0_{i}"] = np.zeros((1, batch, hidden), np.float32)
            ins.append(f"c0_{i}")
        elif op == "GRU":
            attrs["linear_before_reset"] = 1
        nodes.append(helper.make_node(op, ins, [f"y{i}"], **attrs))
        nodes.append(helper.make_node("Squeeze", [f"y{i}", "sq_axis"], [f"s{i}"]))
        x = f"s{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    f = onnx.TensorProto.FLOAT
    m = _finish(nodes, [helper.make_tensor_value_info("x", f, [seq, batch, inp])],
                [helper.make_tensor_value_info("y", f, [seq, batch, hidden])], inits, op.lower(), 17)
    return m, {"x": r.standard_normal((seq, batch, inp)).astype(np.float32)}


def lstm(seq: int = 20, batch: int = 1, inp: int = 32, hidden: int = 64, layers: int = 2,
         seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """(model, example inputs): (seq, batch, inp) -> (seq, batch, hidden), torch's 2-layer nn.LSTM export."""
    return _stacked("LSTM", 4, seq, batch, inp, hidden, layers, seed)


def gru(seq: int = 20, batch: int = 1, inp: int = 32, hidden: int = 64, layers: int = 2,
        seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """(model, example inputs): (seq, batch, inp) -> (seq, batch, hidden), torch's 2-layer nn.GRU export."""
    return _stacked("GRU", 3, seq, batch, inp, hidden, layers, seed)


def rnn(seq: int = 20, batch: int = 1, inp: int = 32, hidden: int = 64, layers: int = 2,
        seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """(model, example inputs): (seq, batch, inp) -> (seq, batch, hidden), torch's 2-layer tanh nn.RNN export."""
    return _stacked("RNN", 1, seq, batch, inp, hidden, layers, seed)
