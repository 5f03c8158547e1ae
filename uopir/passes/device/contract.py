"""device-contract{target=…}: fuse the multiply-adds of an f32 sum into `device.fma` (one rounding), where the target
has the instruction (`Target.contract_multiply_add`: the host cpu backends c and llvm on a cpu with FMA).

The semantics round `a * b` and then `+ c`; C is compiled with -ffp-contract=off and LLVM IR carries no `contract`
flag, so neither compiler fuses them on its own, and a conv's or matvec's inner loop pays a multiply and an add per
product. This pass fuses only the updates of an f32 add accumulator: in `device.accstore acc, v`, each add of the
chain from `acc` to `v` whose other operand is a `core.mul` becomes `device.fma mul.a, mul.b, chain` (an unrolled
update `acc + p0 + p1` fuses both). That changes one rounding per term of a float sum, which is what the `accumulate`
tolerance class of a reassociated sum (`reassociate_float_reductions`, which such a target has) covers, and removes
a rounding rather than adding one. Elementwise `a * b + c` outside a sum stays unfused: such a program's class is
`exact`, and it must stay bit for bit the semantics'. The fused op is explicit in the IR, so the device-level
interpreter (semantics.fma_f32, correctly rounded) computes what the compiled code does, bit for bit.

Only where it pays: an fma puts its whole latency (4 cycles on current x86) on the accumulator's chain, where the
unfused add has its own (2-3; the multiply is off the chain). A kernel with few independent sums (a layernorm row's
4 accumulators of squares: 30% slower fused, measured) is bound by that latency; one with many (a conv's or
matmul's register tile) by throughput, which fusing halves. So a kernel is fused only when at least `min-chains`
accumulators (default MIN_CHAINS: latency x 2 FMA ports) take a multiply-add.

A sum unrolled whole (a depthwise conv's window tile: every tap unrolled, no loop) has no accumulator: kernel-to-device
folds its lanes from the identity, `0 + p0 + p1 + ...`. Each add of such a chain whose term is a `core.mul` fuses the
same way (its root, an f32 zero constant, marks it: `a * b + 0.0` rounds as `a * b`, so fusing the first link is
exact), when at least `min-folds` such chains (default MIN_FOLDS) are in the kernel: each chain is then one fma per
term instead of a multiply and an add, and the chains beside each other keep both FMA ports busy. A 7x7 plane's 5x5
depthwise conv (7 output rows, 7 chains of 25 taps; 1152 channels, one core, llvm) 110 -> 87 us; one or two chains
(rows of 14 or 28, a chain each) measured slower fused (672 x 14x14 5x5 147 -> 182 us: the fma's latency on the one
chain).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.ir.dtype import dtypes
from uopir.ir.pattern_compiler import PatternMatcher
from uopir.ir.rewrite import graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat
from uopir.passes.device.common import in_kernels, resolve_target
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import check_target_option

__all__ = ["ContractOptions", "device_contract", "CONTRACT", "FOLD", "fuse_chain", "MIN_CHAINS", "MIN_FOLDS",
           "contract_kernel"]

MIN_CHAINS = 8  # independent fused sums a kernel needs to be throughput-bound: fma latency 4 x 2 ports
MIN_FOLDS = 7  # unrolled sums (chains from a zero) a kernel needs to fuse them: measured at 7, slower at 1-2


def _reads_acc(v: UOp, acc: UOp) -> bool:
    """v is the accumulator or an add chain that starts at it (the running sum of this update)."""
    return v is acc or (v.op is C.ADD and any(_reads_acc(s, acc) for s in v.src))


def fuse_chain(v: UOp, acc: UOp) -> UOp:
    """v (an accumulator update's value) with each `chain + a * b` on the way from `acc` fused into an fma."""
    if v is acc or v.op is not C.ADD:
        return v
    a, b = v.src
    chain, term = (a, b) if _reads_acc(a, acc) else (b, a) if _reads_acc(b, acc) else (None, None)
    if chain is None or term is None:
        return v
    inner = fuse_chain(chain, acc)
    if term.op is C.MUL:
        return UOp(D.FMA, v.dtype, (term.src[0], term.src[1], inner))
    return v if inner is chain else UOp(C.ADD, v.dtype, (inner, term) if chain is a else (term, inner))


def _accstore(u: UOp) -> UOp | None:
    acc, v = u.src
    if acc.dtype.scalar is not dtypes.float32 or v.op is not C.ADD:
        return None
    fused = fuse_chain(v, acc)
    return None if fused is v else u.replace(src=(acc, fused))


CONTRACT = PatternMatcher([(UPat(D.ACCSTORE, name="u"), _accstore, "sum-multiply-add-to-fma")])


def _is_zero(u: UOp) -> bool:
    """u is an f32 constant whose every lane is zero (the identity an unrolled sum's fold starts from)."""
    return u.op is C.CONST and u.dtype.scalar is dtypes.float32 and all(
        v == 0 for v in (u.arg if isinstance(u.arg, tuple) else (u.arg,)))


def _zero_rooted(u: UOp) -> bool:
    """u is an f32 zero or an fma chain that starts at one (an unrolled sum's fold, fused so far)."""
    while u.op is D.FMA:
        u = u.src[2]
    return _is_zero(u)


def _fold_link(u: UOp) -> UOp | None:
    """`chain + a * b` of an unrolled sum's fold (chain from a zero) as `device.fma a, b, chain`."""
    if u.dtype.scalar is not dtypes.float32:
        return None
    a, b = u.src
    for chain, term in ((a, b), (b, a)):
        if term.op is C.MUL and _zero_rooted(chain):
            return UOp(D.FMA, u.dtype, (term.src[0], term.src[1], chain))
    return None


FOLD = PatternMatcher([(UPat(C.ADD, name="u"), _fold_link, "unrolled-sum-multiply-add-to-fma")])


def _fuse_accumulators(k: UOp, min_chains: int, stats: object) -> UOp:
    """k with its sums' multiply-adds fused, when at least `min_chains` accumulators have one (else k). Each update
    is fused once, in one walk that both counts the chains and rebuilds k (CONTRACT, the same rule as a pattern,
    rewrote every update a second time)."""
    order = k.toposort()
    fused = {u: f for u in order if u.op is D.ACCSTORE and (f := _accstore(u)) is not None}
    if len({u.src[0] for u in fused}) < min_chains or not fused:
        return k
    if stats is not None:
        stats.fired["sum-multiply-add-to-fma"] += len(fused)
    new: dict[UOp, UOp] = {}
    for u in order:
        src = tuple(new[s] for s in u.src)
        v = u if src == u.src else u.replace(src=src)
        if u in fused:  # (an update whose operands changed fuses as the rewrite would: rebuilt first)
            v = fused[u] if v is u else _accstore(v) or v
        new[u] = v
    return new[k]


def contract_kernel(k: UOp, min_chains: int = MIN_CHAINS, stats: object = None, min_folds: int = MIN_FOLDS) -> UOp:
    """k with its sums' multiply-adds fused, when at least `min_chains` accumulators have one, and its unrolled
    sums' when at least `min_folds` fold chains start with one (`0 + a * b`)."""
    k = _fuse_accumulators(k, min_chains, stats)
    folds = sum(1 for u in k.toposort() if u.op is C.ADD and u.dtype.scalar is dtypes.float32
                and any(_is_zero(x) for x in u.src) and any(x.op is C.MUL for x in u.src))
    return graph_rewrite(k, FOLD, stats=stats) if folds >= min_folds else k


@dataclass
class ContractOptions:
    """device-contract's options."""
    target: str = field(default="cpu", metadata={"help": "a target name: cpu, gpu or a device (c, llvm, ...)"})
    force: bool = field(default=False, metadata={
        "help": "fuse even when the target does not ask for it (Target.contract_multiply_add)"})
    min_chains: int = field(default=MIN_CHAINS, metadata={
        "help": "fuse a kernel only when this many accumulators take a multiply-add (fewer are latency-bound)"})
    min_folds: int = field(default=MIN_FOLDS, metadata={
        "help": "fuse a kernel's unrolled sums (folds from zero) only when it has this many"})

    def __post_init__(self) -> None:
        if self.min_chains < 1:
            raise ValueError(f"min-chains must be at least 1, got {self.min_chains}")
        if self.min_folds < 1:
            raise ValueError(f"min-folds must be at least 1, got {self.min_folds}")
        check_target_option(self.target)


@register_pass("device-contract",
               summary="fuse an f32 sum's acc + a*b into device.fma (targets with FMA; within tolerance)",
               consumes=("core", "kernel", "device"), produces=("core", "kernel", "device"), options=ContractOptions)
def device_contract(root: UOp, options: ContractOptions, ctx: PassContext) -> UOp:
    t = resolve_target(options.target, root, ctx)
    if t is None or not (options.force or t.contract_multiply_add):
        return root
    return in_kernels(root, lambda k: contract_kernel(k, options.min_chains, ctx.stats, options.min_folds))
