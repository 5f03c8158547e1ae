"""The files the tools read and write (issue 24, item 7): an `--input` array that holds no numbers is a usage error
naming the input and the file, never an internal error; and every option that writes a file refuses a folder that
does not exist (exit 1, naming the path) and never makes one, as uop-opt's -o always did.

Regressions: `uop-run --input x=strings.npy` ended in `internal error: ValueError` (exit 2); `uop-opt --viz=DIR/x.html`
and `uop-viz -o DIR/x.html` made the missing folders (even at the filesystem root), uop-run's and uop-opt's -o
refused them only after the run, and `--reproducer DIR/r.uop` was taken silently (no reproducer written)."""
from __future__ import annotations

import io
import os
import uuid
from pathlib import Path

import numpy as np
import pytest
from test_uop_run import run

from uopir.frontend import viz as frontend_viz
from uopir.ir import trace
from uopir.tools import uop_viz
from uopir.tools.uop_opt import main as uop_opt
from uopir.viz import write_page

PROGRAM = """
%x = tensor.buffer {id = 0, device = "python"} : tensor<3xf32>
%c = core.const 2.0 : f32
%y = core.mul %x, %c : tensor<3xf32>
core.sink %y
"""

NOT_NUMBERS = [
    (np.array(["a", "b", "c"]), "text"),
    (np.array([b"a", b"b", b"c"]), "byte strings"),
    (np.zeros(3, dtype=[("x", "f4"), ("y", "i4")]), "records with fields x, y"),
    (np.array([1 + 1j, 2, 3]), "complex numbers"),
    (np.array([1 + 0j, 2, 3]), "complex numbers"),  # exactly real values: still not a type uopir has
    (np.array(["2020-01-01"] * 3, dtype="datetime64[D]"), "dates"),
    (np.array([1, 2, 3], dtype="timedelta64[s]"), "time spans"),
    (np.zeros(3, dtype="V4"), "raw bytes"),
]


# ---- --input arrays that hold no numbers ----------------------------------------------------------------------------
@pytest.mark.parametrize("arr,what", NOT_NUMBERS, ids=[w for _, w in NOT_NUMBERS])
def test_uop_run_input_without_numbers_is_a_usage_error(tmp_path: Path, arr: np.ndarray, what: str) -> None:
    path = tmp_path / "x.npy"
    np.save(path, arr)
    rc, out, err = run(tmp_path, PROGRAM, "--input", f"0={path}")
    assert rc == 1 and out == ""
    assert err == f"uop-run: error: --input 0: '{path}' holds {what} (numpy dtype {arr.dtype}); uop-run takes " \
                  "arrays of bool, integer or float values\n"


def test_uop_run_numeric_inputs_still_run(tmp_path: Path) -> None:
    for arr in (np.array([True, False, True]), np.array([1, 2, 3], np.int16), np.array([1.5, 2, 3], np.float16)):
        np.save(tmp_path / "x.npy", arr)
        rc, out, err = run(tmp_path, PROGRAM, "--input", f"%x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "o.npy"))
        assert rc == 0, err
        np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), arr.astype(np.float32) * 2)


def _relu_model(tmp_path: Path) -> Path:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _uop_run(*argv: str) -> tuple[int, str, str]:
    from uopir.tools.uop_run import main

    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), out, err)
    return rc, out.getvalue(), err.getvalue()


def test_onnx_input_without_numbers_is_a_usage_error(tmp_path: Path) -> None:
    model = _relu_model(tmp_path)
    np.save(tmp_path / "s.npy", np.array(["a", "b", "c"]))
    rc, _, err = _uop_run(str(model), "--backend=python", "--input", f"x={tmp_path / 's.npy'}")
    assert (rc, err) == (1, f"uop-run: error: --input x: '{tmp_path / 's.npy'}' holds text (numpy dtype <U1); "
                            "uop-run takes arrays of bool, integer or float values\n")
    # raw bytes are the form of a low-precision input only: for a float input they name the input and the file
    np.save(tmp_path / "v.npy", np.zeros(3, dtype="V4"))
    rc, _, err = _uop_run(str(model), "--backend=python", "--input", f"x={tmp_path / 'v.npy'}")
    assert rc == 1 and "internal error" not in err
    assert f"input 'x': numpy dtype |V4 is not a type uopir has, the model wants f32 (--input x={tmp_path / 'v.npy'})" \
        in err


