"""Lazy registration: a pipeline imports the modules of the passes it names and no others, and the name -> module
table (`uopir.passes.registry.LAZY`) agrees with what the modules register, so every pass, pipeline, anchor and
backend is still found by name and `uop-opt --list-passes` still lists them all.

The checks that need a fresh interpreter (what a first import or a first realize loads) run in a subprocess.
"""
from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap

import pytest

import uopir.backends  # noqa: F401 - registers the backends' emit passes (by name)
from uopir.backends.registry import BACKENDS, get_backend
from uopir.passes.errors import PipelineError
from uopir.passes.manager import PassManager
from uopir.passes.registry import (
    ANCHORS,
    LAZY,
    PASSES,
    PIPELINES,
    TEST_PASS_MODULES,
    load_passes,
    register_lazy,
    resolve,
)
from uopir.tools.uop_opt import main as uop_opt_main


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _registering_module(name: str) -> str:
    if name in PASSES:
        return PASSES[name].fn.__module__
    if name in PIPELINES:
        return PIPELINES[name].expand.__module__
    return ANCHORS[name].select.__module__


def _import_every_pass_module() -> None:
    """Every module under uopir.passes (the test-* module too): what a new pass file registers is then seen here even
    when the table misses it (load_passes imports the table's modules only)."""
    import uopir.passes as pkg

    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)


def test_table_names_the_module_that_registers_each_name():
    load_passes()
    _import_every_pass_module()
    every = {*PASSES, *PIPELINES, *ANCHORS} - {"any"}  # `any` is the registry's own anchor
    user = {n for n in every if _registering_module(n) not in TEST_PASS_MODULES}
    assert user - set(LAZY) == set(), "registered names missing from LAZY (register_lazy them beside their module)"
    assert set(LAZY) - user == set(), "LAZY names that no module registers"
    wrong = {n: (LAZY[n], _registering_module(n)) for n in user if LAZY[n] != _registering_module(n)}
    assert wrong == {}
    # the emit passes of every language are among them, registered by the backends package
    assert {"emit-c", "emit-llvm", "emit-opencl", "emit-cuda", "default", "kernel"} <= user


def test_each_name_resolves_alone_in_a_fresh_process():
    # every name of the table is found through its module alone: none needs the walk over every pass module
    got = _fresh("""
        import json
        import uopir.backends
        from uopir.passes import registry
        found = {n: registry.resolve(n) for n in sorted(registry.LAZY)}
        print(json.dumps({"found": found, "full_load": registry._loaded}))
    """)
    assert all(got["found"].values()), got["found"]
    assert got["full_load"] is False  # no name needed the walk over every pass module


def test_realize_on_c_loads_only_its_pipeline():
    got = _fresh("""
        import json, sys
        import numpy as np
        from uopir import Tensor
        from uopir.backends import get_backend
        if not get_backend("c").available:  # (available() would probe every backend)
            print(json.dumps({"skip": True})); raise SystemExit
        a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="c")
        out = (a + 1).sum(axis=1).numpy().tolist()
        from uopir.passes import registry
        mods = sorted(m for m in sys.modules if m.startswith("uopir"))
        print(json.dumps({"skip": False, "out": out, "mods": mods, "full_load": registry._loaded}))
    """)
    if got["skip"]:
        return
    assert got["out"] == [6.0, 15.0]
    mods = set(got["mods"])
    # no other backend, no emit pass, no test pass, no parser or uop-opt; and no walk over every pass module
    for unwanted in ("uopir.backends.llvm", "uopir.backends.llvm.renderer", "uopir.backends.gpu.emit",
                     "uopir.backends.c.emit", "uopir.backends.opencl", "uopir.backends.cuda",
                     "uopir.passes.testing", "uopir.tools.uop_opt"):
        assert unwanted not in mods, unwanted
    assert got["full_load"] is False
    assert "uopir.passes.device.linearize" in mods  # while the passes of its pipeline did load


def test_list_passes_lists_every_registered_name(capsys):
    load_passes()
    assert uop_opt_main(["--list-passes"]) == 0
    text = capsys.readouterr().out
    for name in LAZY:
        assert f"  {name}" in text, name
    assert "could not be loaded" not in text


def test_unknown_name_still_gets_the_closest_spelling():
    got = _fresh("""
        import json
        import uopir.backends
        from uopir.passes.manager import PassManager
        from uopir.passes.errors import PipelineError
        try:
            PassManager.parse("canonicalize,emit-cc")
            msg = ""
        except PipelineError as e:
            msg = str(e)
        print(json.dumps({"msg": msg}))
    """)
    assert "unknown pass 'emit-cc'" in got["msg"] and "emit-c" in got["msg"]


def test_every_backend_is_found_by_name():
    for name in BACKENDS:
        assert get_backend(name).device == name


# ---- a broken pass module is a clear error naming it, never a missing pass -------------------------------------------
BROKEN = {
    # module file text -> what the error says about it
    "import uopir_no_such_dependency\n": "ModuleNotFoundError: No module named 'uopir_no_such_dependency'",
    "raise RuntimeError('half-written pass')\n": "RuntimeError: half-written pass",
    "def f(:\n": "SyntaxError",
}


@pytest.fixture
def broken_pass_module(tmp_path, monkeypatch):
    """A module `uopir_test_broken_passes` on sys.path, named by LAZY for the pass `test-broken` (both undone after)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("uopir.passes.registry.LAZY", dict(LAZY))

    def write(text: str | None) -> str:
        if text is not None:
            (tmp_path / "uopir_test_broken_passes.py").write_text(text)
        importlib.invalidate_caches()
        register_lazy("uopir_test_broken_passes", "test-broken")
        return "uopir_test_broken_passes"
    return write


@pytest.mark.parametrize("text", list(BROKEN), ids=["missing-dependency", "raises", "syntax-error"])
def test_a_pass_module_that_fails_to_import_is_an_error_naming_it(broken_pass_module, text):
    mod = broken_pass_module(text)
    for run in (lambda: PassManager.parse("canonicalize,test-broken"), lambda: resolve("test-broken"),
                lambda: load_passes()):
        with pytest.raises(PipelineError, match=rf"pass module {mod} \(which registers test-broken\) could not be "
                                                rf"imported: {BROKEN[text]}"):
            run()


def test_a_pass_module_that_does_not_exist_is_an_error_naming_it(broken_pass_module):
    mod = broken_pass_module(None)  # LAZY names a module that is not there
    with pytest.raises(PipelineError, match=rf"pass module {mod} \(which registers test-broken\) could not be "
                                            rf"imported: ModuleNotFoundError: No module named '{mod}'"):
        PassManager.parse("test-broken")


def test_uop_opt_reports_a_broken_pass_module_without_a_traceback(broken_pass_module, capsys):
    mod = broken_pass_module("raise RuntimeError('half-written pass')\n")
    assert uop_opt_main(["--list-passes"]) == 1
    err = capsys.readouterr().err
    assert f"pass module {mod} (which registers test-broken) could not be imported: RuntimeError: half-written pass" \
        in err and "Traceback" not in err
