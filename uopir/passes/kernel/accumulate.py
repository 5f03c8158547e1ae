"""kernel-optimize's partial accumulators (the heuristic's step 3 on a cpu): a long reduction read contiguously
becomes a few vectors of independent partial results, folded once after its loop, instead of one scalar chain
through one register (each add waits for the last: a 4-cycle latency per element)."""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts, pow2_divisor
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.target import Target

__all__ = ["accumulators", "ACC_VECTORS", "ACC_MIN_STEPS", "ACC_SHORT_STEPS"]

ACC_VECTORS = 4  # partial-result vectors of a long contiguous reduction (independent add chains: 4-cycle latency)
ACC_MIN_STEPS = 8  # ... when the reduction runs at least this many iterations of them (the fold after it is scalar)
ACC_SHORT_STEPS = 2  # a shorter one that runs at least this many vectors still gets one vector of partial results


def accumulators(k: KernelFacts, t: Target, budget: int, upcast: set[UOp]) -> list[tuple[UOp, int]]:
    """3. on a cpu: (range, factor) of each reduction kept as partial results: the innermost range r of a
    kernel.reduce (its last operand, and no reduction's other one) along which every load under it reads consecutive
    elements (stride 1: a full sum's or a row sum's input) becomes ACC_VECTORS vectors of the reduced dtype's width
    (`upcast` of a reduce range), when the reduction runs at least ACC_MIN_STEPS iterations of them (else one vector
    when it runs at least ACC_SHORT_STEPS vectors: a 64-wide softmax row): independent
    vector chains instead of one scalar one, folded once after the loop. Only a reduction that depends on none of
    the `upcast` output ranges (softmax's max and sum beside its vector of outputs: its lanes are its own, within
    `budget`; a matmul's sum is in its register tile's lanes already). A float add/mul only on a target that lets
    it reassociate (`reassociate_float_reductions`)."""
    accs: list[tuple[UOp, int]] = []
    for red in k.reduces:
        rs = red.operands.ranges
        r = rs[-1] if rs else None
        n = const_extent(r) if r is not None else None
        if r is None or n is None or r.attrs.kind != "reduce" or any(r in u.operands.ranges[:-1] for u in k.reduces):
            continue
        if k.deps[red] & upcast or any(r is a for a, _ in accs):
            continue
        if red.dtype.scalar.is_float and red.attrs.op in ("add", "mul") and not t.reassociate_float_reductions:
            continue
        vw = t.vector_width(red.dtype)
        reads = [x for x in k.loads if r in k.deps[x] and x in red.operands.value.toposort()]
        if vw < 2 or not reads or any(k.coeff(x, r) != 1 for x in reads):
            continue
        f = pow2_divisor(n, min(vw * ACC_VECTORS, budget, n // ACC_MIN_STEPS))
        if f < vw <= budget and n % vw == 0 and n >= ACC_SHORT_STEPS * vw:
            f = vw  # a short row (a TransformerEncoder's 64 tokens): one vector, its exps vector code, not libm calls
        if f >= vw:
            accs.append((r, f))
    return accs