def test_onnx_load_feeds_refuses_a_dtype_uopir_lacks(tmp_path: Path) -> None:
    from uopir.onnx.cli import load, load_feeds
    from uopir.onnx.registry import OnnxImportError

    model = load(str(_relu_model(tmp_path)), "python")
    with pytest.raises(OnnxImportError, match=r"input 'x': numpy dtype complex128 is not a type uopir has, the model "
                                              r"wants f32"):
        load_feeds(model, [("x", np.array([1j, 2, 3]))])


# ---- output files go into existing folders only ---------------------------------------------------------------------
def _tool(main, *argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), err.getvalue()


def _refused(err: str, option: str, path: Path, prog: str = "uop-opt") -> bool:
    return err.strip().splitlines()[-1] == (f"{prog}: error: cannot write '{path}' ({option}): the folder "
                                            f"'{path.parent}' does not exist (create it first)")


@pytest.mark.parametrize("option,name", [("-o", "x.uop"), ("--viz", "x.html"), ("--viz", "x.json"),
                                         ("--reproducer", "r.uop")])
def test_uop_opt_refuses_a_missing_output_folder(tmp_path: Path, option: str, name: str) -> None:
    src = tmp_path / "p.uop"
    src.write_text(PROGRAM)
    target = tmp_path / "missing" / "deeper" / name
    rc, err = _tool(uop_opt, str(src), "-p", "canonicalize", option, str(target))
    assert rc == 1 and _refused(err, option, target), err
    assert not (tmp_path / "missing").exists()


def test_uop_run_refuses_a_missing_output_folder(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "o.npz"
    rc, out, err = run(tmp_path, PROGRAM, "-o", str(target))
    assert rc == 1 and out == ""  # refused before it runs
    assert _refused(err, "-o", target, "uop-run"), err
    assert not target.parent.exists()


def _trace_file(tmp_path: Path) -> Path:
    src = tmp_path / "p.uop"
    src.write_text(PROGRAM)
    rc, err = _tool(uop_opt, str(src), "-p", "canonicalize", f"--viz={tmp_path / 't.json'}")
    assert rc == 0, err
    return tmp_path / "t.json"


def test_uop_viz_refuses_a_missing_output_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _trace_file(tmp_path)
    for target in (tmp_path / "missing" / "p.html", Path("/") / f"uopir-no-such-folder-{uuid.uuid4().hex}" / "p.html"):
        try:
            assert uop_viz.main([str(t), "-o", str(target)]) == 1
            assert _refused(capsys.readouterr().err, "-o", target, "uop-viz")
            assert not target.parent.exists()  # not even at the filesystem root
        finally:
            if target.parent.exists():  # the old behaviour made it: leave no folder behind
                for f in target.parent.iterdir():
                    f.unlink()
                target.parent.rmdir()
    assert uop_viz.main([str(t), "-o", str(tmp_path / "p.html")]) == 0  # an existing folder: written
    assert (tmp_path / "p.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_page_writer_and_the_trace_saver_make_no_folders(tmp_path: Path) -> None:
    data = __import__("json").loads(_trace_file(tmp_path).read_text())
    with pytest.raises(FileNotFoundError):
        write_page(data, tmp_path / "missing" / "p.html")
    with pytest.raises(FileNotFoundError):
        frontend_viz.save(data, tmp_path / "missing" / "t.json", None)
    assert not (tmp_path / "missing").exists()


def test_uopir_viz_naming_a_missing_folder_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert trace.ACTIVE is None
    value = str(tmp_path / "missing" / "run.html")
    monkeypatch.setenv(frontend_viz.VIZ_ENV, value)
    assert frontend_viz.from_env() is None and trace.ACTIVE is None
    assert capsys.readouterr().err == (f"uopir: UOPIR_VIZ: cannot write '{value}': the folder "
                                       f"'{tmp_path / 'missing'}' does not exist (create it first); nothing is "
                                       "recorded\n")
    assert not os.path.exists(tmp_path / "missing")


def test_uop_viz_errors_escape_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace file named with a newline and an escape sequence is reported on one line, its controls shown escaped:
    a name from outside cannot forge further lines or drive the terminal."""
    bad = tmp_path / "x\n\x1b[31mforged.json"
    bad.write_text("not json", encoding="utf-8")
    assert uop_viz.main([str(bad), "-o", str(tmp_path / "p.html")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\\x0a" in err and "uop-viz: error:" in err
