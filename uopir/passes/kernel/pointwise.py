"""kernel-optimize's schedule of small GEMMs: pointwise (1x1) convolutions' register tile over small planes (the
heuristic's step 1), and when a panel is worth packing (step 5).

A 1x1 conv whose weights nn_ops copied in blocks of output channels (nn_ops.CHANNEL_BLOCK, the block innermost) is a
small GEMM: output [Cout][HW] = W[Cout][Cin] x X[Cin][HW]. The heuristic's channel tile (`channel_tile`) makes one
block of channels the vector and upcasts the pixels beside it: each step of the reduction over Cin loads one weight
vector and broadcasts one input per pixel. Over a 7x7 plane that is 7 pixels, 7 accumulators: a tile too small to
hide the add latency, and each broadcast feeds one multiply. Here the block range beside it is upcast as well, by
`b` blocks: b weight vectors per step, each broadcast feeding b multiplies, b x 7 accumulators (EfficientNet-B0's
1152 -> 192 over 7x7 on one core: 145 -> 115 us; 320 -> 1280 278 -> 223 us). The reduction is then not unrolled:
kernel-expand orders an unrolled body accumulator by accumulator, which keeps every unrolled step's broadcasts and
weight vectors live at once and spills. Planes whose pixel tile already fills the accumulators (14 pixels of a
14x14 plane, 16 of a 28x28) keep the channel tile (measured no faster with two blocks: 28 accumulators spill).
"""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts, address_of
from uopir.passes.kernel.indexmath import const_extent, linear_coeffs

__all__ = ["pointwise_blocks", "channel_block_range", "panel_reuse", "POINTWISE_BLOCKS", "POINTWISE_ACC_BUDGET",
           "POINTWISE_MIN_ACCS", "PACK_MIN_REUSE", "PACK_MIN_REUSE_STRIDED", "PACK_ALIAS_BYTES", "PACK_BIG_PANEL",
           "pack_pays"]

POINTWISE_BLOCKS = (3, 2)  # channel blocks per tile, best first (4 x 7 = 28 accumulators spill: 96 -> 576 at 7x7 1.6x)
# accumulator lanes of a pointwise tile, in units of the target's `max_upcast`: its 16 vectors leave half of AVX-512's
# 32 registers to a matmul's row of B and broadcasts of A; a pointwise tile's only other live values are its b weight
# vectors (the broadcast inputs are memory operands of the multiplies), so it holds 3/2 of that: 3 x 7 = 21 vectors
POINTWISE_ACC_BUDGET = 1.5
# a channel tile of fewer accumulator vectors than this gets blocks beside it (independent add chains: latency 4 x 2
# ports); one of 9 or 11 pixels keeps its unrolled tile (SqueezeNet's 16 -> 64 over 55x55, 11 pixels: 2 blocks and no
# unroll 80 -> 91 us, 32 -> 128 over 27x27, 9 pixels: no faster)
POINTWISE_MIN_ACCS = 8
# `pack` copies a panel of the input read along the global range (a matmul's B, a pointwise conv's input pixels) once
# per global iteration: it pays only when that many row blocks read the copy again (a 1024^2 matmul's 128 blocks of
# 8 rows). A pointwise projection has few (one core: 96 -> 24 channels over 56x56, 3 blocks: 111 -> 81 us unpacked;
# 144 -> 40 over 28x28, 5 blocks: 74 -> 65 us); 12 and 15 blocks measured alike either way (16 -> 96, 40 -> 240)
PACK_MIN_REUSE = 16
# ... and from half as many where the unpacked panel reads badly: its rows a multiple of PACK_ALIAS_BYTES apart (the
# L1's set period: every row of the panel lands in the same sets, a 12-way L1 holds 12 of them), or the panel
# PACK_BIG_PANEL or more (past L1 and then some). 64-row matmuls (8 blocks of 8 rows), CPU us per replay, unpacked ->
# packed, best of 3 rounds, c / llvm: rows 4 KiB apart 64x256x1024 192 -> 171 / 189 -> 174, 96x256x1024 285 -> 236 /
# 259 -> 239; a 128 KiB panel 64x1024x256 155 -> 158 / 178 -> 157; but 64x256x256 46 -> 50 / 43 -> 48, 64x512x512
# (2 KiB apart, 64 KiB panel) 141 -> 159 / 142 -> 161, 64x256x768 113 -> 128, 96x384x1152 (4.5 KiB) 344 -> 367
PACK_MIN_REUSE_STRIDED = 8
PACK_ALIAS_BYTES = 4096
PACK_BIG_PANEL = 128 << 10


