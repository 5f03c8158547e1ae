"""uop-run on ONNX models with low-precision (float8 / float4 / int4 / int2) inputs and outputs: outputs print as
their ONNX type and -o saves their storage values (np.save cannot keep an ml_dtypes dtype); --input takes an array of
the type's ml_dtypes dtype (also as the raw bytes np.load gives back for one) or float / int values the type holds
exactly, anything else a clear error. Runs the real program in-process on the python device."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")

from onnx import TensorProto, helper  # noqa: E402

from uopir.tools.uop_run import main  # noqa: E402


def _write_model(tmp_path: Path) -> Path:
    """x: float8e4m3fn [2, 2] -> Transpose -> y (float8e4m3fn); q: int4 [3] -> Identity -> r (int4)."""
    g = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["y"]), helper.make_node("Identity", ["q"], ["r"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [2, 2]),
         helper.make_tensor_value_info("q", TensorProto.INT4, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FN, [2, 2]),
         helper.make_tensor_value_info("r", TensorProto.INT4, [3])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]), str(path))
    return path


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(["--backend=python", *argv], out, err)
    return rc, out.getvalue(), err.getvalue()


def test_lowp_outputs_print_as_their_onnx_type_and_save_storage_values(tmp_path: Path) -> None:
    m = _write_model(tmp_path)
    np.save(tmp_path / "x.npy", np.array([[0.5, -448.0], [0.001953125, 3.75]], np.float32))  # float8e4m3fn values
    np.save(tmp_path / "q.npy", np.array([-8, 7, 0], np.int8))
    rc, out, err = _run(str(m), "--input", f"x={tmp_path / 'x.npy'}", "--input", f"q={tmp_path / 'q.npy'}",
                        "-o", str(tmp_path / "o.npz"))
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == ("y: tensor<2x2xfloat8e4m3fn>  min -448  max 3.75  mean -110.937  [0.5, 0.00195312, -448, "
                        "3.75]  (-o: saved as its f32 storage values, which are float8e4m3fn values)")
    assert lines[1].startswith("r: tensor<3xint4>  min -8  max 7  mean -0.333333  [-8, 7, 0]  (-o: saved as its i8")
    saved = np.load(tmp_path / "o.npz")
    assert saved["y"].dtype == np.float32 and saved["r"].dtype == np.int8
    np.testing.assert_array_equal(saved["y"], [[0.5, 0.001953125], [-448.0, 3.75]])
    np.testing.assert_array_equal(saved["r"], [-8, 7, 0])
    # without -o: no note
    rc, out, err = _run(str(m), "--input", f"x={tmp_path / 'x.npy'}")
    assert rc == 0 and out.splitlines()[0].endswith("[0.5, 0.00195312, -448, 3.75]"), err


def test_lowp_input_as_ml_dtypes_bytes_and_rejected_values(tmp_path: Path) -> None:
    m = _write_model(tmp_path)
    # np.save of an ml_dtypes array: np.load gives its bytes back as |V1; read as the model's type
    np.save(tmp_path / "x8.npy", np.array([[1.0, 2.0], [-0.25, 448.0]], np.float32).astype(ml_dtypes.float8_e4m3fn))
    assert np.load(tmp_path / "x8.npy").dtype.kind == "V"
    rc, out, err = _run(str(m), "--input", f"x={tmp_path / 'x8.npy'}", "-o", str(tmp_path / "o.npz"))
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["y"], [[1.0, -0.25], [2.0, 448.0]])
    # a value the type does not hold: located by index, no traceback
    np.save(tmp_path / "bad.npy", np.array([[0.5, 0.1], [1.0, 2.0]], np.float32))
    rc, out, err = _run(str(m), "--input", f"x={tmp_path / 'bad.npy'}")
    assert rc == 1 and out == ""
    assert err == (f"uop-run: error: {m}: input 'x': the float32 value 0.1 at index [0, 1] is no float8e4m3fn value "
                   f"(give values float8e4m3fn holds exactly, or an ml_dtypes float8_e4m3fn array) "
                   f"(--input x={tmp_path / 'bad.npy'})\n")
    np.save(tmp_path / "q.npy", np.array([8, 0, 0], np.int64))  # int4 holds -8..7
    rc, out, err = _run(str(m), "--input", f"q={tmp_path / 'q.npy'}")
    assert rc == 1 and "input 'q': the int64 value 8 at index [0] is no int4 value" in err
    np.save(tmp_path / "b.npy", np.array([True, False, True]))
    rc, out, err = _run(str(m), "--input", f"q={tmp_path / 'b.npy'}")
    assert rc == 1 and "input 'q': dtype bool, the model wants int4" in err and "Traceback" not in err
