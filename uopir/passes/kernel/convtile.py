"""kernel-optimize's register tile of a dense convolution with a window over a small plane (the heuristic's step 1,
after `channel_tile`): two blocks of output channels beside the pixels.

The channel tile of a window conv makes one block of 16 output channels the vector and upcasts the pixels of a row
beside it (at most CHANNEL_TILE_ROWS; the largest divisor of the row): each step of the reduction loads one weight
vector per tap and broadcasts one input per pixel into its own accumulator. A row of 56 gives 14 accumulators, enough
to hide the multiply-add latency (the N=16 64 -> 64 56x56 conv's kernel runs at ~0.95 of one core's FMA peak, and two
blocks beside 7 pixels measured no faster there). A row of 7 (ResNet-18's last stage) gives 7: too few chains for two
FMA ports of latency 4. Then the block range beside the channel vector is upcast by CONV_BLOCKS as well: 2 weight
vectors per tap, each broadcast feeding 2 multiply-adds, 14 accumulators (one core, c: 512 -> 512 over 7x7 136 -> 157
GFLOP/s; 256 -> 512 stride 2 14x14 -> 7x7 144 -> 183). Four blocks (28 accumulators beside the unrolled taps' weight
vectors) spilled: 124.
"""
from __future__ import annotations

from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.pointwise import channel_block_range

__all__ = ["conv_blocks", "CONV_BLOCKS", "CONV_MIN_ACCS"]

CONV_BLOCKS = 2  # channel blocks per tile of a window conv whose pixels are too few
CONV_MIN_ACCS = 8  # a channel tile of fewer pixels (accumulator vectors) than this gets the blocks beside it


def conv_blocks(k: KernelFacts, tile: dict[UOp, int]) -> tuple[UOp, int] | None:
    """(the block range, CONV_BLOCKS) to upcast beside the channel tile `tile` ({channel vector: width, pixels: p})
    of a window conv: one reduction over several ranges (input channels and the window's), one loop nest (no peeled
    segments), p < CONV_MIN_ACCS, and an output range along which every weight load under the reduction varies (it
    varies along the channel vector too) and no input load does, whose extent CONV_BLOCKS divides into 2 groups or
    more (work for the cores). None otherwise (the channel tile as it is)."""
    if len(k.reduces) != 1 or len(k.reduces[0].operands.ranges) < 2 or len(k.segments()) != 1 or len(tile) != 2:
        return None
    _, pix = tile
    if tile[pix] >= CONV_MIN_ACCS:
        return None
    blocks = channel_block_range(k, tile)
    n = const_extent(blocks) if blocks is not None else None
    if blocks is None or n is None or n % CONV_BLOCKS or n // CONV_BLOCKS < 2:
        return None
    return blocks, CONV_BLOCKS
