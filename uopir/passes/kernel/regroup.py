"""The `regroup` opt: a product under a sum multiplies its per-step scale into the factor laid along the vector.

A projection conv after a squeeze-excite block (EfficientNet, MobileNetV3) reads its input scaled per channel:
`sum_c (x[c, p] * s[c]) * w[o, c]`. Under a channel tile (kernel-optimize's pointwise schedule: 16 output channels
`o` the vector, pixels `p` beside it), x[c, p] is a broadcast input and w[o, c] the weight vector; `x * s` is then
computed per pixel as a scalar and each product splatted into a vector from a register, a shuffle per multiply-add
(672 -> 112 over 14x14, one core: 291 us, the same conv without the scale 151 us). `regroup a` reassociates every
such product as `x * (w * s)`: the factors that vary along output range `a` (the weights) times those that vary
along no output range (the scale, a function of the reduction step only) first, one vector multiply per weight
vector and step, and the broadcast input last, read straight from memory again. It rounds once differently, so the
heuristic asks for it only where the target's `reassociate_float_reductions` allows reordering a float sum.
"""
from __future__ import annotations

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import range_deps

__all__ = ["regroup", "regroup_products"]


def _factors(u: UOp) -> list[UOp]:
    """The factors of a tree of float multiplies, left to right."""
    if u.op is core.MUL and u.dtype.is_float:
        return _factors(u.src[0]) + _factors(u.src[1])
    return [u]


def _product(fs: list[UOp]) -> UOp:
    out = fs[0]
    for f in fs[1:]:
        out = UOp(core.MUL, out.dtype, (out, f))
    return out


def regroup_products(kdef: UOp, r: UOp) -> dict[UOp, UOp]:
    """{the operand of an add-reduction: its product regrouped} for each add-reduction whose operand is a float
    product with factors that vary along output range r (V), factors that vary along no output range (S) and others
    (X), not already `X * (V * S)`; the product becomes X * (V * S), each group in its factors' order."""
    order = list(kdef.toposort())
    deps = range_deps(order)
    out_ranges = {q for u in order if u.op is K.END for q in u.operands.ranges}
    new: dict[UOp, UOp] = {}
    for red in order:
        if red.op is not K.REDUCE or red.attrs.op != "add" or red.operands.value.op is not core.MUL:
            continue
        v = red.operands.value
        fs = _factors(v)
        vs = [f for f in fs if r in deps[f]]
        ss = [f for f in fs if not deps[f] & out_ranges]
        xs = [f for f in fs if f not in vs and f not in ss]
        if vs and ss and xs:
            got = UOp(core.MUL, v.dtype, (_product(xs), UOp(core.MUL, v.dtype, (_product(vs), _product(ss)))))
            if got is not v:
                new[v] = got
    return new


def regroup(kdef: UOp, r: UOp) -> UOp:
    """kdef with its sums' products regrouped along output range r (`regroup_products`); ValueError when none is."""
    if r.attrs.kind not in ("loop", "global"):
        raise ValueError(f"axis {r.attrs.axis} is a {r.attrs.kind} range; regroup names an output (loop) range")
    new = regroup_products(kdef, r)
    if not new:
        raise ValueError(f"no sum of a product has a factor along axis {r.attrs.axis} and a scale along no output "
                         f"range to multiply into it")
    return kdef.substitute(new)
