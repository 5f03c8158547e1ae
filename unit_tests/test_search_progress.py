"""Progress output (issue 27 item 3), in real processes: a tqdm bar on a terminal (a pseudo-terminal here), complete
lines without `\\r` on a pipe, nothing with UOPIR_PROGRESS=0; the training example and the ONNX conformance runner
write no `\\r` into a pipe."""
from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from uopir.search.progress import Progress, progress

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""\
    from uopir.search.progress import Progress
    with Progress(5, "search", interval=0.0) as p:
        for i in range(5):
            p.set_postfix(best=1.5e-3 / (i + 1), tried=i + 1)
            p.update()
    print("done")
    """)


def _env(**kw: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "UOPIR_PROGRESS"}
    return dict(env, PYTHONPATH=str(ROOT), **kw)


def test_a_pipe_gets_plain_lines_without_carriage_returns() -> None:
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=_env(), timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "done\n"  # progress goes to stderr
    assert "\r" not in res.stderr
    lines = res.stderr.splitlines()
    assert lines[0].startswith("search: 1/5 (20%) best=0.0015 tried=1 [")
    assert lines[-1].startswith("search: 5/5 (100%) best=0.0003 tried=5 [")


def test_a_terminal_gets_a_tqdm_bar() -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: stderr is the pseudo-terminal
        os.execve(sys.executable, [sys.executable, "-c", SCRIPT], _env())  # a bare pty: 0 x 0
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    text = out.decode()
    assert "\r" in text and "search: 100%" in text and "5/5" in text and "best=0.0003" in text


def test_progress_off_and_a_bad_setting() -> None:
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=_env(UOPIR_PROGRESS="0"), timeout=120)
    assert (res.returncode, res.stderr) == (0, "")
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=_env(UOPIR_PROGRESS="sometimes"), timeout=120)
    assert res.returncode != 0 and "$UOPIR_PROGRESS must be 0 (no progress), 1" in res.stderr


def test_short_work_on_a_pipe_writes_only_its_last_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UOPIR_PROGRESS", raising=False)
    s = io.StringIO()
    with progress(100, "cases", stream=s) as p:
        for _ in range(100):
            p.update()
    assert s.getvalue().count("\n") == 1 and s.getvalue().startswith("cases: 100/100 (100%) [")
    s = io.StringIO()
    with progress(None, "steps", stream=s, leave=False) as p:
        p.update(3)
    assert s.getvalue() == ""  # leave=False: no trace
    s = io.StringIO()
    with Progress(None, "steps", stream=s, interval=0.0) as p:
        p.update(3)
    assert s.getvalue().startswith("steps: 3 [")  # an unknown total: a count without a percentage
    with progress(3, "quiet", stream=s, disable=True) as p:
        p.update(3)
    assert s.getvalue().count("\n") == 1  # the last line is not written again when nothing changed since
    s = io.StringIO()
    with Progress(4, "kernels", stream=s, interval=0.0) as p:
        p.update(4)
        p.set_postfix(best=2.0)  # a change after the last line: the last line shows it
    assert s.getvalue().splitlines()[-1].startswith("kernels: 4/4 (100%) best=2 [") and s.getvalue().count("\n") == 2


def test_the_training_example_writes_no_carriage_return_into_a_pipe(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    script = textwrap.dedent(f"""\
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("train_digits", {str(ROOT / "examples" / "train_digits.py")!r})
        ex = importlib.util.module_from_spec(spec); spec.loader.exec_module(ex)
        import uopir.search.progress as pr
        pr.LINE_INTERVAL_S = 0.0  # a line for every step
        x, y, xt, yt = ex.load(0)
        ex.train("mlp", epochs=1, batch=32, data=(x[:96], y[:96], xt[:32], yt[:32]))
        """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         env=_env(UOPIR_CACHE_DIR=str(tmp_path)))
    assert res.returncode == 0, res.stderr
    assert "\r" not in res.stderr and "\r" not in res.stdout
    assert "mlp epoch 1: 3/3 (100%) loss=" in res.stderr  # the steps, as lines
    assert "mlp epoch  1  loss" in res.stdout  # the epoch's summary


def test_the_conformance_runner_counts_cases_on_a_pipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    onnx = pytest.importorskip("onnx")
    import json

    import numpy as np
    from onnx import helper, numpy_helper

    from uopir.onnx import conformance

    index = {}
    for op in ("Abs", "Neg", "Relu"):
        name = f"test_{op.lower()}"
        graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], name,
                                  [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
                                  [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        d = tmp_path / name / "test_data_set_0"
        d.mkdir(parents=True)
        (tmp_path / name / "model.onnx").write_bytes(model.SerializeToString())
        x = np.array([-1.0, 0.0, 2.0], np.float32)
        y = {"Abs": np.abs(x), "Neg": -x, "Relu": np.maximum(x, 0)}[op]
        (d / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
        (d / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
        index[name] = {"op": op, "expanded": False, "n_in": 1, "n_out": 1, "rtol": 1e-3, "atol": 1e-7,
                       "non_tensor": []}
    (tmp_path / conformance.INDEX).write_text(json.dumps(index))
    results = conformance.run_all(tmp_path, "python", show_progress=True)
    assert [r.status for r in results] == ["passed"] * 3, results
    err = capsys.readouterr().err
    assert "\r" not in err
    assert err.splitlines()[-1].startswith("onnx node tests: 3/3 (100%) passed=3 failed=0 skipped=0 [")


@pytest.mark.parametrize("program", [["-m", "uopir.onnx.conformance"], [str(ROOT / "examples" / "train_digits.py")]])
def test_a_bad_progress_setting_is_a_usage_error_before_any_work(program: list[str]) -> None:
    res = subprocess.run([sys.executable, *program], capture_output=True, text=True, timeout=120,
                         env=_env(UOPIR_PROGRESS="sometimes"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "error: $UOPIR_PROGRESS must be 0 (no progress), 1" in res.stderr