def channel_block_range(k: KernelFacts, tile: dict[UOp, int]) -> UOp | None:
    """The output range of a conv's blocks of output channels beside its channel tile `tile` ({channel vector range:
    width, pixel range: p}): every load under the reduction that varies along the channel vector (the weights) varies
    along it too, and none of the others (the input pixels) does. None when there is no such range (or no weights or
    no inputs under the reduction)."""
    chan = next(iter(tile))
    red = k.red_ranges()
    loaded = [x for x in k.loads if k.deps[x] & red]
    weights = [x for x in loaded if chan in k.deps[x]]
    inputs = [x for x in loaded if chan not in k.deps[x]]
    if not weights or not inputs:
        return None
    return next((r for r in k.out if r not in tile and all(r in k.deps[x] for x in weights)
                 and not any(r in k.deps[x] for x in inputs)), None)


def pointwise_blocks(k: KernelFacts, tile: dict[UOp, int], budget: int) -> tuple[UOp, int] | None:
    """(the block range, b) to upcast beside a channel tile `tile` ({channel vector range: width, pixel range: p}) of
    a pointwise conv whose tile holds fewer than POINTWISE_MIN_ACCS vectors: one reduction over one range (Cin; no
    window), no peeled segments, an output range `blocks` along which every load under the reduction that varies
    along the channel vector (the weight blocks) varies too while some other one (the input pixels) does not, and b
    (the first of POINTWISE_BLOCKS dividing its extent, leaving at least 2 groups for the cores) times the tile's
    lanes within POINTWISE_ACC_BUDGET x `budget`. None otherwise (the channel tile as it is)."""
    if len(k.reduces) != 1 or len(k.reduces[0].operands.ranges) != 1 or len(k.segments()) != 1 or len(tile) != 2:
        return None
    chan = next(iter(tile))
    lanes = 1
    for f in tile.values():
        lanes *= f
    if lanes >= POINTWISE_MIN_ACCS * tile[chan]:
        return None
    blocks = channel_block_range(k, tile)
    n = const_extent(blocks) if blocks is not None else None
    if blocks is None or n is None:
        return None
    b = next((b for b in POINTWISE_BLOCKS if n % b == 0 and n // b >= 2 and b * lanes <= POINTWISE_ACC_BUDGET * budget),
             None)
    return (blocks, b) if b is not None else None


def panel_reuse(k: KernelFacts, loads: list[UOp]) -> int:
    """How many times each global iteration reads its packed panels of `loads`: the iterations of the output loops
    (not lanes, not threads) that none of them varies along (a matmul's row blocks), the fewest over the loads."""
    reuse = []
    for ld in loads:
        n = 1
        for r in k.out:
            if r.attrs.kind == "loop" and r not in k.deps[ld]:
                n *= const_extent(r) or 1
        reuse.append(n)
    return min(reuse, default=0)


def pack_pays(k: KernelFacts, loads: list[tuple[UOp, list[UOp]]]) -> bool:
    """Whether packing `loads` ((load, its panel's ranges) from opts.pack_loads) pays: PACK_MIN_REUSE row blocks
    read each panel, or PACK_MIN_REUSE_STRIDED where every panel's rows (its reduction ranges' smallest stride) are a
    multiple of PACK_ALIAS_BYTES apart or it is PACK_BIG_PANEL bytes or more (see PACK_MIN_REUSE_STRIDED)."""
    reuse = panel_reuse(k, [ld for ld, _ in loads])
    if reuse >= PACK_MIN_REUSE:
        return True
    if reuse < PACK_MIN_REUSE_STRIDED or not loads:
        return False
    for ld, inner in loads:
        a = address_of(ld.operands.ptr)
        c = linear_coeffs(a[0], frozenset(inner), k.deps) if a is not None else None
        rows = [abs(c.get(r, 0)) for r in inner if r.attrs.kind in ("reduce", "unroll")] if c is not None else []
        size = ld.dtype.itemsize
        for r in inner:
            size *= const_extent(r) or 1
        row = min(rows, default=0) * ld.dtype.itemsize
        if not ((row and row % PACK_ALIAS_BYTES == 0) or size >= PACK_BIG_PANEL):
            return False
    return True
