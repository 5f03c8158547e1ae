"""`lower-dialects`: the extension point where a dialect defined outside uopir (a plugin's) is lowered to the core and
tensor dialects, before `tensor-to-kernel`.

A dialect registers its lowering pass once (`register_lowering("mydsl", "mydsl-to-core")`); from then on `default{...}`
lists `lower-dialects` after `canonicalize`, and `tensor-to-kernel` runs it first in any other pipeline (a backend's
own, `-p tensor-to-kernel`), so no backend needs to know the dialect. The pass walks the graph once and runs the
lowering of each registered dialect whose ops are present (its default options, its statistics counted under
`lower-dialects`); with nothing registered it is never listed and costs nothing.
"""
from __future__ import annotations

from uopir.ir.registration import RegistrationError, Sites
from uopir.ir.uop import UOp
from uopir.passes.manager import PassContext
from uopir.passes.registry import get_pass, register_pass

__all__ = ["LOWERINGS", "register_lowering", "lower_dialects"]

LOWERINGS: dict[str, str] = {}  # dialect -> the pass that lowers its ops
_SITES = Sites("lowering of dialect")


def register_lowering(dialect: str, pass_name: str, *, replace: bool = False) -> None:
    """Make pass `pass_name` the lowering of `dialect`'s ops: it joins `default{...}` and every backend's pipeline
    before tensor-to-kernel, and runs when the graph holds an op of `dialect`. A dialect lowered on another line is
    a RegistrationError naming both, unless `replace`."""
    if dialect in ("core", "tensor", "kernel", "device"):
        raise RegistrationError(f"dialect {dialect!r} is uopir's own: tensor-to-kernel lowers it")
    _SITES.claim(dialect, dialect in LOWERINGS, replace)
    LOWERINGS[dialect] = pass_name


def lower_dialects(root: UOp, ctx: PassContext) -> UOp:
    """Run the registered lowering of each dialect present under `root` (each pass at most once)."""
    if not LOWERINGS:
        return root
    present = {u.op.dialect for u in root.toposort()} & LOWERINGS.keys()
    for d in sorted(present):
        info = get_pass(LOWERINGS[d])
        root = info.fn(root, info.options() if info.options is not None else None, ctx)
        ctx.count(f"lowered-{d}")
    return root


@register_pass("lower-dialects", summary="lower the ops of the dialects registered with register_lowering (plugins) "
               "to the core and tensor dialects", consumes=(), produces=("core", "tensor"))
def _lower_dialects_pass(root: UOp, options: None, ctx: PassContext) -> UOp:
    return lower_dialects(root, ctx)
