"""The mydsl dialect: `mydsl.fma3` (a * b + c) and `mydsl.relu6` (min(max(x, 0), 6)), elementwise, with their
verifiers, a fold, and a custom pretty form for fma3 (`mydsl.fma3 %a * %b + %c : type`)."""
from __future__ import annotations

from collections.abc import Iterator

from uopir.dialects.core import elementwise_shape
from uopir.ir.folds import declare_folds
from uopir.ir.ops import Trait, def_op
from uopir.ir.syntax import register_syntax
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat

_EW = Trait.PURE | Trait.ELEMENTWISE


def _same_float(u: UOp) -> Iterator[str]:
    """Every operand has the result's dtype, a float one."""
    if not u.dtype.is_float:
        yield f"{u.op.name} needs a float type, got {u.dtype}"
    for i, s in enumerate(u.src):
        if s.dtype.scalar is not u.dtype.scalar:
            yield f"operand {i} is {s.dtype}, the result {u.dtype}"


FMA3 = def_op("mydsl.fma3", 3, traits=_EW, verify=_same_float, shape=elementwise_shape, operands=("a", "b", "c"),
              summary="a * b + c, rounded after the product and after the sum (not fused)")
RELU6 = def_op("mydsl.relu6", 1, traits=_EW, verify=_same_float, shape=elementwise_shape, operands=("x",),
               summary="min(max(x, 0), 6)")

# relu6 of a relu6 is the inner one: the fold sits beside its op, `canonicalize` gathers it
declare_folds((UPat(RELU6, src=(UPat(RELU6, name="inner"),)), lambda inner: inner, "mydsl-relu6-twice"))

# the pretty form of fma3 says what it computes: `mydsl.fma3 %0 * %1 + %2 : tensor<4xf32>`
register_syntax(FMA3, "$a * $b + $c")
