"""Pass instrumentation objects, the registry's loading rules (test passes on request, dialects not the package
top), the kernel anchor owned by the kernel passes, and region walking in uopir.ir.regions."""
from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from uopir.dialects import kernel, tensor
from uopir.ir.dtype import dtypes
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.regions import map_regions, ops_by_dialect, region_indices, region_name, regions_of
from uopir.ir.uop import UOp
from uopir.passes.errors import PassCrash, PassFailure, PipelineError
from uopir.passes.instruments import (
    CrashEvent,
    IRPrinter,
    PassEvent,
    PassInstrumentation,
    Reproducer,
    RunReport,
    Statistics,
    Timing,
    Verifier,
    standard_instruments,
    statistics_report,
)
from uopir.passes.manager import PassManager
from uopir.passes.registry import ANCHORS, PASSES, register_pass

SRC = """%0 = core.const 2 : i32
%1 = core.const 3 : i32
%2 = core.add %0, %1 : i32
core.sink %2
"""


class Recorder(PassInstrumentation):
    """Writes down every hook call, with the IR it saw printed."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def run_before_pipeline(self, root: UOp, report: RunReport) -> None:
        self.calls.append(("before-pipeline", print_ir(root)))

    def run_before_pass(self, event: PassEvent, ir: UOp) -> None:
        self.calls.append(("before", event.label))

    def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
        self.calls.append(("after", event.label, after is before))

    def run_after_pass_failed(self, event: PassEvent, ir: UOp) -> None:
        self.calls.append(("failed", event.label, print_ir(ir)))

    def run_after_crash(self, crash: CrashEvent) -> str | None:
        self.calls.append(("crash", crash.pass_name, crash.pipeline, print_ir(crash.ir)))
        return "/recorded/path.uop"

    def run_after_pipeline(self, report: RunReport) -> None:
        self.calls.append(("after-pipeline", [r.label for r in report.records]))


def test_hooks_run_in_order_around_every_pass():
    rec = Recorder()
    out = PassManager.parse("canonicalize,dce").run(parse_ir(SRC), instruments=[rec])
    assert print_ir(out) == "%0 = core.const 5 : i32\ncore.sink %0\n"
    assert rec.calls == [("before-pipeline", SRC), ("before", "canonicalize"), ("after", "canonicalize", False),
                         ("before", "dce"), ("after", "dce", True), ("after-pipeline", ["canonicalize", "dce"])]


def test_verifier_failure_reaches_failed_hook_with_the_invalid_output():
    rec = Recorder()
    with pytest.raises(PassFailure) as ei:
        PassManager.parse("test-invalid-ir,dce").run(parse_ir(SRC), instruments=[Verifier(), rec])
    assert ei.value.pass_name == "test-invalid-ir"
    kinds = [c[0] for c in rec.calls]
    # the Verifier raised in run_after_pass: later instruments never see the invalid output as a success
    assert kinds == ["before-pipeline", "before", "failed", "after-pipeline"]
    assert "core.add" in rec.calls[2][2] and "f32" in rec.calls[2][2]  # the invalid output, not the input
    # without the Verifier in the list the same pipeline runs through
    rec2 = Recorder()
    PassManager.parse("test-invalid-ir").run(parse_ir(SRC), instruments=[rec2])
    assert [c[0] for c in rec2.calls] == ["before-pipeline", "before", "after", "after-pipeline"]


def test_crash_hook_gives_the_reproducer_path_and_the_rest_of_the_pipeline():
    rec = Recorder()
    with pytest.raises(PassCrash) as ei:
        PassManager.parse("canonicalize,test-crash{message=x},dce").run(parse_ir(SRC), instruments=[rec])
    assert ei.value.reproducer == "/recorded/path.uop"
    crash = [c for c in rec.calls if c[0] == "crash"]
    assert crash == [("crash", "test-crash", "test-crash{message=x},dce{results=true}",
                      "%0 = core.const 5 : i32\ncore.sink %0\n")]
    assert ("failed", "test-crash", "%0 = core.const 5 : i32\ncore.sink %0\n") in rec.calls
    assert rec.calls[-1][0] == "after-pipeline"


def test_no_instruments_means_no_verification_and_no_reproducer():
    with pytest.raises(PassCrash) as ei:
        PassManager.parse("test-crash").run(parse_ir(SRC), instruments=[])
    assert ei.value.reproducer is None
    assert PassManager.parse("test-invalid-ir").run(parse_ir(SRC), instruments=[]) is not None


def test_instruments_and_keywords_are_exclusive():
    with pytest.raises(TypeError, match="either instruments"):
        PassManager.parse("dce").run(parse_ir(SRC), instruments=[], timing=True)
    with pytest.raises(TypeError):
        PassManager.parse("dce").run(parse_ir(SRC), no_such_keyword=True)


def test_keywords_build_the_standard_list():
    kinds = [type(i) for i in standard_instruments(print_ir_after_all=True, timing=True, pass_statistics=True)]
    assert kinds == [Verifier, IRPrinter, Timing, Statistics, Reproducer]
    assert [type(i) for i in standard_instruments(verify=False, reproducer=False)] == []
    with pytest.raises(PipelineError, match="unknown pass 'nope'"):
        standard_instruments(print_ir_before="dce,nope")


def test_ir_printer_object_prints_only_what_it_is_asked():
    buf = io.StringIO()
    PassManager.parse("canonicalize,dce").run(parse_ir(SRC), instruments=[IRPrinter(before=["dce"], out=buf)])
    assert buf.getvalue() == ("// -----// IR Dump Before dce //----- //\n"
                              "%0 = core.const 5 : i32\ncore.sink %0\n\n")
    buf = io.StringIO()
    PassManager.parse("canonicalize,dce").run(parse_ir(SRC), instruments=[IRPrinter(after_change=True, out=buf,
                                                                                    generic=True)])
    assert buf.getvalue() == ('// -----// IR Dump After canonicalize //----- //\n'
                              '%0 = "core.const"() {value = 5} : () -> i32\n"core.sink"(%0) : (i32) -> void\n\n')


def test_timing_and_statistics_objects_write_their_reports():
    buf = io.StringIO()
    pm = PassManager.parse("canonicalize,dce")
    pm.run(parse_ir(SRC), instruments=[Timing(buf), Statistics(buf)])
    text = buf.getvalue()
    assert text.index("Execution time report") < text.index("Pass statistics report")
    assert re.search(r"\(S\)    1 fold-constant \(uopir/dialects/core\.py:\d+\) - times the pattern fired", text)
    assert "canonicalize" in text.split("Execution time report")[1].split("Pass statistics")[0]
    # Statistics counts nodes new in a plain-code pass's output (dce here changes nothing)
    assert pm.report.records[1].nodes_changed == 0


def test_custom_instrument_is_a_small_class():
    class CountPasses(PassInstrumentation):
        def __init__(self) -> None:
            self.n = 0

        def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
            self.n += 1

    c = CountPasses()
    PassManager.parse("canonicalize,dce,canonicalize").run(parse_ir(SRC), instruments=[c])
    assert c.n == 3


def test_statistics_show_pattern_source_lines_when_the_rewriter_records_them():
    # Assumes RewriteStats gains `sources: dict[str, str]` (pattern name -> "file:line"); shown after the name.
    @register_pass("test-sourced-stats", summary="fire a pattern with a recorded source line")
    def _sourced(root: UOp, options: None, ctx) -> UOp:
        ctx.stats.fired["fold-thing"] += 2
        ctx.stats.fired["no-source"] += 1
        ctx.stats.sources = {**getattr(ctx.stats, "sources", {}), "fold-thing": "uopir/dialects/core.py:42"}
        return root

    try:
        pm = PassManager.parse("test-sourced-stats")
        pm.run(parse_ir(SRC), verify=False)
        text = statistics_report(pm.report)
        assert "(S)    2 fold-thing (uopir/dialects/core.py:42) - times the pattern fired" in text
        assert "(S)    1 no-source - times the pattern fired" in text
    finally:
        PASSES.pop("test-sourced-stats", None)


def test_reproducer_object_writes_the_file(tmp_path):
    path = tmp_path / "r.uop"
    with pytest.raises(PassCrash) as ei:
        PassManager.parse("test-crash{message=zz}").run(parse_ir(SRC), instruments=[Reproducer(path, "--no-verify")])
    assert ei.value.reproducer == str(path)
    text = path.read_text()
    assert "// configuration: '--pass-pipeline=test-crash{message=zz}' --no-verify\n" in text


# ---- the kernel anchor and regions -----------------------------------------------------------------------------------
def _kernel_call() -> tuple[UOp, UOp]:
    f32, idx = dtypes.float32, dtypes.index
    p0 = UOp(kernel.PARAM, f32.ptr(), (), 0)
    r = UOp(kernel.RANGE, idx, (UOp.const(idx, 8),), (0, "global"))
    st_ = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, f32.ptr(), (p0, r + 0)), UOp.const(f32, 1.0)))
    kdef = UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st_, r)),), "k")
    call = UOp(tensor.CALL, dtypes.void, (UOp(tensor.BUFFER, f32, (), (0, "python", (8,))),), (kdef, "k"))
    return call, kdef


def test_kernel_anchor_selects_by_the_op_definition():
    call, kdef = _kernel_call()
    select = ANCHORS["kernel"].select
    assert select(kdef) and not select(UOp.sink(UOp.const(dtypes.int32, 1)))
    assert select.__module__ == "uopir.passes.kernel.anchors"


def test_region_helpers():
    call, kdef = _kernel_call()
    assert region_indices(call) == [0] and list(regions_of(call)) == [kdef] and region_name(kdef) == "k"
    assert region_indices(UOp.const(dtypes.int32, 1)) == [] and region_name(UOp.const(dtypes.int32, 1)) is None
    root = UOp.sink(call)
    assert set(ops_by_dialect(root)) == {"core", "tensor", "kernel"}
    seen: list[UOp] = []
    out = map_regions(root, lambda r: r.op is kernel.DEF, lambda r: seen.append(r) or r)
    assert out is root and seen == [kdef]


# ---- loading ---------------------------------------------------------------------------------------------------------
_PROBE = """
import sys
from pathlib import Path
import uopir.passes.registry as r
r.load_passes()
print(sorted(n for n in r.PASSES if n.startswith("test-")))
print("uopir.passes.testing" in sys.modules, "uopir.frontend" in sys.modules, "uopir.backends" in sys.modules,
      "uopir.dialects.kernel" in sys.modules, "kernel" in r.ANCHORS)
