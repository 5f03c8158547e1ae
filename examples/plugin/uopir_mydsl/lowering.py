"""`mydsl-to-core`: mydsl's ops as core ops, registered as the dialect's lowering (it runs before tensor-to-kernel in
`default{...}` and every backend's pipeline whenever a mydsl op is present)."""
from __future__ import annotations

from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat
from uopir.passes.lower_dialects import register_lowering
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir_mydsl.dialect import FMA3, RELU6


def _fma3(a: UOp, b: UOp, c: UOp) -> UOp:
    return a * b + c


def _relu6(x: UOp) -> UOp:
    m = x.maximum(0.0)
    return m.lt(6.0).where(m, 6.0)


LOWER = PatternMatcher([
    (UPat(FMA3, src=(UPat.var("a"), UPat.var("b"), UPat.var("c"))), _fma3, "mydsl-fma3-to-mul-add"),
    (UPat(RELU6, src=(UPat.var("x"),)), _relu6, "mydsl-relu6-to-max-where"),
], name="mydsl-to-core")


@register_pass("mydsl-to-core", summary="lower mydsl.fma3 and mydsl.relu6 to core ops", consumes=("mydsl",),
               produces=("core",))
def mydsl_to_core(root: UOp, options: None, ctx: PassContext) -> UOp:
    return graph_rewrite(root, LOWER, stats=ctx.stats)


register_lowering("mydsl", "mydsl-to-core")
