"""Passes that exist to test the pass manager and uop-opt (as mlir-opt has its test-* passes).

Not loaded for users: `load_passes` imports this module only when test passes are requested
($UOPIR_TEST_PASSES=1, as lit and pytest set it, or `uop-opt --load-test-passes`).

They exercise the paths that real passes should never take: a crash (reproducer), invalid output (verification
after each pass), reported errors and warnings (--verify-diagnostics), and every option type (pipeline parsing).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from uopir.dialects import device
from uopir.ir.dtype import dtypes
from uopir.ir.ops import get_op
from uopir.ir.uop import UOp
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass, register_pipeline


@dataclass
class CrashOptions:
    message: str = field(default="boom", metadata={"help": "the text of the RuntimeError raised"})


@register_pass("test-crash", summary="raise a RuntimeError (tests crash reproducers)", options=CrashOptions)
def test_crash(root: UOp, options: CrashOptions, ctx: PassContext) -> UOp:
    raise RuntimeError(options.message)


@register_pass("test-invalid-ir", summary="return IR that does not verify (tests verification after a pass)")
def test_invalid_ir(root: UOp, options: None, ctx: PassContext) -> UOp:
    bad = UOp.const(dtypes.int32, 1).alu("core.add", UOp.const(dtypes.float32, 1.0))  # mixed dtypes
    return UOp.sink(*root.src, bad) if root.op.name == "core.sink" else UOp.sink(root, bad)


@dataclass
class DiagOptions:
    severity: Literal["error", "warning", "note", "remark"] = "warning"
    op: str = field(default="core.const", metadata={"help": "the op whose every node gets a diagnostic"})


@register_pass("test-diagnostics", summary="emit a diagnostic at every node of one op (tests --verify-diagnostics)",
               options=DiagOptions)
def test_diagnostics(root: UOp, options: DiagOptions, ctx: PassContext) -> UOp:
    for u in root.toposort():
        if u.op.name == options.op:
            ctx.emit(u, f"found {options.op}", options.severity)
    return root


@dataclass
class OptionsOptions:
    i: int = 0
    f: float = 1.5
    b: bool = False
    s: str = "text"
    ints: list[int] = field(default_factory=lambda: [1, 2])
    mode: Literal["fast", "slow"] = "fast"
    maybe: int | None = None


@register_pass("test-options", summary="take one option of every type and do nothing (tests pipeline parsing)",
               options=OptionsOptions)
def test_options(root: UOp, options: OptionsOptions, ctx: PassContext) -> UOp:
    ctx.count("runs")
    return root


@register_pass("test-undeclared-dialect", summary="add a kernel op while declaring core only (tests the check of "
               "what a pass produces)", consumes=("core",), produces=("core",))
def test_undeclared_dialect(root: UOp, options: None, ctx: PassContext) -> UOp:
    var = UOp(get_op("kernel.var"), dtypes.index, (), ("n", 0, 8))
    return UOp.sink(*root.src, var) if root.op.name == "core.sink" else UOp.sink(root, var)


@dataclass
class EmitOptions:
    lang: str = field(default="test", metadata={"help": "the lang attribute of the device.source ops made"})


@register_pass("test-emit", summary="replace each device.program (or the whole graph) by a device.source holding "
               "its .uop text (tests code emission and uop-opt --emit)", produces=("device", "core"),
               options=EmitOptions)
def test_emit(root: UOp, options: EmitOptions, ctx: PassContext) -> UOp:
    from uopir.ir.printer import print_ir

    programs = [u for u in root.toposort() if u.op is device.PROGRAM] or [root]
    sources = []
    for p in programs:
        name = p.arg if p.op is device.PROGRAM else "main"
        sources.append(UOp(device.SOURCE, dtypes.void, (), (options.lang, name, print_ir(p))))
        ctx.count("sources-emitted")
    return UOp.sink(*sources)


# `uop-opt --emit=LANG` appends the pass or pipeline `emit-LANG`: this makes `--emit=test` reach test-emit.
register_pipeline("emit-test", None, lambda _: "test-emit", summary="test-emit (what uop-opt --emit=test runs)")