"""


def _probe(env_value: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "UOPIR_TEST_PASSES"}
    if env_value is not None:
        env["UOPIR_TEST_PASSES"] = env_value
    res = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_loading_passes_imports_dialects_not_the_frontend_and_hides_test_passes():
    names, flags = _probe(None)
    assert names == "[]"
    # no test module, no frontend (the old `import uopir` side effects), no backend (their emit-<lang> passes register
    # when uopir.backends is imported, as uop-opt does); the dialects and anchor are there
    assert flags == "False False False True True"
    names, flags = _probe("0")
    assert names == "[]"


def test_test_passes_load_on_request():
    names, flags = _probe("1")
    assert "'test-crash'" in names and "'test-emit'" in names
    assert flags.startswith("True False")


def test_uop_opt_list_passes_hides_test_passes_without_the_flag():
    env = {k: v for k, v in os.environ.items() if k != "UOPIR_TEST_PASSES"}
    cmd = [sys.executable, "-m", "uopir.tools.uop_opt", "--list-passes"]
    plain = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    flagged = subprocess.run([*cmd, "--load-test-passes"], capture_output=True, text=True, env=env, timeout=120)
    assert plain.returncode == 0 and flagged.returncode == 0
    assert "canonicalize" in plain.stdout and "test-" not in plain.stdout
    assert "  test-crash  -  " in flagged.stdout and "  emit-test  -  " in flagged.stdout


def test_each_pass_manager_name_has_one_home():
    # one import path per name (issue 25): the pass manager's modules export only what they define, no facade
    from uopir.passes import errors, instruments, manager, options, pipeline, registry

    for mod in (manager, registry, errors, instruments, options, pipeline):
        tree = ast.parse(Path(mod.__file__).read_text())
        imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").startswith("uopir") for a in n.names}
        assert sorted(imported & set(mod.__all__)) == [], f"{mod.__name__} re-exports names defined elsewhere"
    assert manager.__all__ == ["PassManager", "PassContext"]
