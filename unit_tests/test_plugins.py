"""Plugins: a failing plugin is one located error and exit 1; installed plugins (entry points) load in the tools
unless --no-plugins; $UOPIR_PLUGINS loads one for the Python API, whose backend is then a Tensor device; a node that
a rewrite replaces keeps its line; a dialect's registered lowering runs before tensor-to-kernel.
The sample plugin's own lit suite (examples/plugin/lit_tests, run by `make test`) covers its ops end to end."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from uopir.ir.diagnostics import IRError
from uopir.ir.ops import REGISTRY, def_op
from uopir.ir.parser import parse_ir
from uopir.passes import lower_dialects
from uopir.passes.manager import PassManager
from uopir.passes.registry import PASSES, PassInfo
from uopir.tools import uop_opt

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "plugin"


def _opt(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = uop_opt.main(["--no-plugins", *argv], out, err)
    return rc, out.getvalue(), err.getvalue()


def test_a_plugin_that_raises_is_located(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_plugin.py").write_text("x = 1\nraise RuntimeError('no license')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, out, err = _opt("--load-plugin=broken_plugin", "--list-plugins")
    assert rc == 1 and out == ""
    assert err == (f"uop-opt: error: plugin 'broken_plugin' (--load-plugin): RuntimeError: no license at "
                   f"{tmp_path / 'broken_plugin.py'}:2\n")


def test_a_plugin_registering_a_taken_name_names_both_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "clash_plugin.py").write_text("from uopir.ir.ops import def_op\n\n\ndef register():\n"
                                              "    def_op('core.add', 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, _, err = _opt("--load-plugin=clash_plugin:register", "--list-plugins")
    assert rc == 1
    assert err.startswith("uop-opt: error: plugin 'clash_plugin:register' (--load-plugin): RegistrationError: op "
                          "'core.add' is already registered (at ")
    assert "dialects/core.py:" in err
    assert err.endswith(f"registered again at {tmp_path / 'clash_plugin.py'}:5: pass replace=True to redefine it\n")
    rc, _, err = _opt("--load-plugin=no_such_plugin_mod")
    assert (rc, err) == (1, "uop-opt: error: plugin 'no_such_plugin_mod' (--load-plugin): no module named "
                            "'no_such_plugin_mod' (is it installed, or on PYTHONPATH?)\n")


def test_uop_viz_and_uop_run_take_the_plugin_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from uopir.tools import uop_run, uop_viz

    assert uop_viz.main(["--no-plugins", "--list-plugins"]) == 0
    assert capsys.readouterr().out == "No plugins loaded.\n"
    assert uop_viz.main(["--no-plugins", "--load-plugin=a:b:c"]) == 1
    assert capsys.readouterr().err == ("uop-viz: error: plugin 'a:b:c' (--load-plugin): name a module or "
                                       "module:function\n")
    out, err = io.StringIO(), io.StringIO()
    assert uop_run.main(["--no-plugins", "--list-plugins"], out, err) == 0 and out.getvalue() == "No plugins loaded.\n"


def _installed_sample(tmp_path: Path) -> dict[str, str]:
    """An environment where the sample plugin looks pip-installed: its package and a dist-info with the entry point
    on PYTHONPATH (what `pip install examples/plugin` leaves in site-packages)."""
    info = tmp_path / "uopir_mydsl-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: uopir-mydsl\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[uopir.plugins]\nmydsl = uopir_mydsl:register\n")
    path = os.pathsep.join([str(tmp_path), str(SAMPLE), str(ROOT)])
    return {**os.environ, "PYTHONPATH": path, "UOPIR_C_TIERED": "0"}


def test_installed_plugins_load_in_the_tools_unless_disabled(tmp_path: Path) -> None:
    env = _installed_sample(tmp_path)
    run = [sys.executable, "-m", "uopir.tools.uop_opt"]
    got = subprocess.run([*run, "--list-plugins"], env=env, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[:3] == ["Plugins:", "  mydsl  (installed: uopir-mydsl 0.1.0; uopir_mydsl:register)",
                                           "      ops: mydsl.fma3, mydsl.relu6"]
    assert "      passes: mydsl-to-core\n" in got.stdout and "      backends: mydsl-c\n" in got.stdout
    got = subprocess.run([*run, "--no-plugins", "--list-passes"], env=env, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0 and "mydsl-to-core" not in got.stdout and "lower-dialects" in got.stdout


def test_uopir_plugins_makes_the_sample_backend_a_tensor_device(tmp_path: Path) -> None:
    env = {**_installed_sample(tmp_path), "UOPIR_PLUGINS": "uopir_mydsl:register"}
    code = ("from uopir import Tensor\n"
            "t = (Tensor([1.0, -2.0, 3.0], device='mydsl-c') * 4 + 1).relu()\n"
            "print(t.device, t.numpy().tolist())\n")
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert (got.returncode, got.stdout, got.stderr) == (0, "mydsl-c [5.0, 0.0, 13.0]\n", "")
    bad = subprocess.run([sys.executable, "-m", "uopir.tools.uop_run", "--list-plugins"],
                         env={**env, "UOPIR_PLUGINS": "uopir_mydsl:nope"}, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1  # said once, as the tool's error (no import-time warning before it)
    assert bad.stderr.splitlines() == ["uop-run: error: plugin 'uopir_mydsl:nope' ($UOPIR_PLUGINS): module "
                                       "uopir_mydsl has no function 'nope'"]
    api = subprocess.run([sys.executable, "-c", "import uopir"], env={**env, "UOPIR_PLUGINS": "uopir_mydsl:nope"},
                         capture_output=True, text=True, timeout=60)
    assert api.returncode == 0 and "RuntimeWarning: plugin 'uopir_mydsl:nope'" in api.stderr  # the Python API warns


SRC = """%0 = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>
%1 = core.const 1.0 : f32
%2 = core.mul %0, %1 : tensor<4xf32>
%3 = testplug.twice %2 : tensor<4xf32>
core.sink %3
"""


@pytest.fixture(scope="module")
def twice_op():
    from uopir.dialects.core import elementwise_shape

    op = def_op("testplug.twice", 1, shape=elementwise_shape, summary="2 * x")
    yield op
    REGISTRY.pop("testplug.twice")


def test_a_node_canonicalize_rebuilds_keeps_its_line(twice_op) -> None:
    # canonicalize drops the `* 1` under testplug.twice, so the twice node is rebuilt: its error still points at line 4
    with pytest.raises(IRError) as e:
        PassManager.parse("canonicalize,tensor-to-kernel").run(parse_ir(SRC, "prog.uop"))
    assert str(e.value).splitlines()[0] == "prog.uop:4:1: error: tensor-to-kernel cannot lower testplug.twice yet"


def test_a_registered_lowering_runs_before_tensor_to_kernel(twice_op, monkeypatch: pytest.MonkeyPatch) -> None:
    def lower(root, options, ctx):
        return root.substitute({u: u.src[0] + u.src[0] for u in root.toposort() if u.op is twice_op})

    monkeypatch.setitem(PASSES, "testplug-lower", PassInfo("testplug-lower", lower, "", (), (), None, ()))
    monkeypatch.setitem(lower_dialects.LOWERINGS, "testplug", "testplug-lower")
    pm = PassManager.parse("default{target=cpu}")
    assert pm.text().startswith("canonicalize{regions=true dialects=},lower-dialects,tensor-split-reduce")
    out = PassManager.parse("tensor-to-kernel").run(parse_ir(SRC))  # a pipeline that does not name it
    assert "testplug." not in str([u.op.name for u in out.toposort()])
