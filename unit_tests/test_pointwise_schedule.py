"""The register tile of a pointwise (1x1) conv over a small plane (uopir/passes/kernel/pointwise.py): channel blocks
beside the channel vector and the pixels, no unroll; and the convs it schedules give numpy's values."""
from __future__ import annotations

import numpy as np
import pytest

from uopir.backends.registry import available
from uopir.dialects import kernel as K
from uopir.frontend.tensor import Tensor
from uopir.ir.uop import UOp
from uopir.passes.target import CPU

# an AVX-512 host with two cores, as uopir.backends.cpu.runtime.host_target describes one (16 accumulator vectors)
AVX512 = CPU.derive(name="avx512x2", max_vector_bytes=64, max_upcast=256, threads=2, reassociate_float_reductions=True,
                    parallel_min_work=1 << 19)


def _conv_kernel(cin: int, cout: int, hw: int) -> UOp:
    """The conv kernel (the schedule's last: after the weights' copy into channel blocks), as kernel-optimize sees
    it."""
    from uopir import parse_ir, print_ir
    from uopir.ir.regions import map_regions
    from uopir.passes.manager import PassManager
    x = Tensor(np.ones((1, cin, hw, hw), np.float32), device="python")
    w = Tensor(np.ones((cout, cin, 1, 1), np.float32), device="python")
    y = x.conv2d(w, Tensor(np.ones(cout, np.float32), device="python")).silu()
    root = PassManager.parse("canonicalize,tensor-to-kernel,kernel-simplify,kernel-peel").run(parse_ir(print_ir(y.uop)))
    kdefs: list[UOp] = []
    map_regions(root, lambda r: r.op is K.DEF, lambda r: kdefs.append(r) or r)
    return kdefs[-1]


def _opts(cin: int, cout: int, hw: int) -> list[str]:
    from uopir.passes.kernel.optimize import heuristic_opts
    return [str(o) for o in heuristic_opts(_conv_kernel(cin, cout, hw), AVX512)]


def test_a_pointwise_conv_over_a_7x7_plane_tiles_three_channel_blocks() -> None:
    # 1152 -> 192 (EfficientNet-B0): 12 blocks of 16 channels [axis 0], 49 pixels [1], 1152 inputs [3, reduce], the
    # block's 16 channels [4]: 3 blocks x 7 pixels x 16 channels (21 vectors), no unroll, the 4 groups of blocks split
    assert _opts(1152, 192, 7) == ["upcast 0 by 3", "upcast 1 by 7", "upcast 4 by 16", "global 0"]
    # 20 blocks (320 -> 1280 at the head): 3 does not divide them, 2 does
    assert _opts(320, 1280, 7)[:3] == ["upcast 0 by 2", "upcast 1 by 7", "upcast 4 by 16"]


def test_a_pointwise_conv_over_a_plane_of_11_pixel_rows_keeps_the_channel_tile() -> None:
    # 11x11 (121 pixels, under POINTWISE_ROW_TILE_MIN): 11 pixels are 11 accumulators already (POINTWISE_MIN_ACCS)
    # beside the 16 channels of a block, its reduction unrolled
    assert _opts(80, 480, 11) == ["upcast 1 by 11", "upcast 4 by 16", "unroll 3 by 4", "global 0"]


def test_a_pointwise_conv_over_a_ragged_plane_of_160_pixels_or_more_takes_the_pixel_row() -> None:
    # 14x14 = 196 and 55x55 = 3025 pixels (EfficientNet's expands, SqueezeNet's 1x1s): the plane is one contiguous
    # row of the input and output, cut into a body of whole vectors and a column tail, 8 or 16 channels beside two
    # vectors of pixels (no weight copy; one core: 80 -> 480 over 14x14 111 -> 98 us, 16 -> 64 over 55x55 81 -> 61)
    assert _opts(80, 480, 14) == ["tail 1 by 16", "upcast 0 by 8", "upcast 4 by 32", "upcast 5 by 4", "unroll 3 by 4",
                                  "global 0"]
    assert _opts(16, 64, 55)[:4] == ["tail 1 by 16", "upcast 0 by 16", "upcast 4 by 16", "unroll 3 by 4"]


def test_a_pointwise_projection_does_not_pack_its_input() -> None:
    # 96 -> 24 over 56x56: 8 channels x 32 pixels, the pixel blocks outermost and split; only 3 row blocks would read
    # a packed panel of the input (PACK_MIN_REUSE), so it is read in place (one core: 111 -> 81 us)
    assert _opts(96, 24, 56) == ["upcast 0 by 8", "upcast 1 by 32", "unroll 3 by 4", "outer 1", "global 1"]


@pytest.mark.parametrize("cin,cout,hw", [(40, 96, 7), (24, 45, 9), (24, 40, 12)])
def test_pointwise_convs_with_bias_and_silu_match_numpy(cin: int, cout: int, hw: int) -> None:
    # 96 channels at 7x7 take the 3-block tile (2 groups); 45 channels (odd: no blocks) over 81 pixels (no vector
    # divides them) keep theirs; 40 channels over 12x12 (9 vectors) the pixel vector beside 8 channels
    device = next((d for d in ("llvm", "c") if d in available()), "python")
    rng = np.random.default_rng(7)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((1, cin, hw, hw), (cout, cin, 1, 1), (cout,)))
    got = Tensor(x, device=device).conv2d(Tensor(w, device=device), Tensor(b, device=device)).silu().numpy()
    y = np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x) + b[None, :, None, None]
    np.testing.assert_allclose(got, y / (1 + np.exp(-y)), rtol=1e-5, atol=1e-5)
