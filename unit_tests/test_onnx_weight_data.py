"""ONNX weights from outside (issue 24, item 5): an initializer's data that onnx cannot read is an OnnxImportError
naming it (numpy's reshape ValueError escaped before), and external data files are read only beside a model loaded
from its path (a model given as bytes read them relative to the current folder before)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from uopir.onnx import OnnxImportError, from_onnx  # noqa: E402

W = np.array([1.5, -2.0, 3.25, 4.0], np.float32)


def _model(w: TensorProto) -> onnx.ModelProto:
    """y = w (an Identity of the initializer w, of 4 float32)."""
    g = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _float4(name: str, raw: bytes = b"") -> TensorProto:
    """A float32 [4] TensorProto with these raw bytes, built by hand (onnx's helper refuses a wrong size)."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[4])
    if raw:
        t.raw_data = raw
    return t


def _external(location: str, length: int | None = None) -> TensorProto:
    t = _float4("w")
    t.data_location = TensorProto.EXTERNAL
    for key, value in [("location", location)] + ([("length", str(length))] if length is not None else []):
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


def test_external_data_beside_a_model_loaded_from_its_path(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    (tmp_path / "m.onnx").write_bytes(_model(_external("w.bin")).SerializeToString())
    assert from_onnx(tmp_path / "m.onnx", device="python").run({})["y"].tolist() == W.tolist()


def test_external_data_of_a_model_given_as_bytes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    monkeypatch.chdir(tmp_path)  # where the old importer found w.bin and read it
    with pytest.raises(OnnxImportError, match=r"initializer 'w': its data is in the external file 'w.bin', which is "
                                              r"read only for a model loaded from its path"):
        from_onnx(_model(_external("w.bin")).SerializeToString(), device="python")


def test_initializer_data_of_the_wrong_size(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    (tmp_path / "m.onnx").write_bytes(_model(_external("w.bin", length=8)).SerializeToString())
    with pytest.raises(OnnxImportError, match="initializer 'w': its data cannot be read"):
        from_onnx(tmp_path / "m.onnx", device="python")
    short = _float4("w", W[:2].tobytes())
    with pytest.raises(OnnxImportError, match="initializer 'w': its data cannot be read"):
        from_onnx(_model(short), device="python")


def test_constant_attribute_data_of_the_wrong_size() -> None:
    value = _float4("v", W[:3].tobytes())
    g = helper.make_graph([helper.make_node("Constant", [], ["y"], name="c", value=value)], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"node 'c' \(Constant, opset 17\): attribute 'value': its data cannot"):
        from_onnx(m, device="python")
