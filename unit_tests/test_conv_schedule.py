"""How a convolution is scheduled: its padded input copied into a buffer of its own when the conv reuses each element
enough (the conv kernel then reads it without a gate per tap), fused into the conv otherwise; its weights copied in
blocks of output channels when its rows are short or its reads strided (the conv's vector is then a block of
channels); the values are the same either way."""
from __future__ import annotations

import numpy as np
import pytest

from uopir.backends.registry import available
from uopir.dialects import kernel as K
from uopir.frontend.nn_ops import (
    CHANNEL_BLOCK,
    CHANNEL_PAD_MIN_BLOCKS,
    IN_PLACE_MIN_ROW,
    IN_PLACE_WINDOW,
    PAD_COPY_MIN_REUSE,
    PAD_COPY_MIN_WORK,
    POINTWISE_ROW_TILE_MIN,
)
from uopir.frontend.tensor import Tensor
from uopir.ir.uop import UOp

DEVICES = [d for d in ("c", "llvm") if d in available()]


def _conv_ref(x: np.ndarray, w: np.ndarray, pad: int, groups: int = 1) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = xp.shape
    co, cg, kh, kw = w.shape
    og = co // groups
    out = np.zeros((n, co, h - kh + 1, wd - kw + 1))
    for o in range(co):
        g = o // og
        for dy in range(kh):
            for dx in range(kw):
                win = xp[:, g * cg:(g + 1) * cg, dy:dy + out.shape[2], dx:dx + out.shape[3]]
                out[:, o] += np.einsum("nchw,c->nhw", win, w[o, :, dy, dx].astype(np.float64))
    return out


def test_a_big_padded_conv_copies_its_padding_and_a_small_one_fuses_it() -> None:
    rng = np.random.default_rng(0)
    big = Tensor(rng.random((1, 16, 56, 56), np.float32), device="python").conv2d(
        Tensor(rng.random((32, 16, 3, 3), np.float32), device="python"), padding=1)
    # the padded copy (16x58x58), the weight blocks (a row of 56 is 3.5 vectors), then the conv reading both
    assert [it.name for it in big.schedule()] == ["E_16_58_58", "E_2_144_16", "r_32_56_56"]
    small = Tensor(rng.random((1, 2, 6, 6), np.float32), device="python").conv2d(
        Tensor(rng.random((2, 2, 3, 3), np.float32), device="python"), padding=1)
    assert 2 * 2 * 6 * 6 * 2 * 9 < PAD_COPY_MIN_WORK and len(small.schedule()) == 1
    unpadded = Tensor(rng.random((1, 16, 56, 56), np.float32), device="python").conv2d(
        Tensor(rng.random((32, 16, 3, 3), np.float32), device="python"))
    assert [it.name for it in unpadded.schedule()] == ["E_2_144_16", "r_32_54_54"]  # weight blocks (54 % 8), no pad


def test_a_conv_that_reuses_its_input_little_keeps_the_padding_fused() -> None:
    # a 1x1 conv to one channel over a padded input reads each element once: no copy
    x = Tensor(np.ones((1, 64, 64, 64), np.float32), device="python")
    y = x.conv2d(Tensor(np.ones((1, 64, 1, 1), np.float32), device="python"), padding=1)
    assert 1 < PAD_COPY_MIN_REUSE and len(y.schedule()) == 1
    # a depthwise 3x3/2 conv reads each element 2.25 times, but its window is at most IN_PLACE_WINDOW wide and its
    # rows longer than IN_PLACE_MIN_ROW: read in place (kernel-peel cuts its border), the SiLU before it realized
    # once per element of the unpadded input
    assert IN_PLACE_WINDOW == 3 and PAD_COPY_MIN_REUSE < 2.25 and IN_PLACE_MIN_ROW == 16
    x = Tensor(np.ones((1, 32, 56, 56), np.float32), device="python")
    dw = x.silu().pad([(0, 0), (0, 0), (1, 1), (1, 1)]).conv2d(Tensor(np.ones((32, 1, 3, 3), np.float32),
                                                                 device="python"), stride=2, groups=32)
    assert [it.name for it in dw.schedule()] == ["E_32_56_56", "r_32_28_28"]
    # ... its input made by a 1x1 conv (EfficientNet-B0's expand conv, the SiLU fused into it): no second kernel;
    # but over rows of 14 the padding is copied (the border's scalar columns would be a large share)
    for c, hw, want in [(96, 112, ["r_96_112_112", "r_96_56_56"]),
                        (240, 28, ["r_240_28_28", "E_240_30_30", "r_240_14_14"])]:
        y = Tensor(np.ones((1, 16, hw, hw), np.float32), device="python").conv2d(
            Tensor(np.ones((c, 16, 1, 1), np.float32), device="python")).silu()
        dw = y.pad([(0, 0), (0, 0), (1, 1), (1, 1)]).conv2d(Tensor(np.ones((c, 1, 3, 3), np.float32),
                                                                   device="python"), stride=2, groups=c)
        assert [it.name for it in dw.schedule()][-len(want):] == want
    # a depthwise 5x5/2 conv: copied (E_144_60_60), the SiLU computed in the copy; so is a 3x3 one dilated by 2
    # (a window of 5)
    x = Tensor(np.ones((1, 144, 56, 56), np.float32), device="python")
    dw = x.silu().pad([(0, 0), (0, 0), (2, 2), (2, 2)]).conv2d(Tensor(np.ones((144, 1, 5, 5), np.float32),
                                                                  device="python"), stride=2, groups=144)
    assert [it.name for it in dw.schedule()] == ["E_144_60_60", "r_144_28_28"]
    dw = x.conv2d(Tensor(np.ones((144, 1, 3, 3), np.float32), device="python"), dilation=2, padding=2, groups=144)
    assert [it.name for it in dw.schedule()] == ["E_144_60_60", "r_144_56_56"]
    # ... and so is a 3x3/1 one, over a plane of 56x56 too (the border's columns are scalar loops beside the vector
    # rows); only a strided one over long rows reads in place
    dw = x.conv2d(Tensor(np.ones((144, 1, 3, 3), np.float32), device="python"), padding=1, groups=144)
    assert [it.name for it in dw.schedule()] == ["E_144_58_58", "r_144_56_56"]
    x = Tensor(np.ones((1, 480, 14, 14), np.float32), device="python")
    dw = x.conv2d(Tensor(np.ones((480, 1, 3, 3), np.float32), device="python"), padding=1, groups=480)
    assert [it.name for it in dw.schedule()] == ["E_480_16_16", "r_480_14_14"]
    dw = x.conv2d(Tensor(np.ones((480, 1, 3, 3), np.float32), device="python"), padding=1, stride=2, groups=480)
    assert [it.name for it in dw.schedule()] == ["E_480_16_16", "r_480_7_7"]


def test_an_input_padded_before_the_conv_is_copied_too() -> None:
    # the ONNX importer pads first and convolves with padding 0
    rng = np.random.default_rng(1)
    x = Tensor(rng.random((1, 16, 56, 56), np.float32), device="python").pad([(0, 0), (0, 0), (1, 1), (1, 1)])
    y = x.conv2d(Tensor(rng.random((32, 16, 3, 3), np.float32), device="python"))
    assert len(y.schedule()) == 3  # the padded copy, the weight blocks (rows of 56), the conv


def test_short_rows_and_strided_reads_block_the_weights_by_output_channels() -> None:
    rng = np.random.default_rng(3)

    def kernels(shape: tuple[int, ...], co: int, stride: int = 1) -> int:
        x = Tensor(rng.random(shape, np.float32), device="python")
        w = Tensor(rng.random((co, shape[1], 3, 3), np.float32), device="python")
        return len(x.conv2d(w, stride=stride, padding=1).schedule())

    assert 14 < 2 * CHANNEL_BLOCK and kernels((1, 32, 14, 14), 32) == 3  # padded input, weight blocks, the conv
    assert kernels((1, 32, 14, 14), 24) == 3  # 24 channels: blocks of 8 (half a block)
    assert kernels((1, 32, 14, 14), 20) == 2  # 20 channels are no whole number of blocks
    assert kernels((1, 16, 64, 64), 32) == 2  # a row of 64 is whole vectors: a row tile, the weights as they are
    assert kernels((1, 16, 56, 56), 32) == 3  # a row of 56 is 3.5 vectors: blocks, 16 channels x 14 columns
    assert kernels((1, 16, 56, 56), 72) == 2  # ... but blocks of 8 channels (half vectors) are no better there
    x = Tensor(rng.random((1, 24, 56, 56), np.float32), device="python")
    pointwise = x.conv2d(Tensor(rng.random((144, 24, 1, 1), np.float32), device="python")).schedule()
    assert len(pointwise) == 1  # ... nor is a 1x1 conv's (its row tile reads whole rows, no shifted taps)
    assert kernels((1, 16, 55, 55), 32) == 3  # a row of 55 is no whole number of half vectors (SqueezeNet's)
    assert kernels((1, 16, 56, 56), 32, stride=2) == 3  # a strided read is no vector


def test_many_channels_in_half_blocks_are_padded_to_whole_blocks() -> None:
    # 1000 = 62.5 blocks: 1008 channels computed (zero weights for the last 8), whole vectors of 16, read as a slice
    rng = np.random.default_rng(4)

    def names(co: int) -> list[str]:
        x = Tensor(rng.random((1, 32, 11, 11), np.float32), device="python")
        w = Tensor(rng.random((co, 32, 1, 1), np.float32), device="python")
        return [it.name for it in x.conv2d(w).relu().schedule()]

    assert 1000 >= CHANNEL_PAD_MIN_BLOCKS * CHANNEL_BLOCK
    assert names(1000) == ["E_63_32_16", "r_1008_11_11", "E_1000_11_11"]
    assert names(40) == ["E_5_32_8", "r_40_11_11"]  # a few blocks of 8 stay so (see CHANNEL_PAD_MIN_BLOCKS)
    assert 88 < CHANNEL_PAD_MIN_BLOCKS * CHANNEL_BLOCK and names(88) == ["E_11_32_8", "r_88_11_11"]


def test_a_pointwise_conv_over_a_big_ragged_plane_keeps_its_row_tile() -> None:
    # SqueezeNet's 13x13 classifier: the weights as they are, one kernel (no block copy, no 1008-channel slice)
    rng = np.random.default_rng(4)

    def names(co: int, hw: int, k: int = 1) -> list[str]:
        x = Tensor(rng.random((1, 32, hw, hw), np.float32), device="python")
        w = Tensor(rng.random((co, 32, k, k), np.float32), device="python")
        return [it.name for it in x.conv2d(w).relu().schedule()]

    assert 13 * 13 >= POINTWISE_ROW_TILE_MIN > 11 * 11
    assert names(1000, 13) == ["r_1000_13_13"]
    assert names(32, 55) == ["r_32_55_55"]
    assert names(32, 11) == ["E_2_32_16", "r_32_11_11"]  # a smaller odd plane: blocks of channels
    assert names(32, 14) == ["r_32_14_14"]  # 196: 12 vectors and a column tail of 4
    assert names(32, 16) == ["r_32_16_16"]  # whole vectors
    assert names(32, 15, 3) == ["E_2_288_16", "r_32_13_13"]  # a 3x3 window: blocks whatever the plane


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("hw", [13, 14])
def test_a_pointwise_conv_over_a_ragged_plane_matches_numpy(device: str, hw: int) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 24, hw, hw)).astype(np.float32)
    w = rng.standard_normal((40, 24, 1, 1)).astype(np.float32)
    got = Tensor(x, device=device).conv2d(Tensor(w, device=device)).numpy()
    np.testing.assert_allclose(got, _conv_ref(x, w, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("co", [72, 520, 1000])
def test_padded_channel_blocks_match_numpy(device: str, co: int) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 24, 13, 13)).astype(np.float32)
    w = rng.standard_normal((co, 24, 3, 3)).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    got = Tensor(x, device=device).conv2d(Tensor(w, device=device), Tensor(b, device=device), padding=1).relu()
    want = np.maximum(_conv_ref(x, w, 1) + b.reshape(1, co, 1, 1), 0)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,co,groups,stride", [((2, 16, 56, 56), 32, 1, 1), ((1, 8, 20, 20), 8, 8, 1),
                                                    ((1, 6, 14, 13), 12, 3, 1), ((1, 32, 14, 14), 32, 1, 1),
                                                    ((1, 16, 7, 7), 48, 1, 1), ((1, 16, 29, 30), 32, 1, 2),
                                                    ((1, 16, 13, 13), 40, 1, 1), ((1, 16, 14, 14), 64, 1, 2)])
def test_padded_convs_match_numpy(device: str, shape: tuple[int, ...], co: int, groups: int, stride: int) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((co, shape[1] // groups, 3, 3)).astype(np.float32)
    got = Tensor(x, device=device).conv2d(Tensor(w, device=device), padding=1, groups=groups, stride=stride).numpy()
    want = _conv_ref(x, w, 1, groups)[:, :, ::stride, ::stride]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_conv_read_under_a_gate_or_inside_another_reduction_gets_a_buffer_of_its_own() -> None:
    # SqueezeNet's fire module: two convs concatenated (each read under the concat's gate), then a max pool, and a
    # conv under a global average pool: fused into their reader, the convs ran as one gated or nested kernel (no
    # tile, every branch's loops run for every channel: 23x the work); each conv is now a kernel of its own
    rng = np.random.default_rng(4)
    x = Tensor(rng.random((1, 16, 27, 27), np.float32), device="python")
    w1 = Tensor(rng.random((64, 16, 1, 1), np.float32), device="python")
    w3 = Tensor(rng.random((64, 16, 3, 3), np.float32), device="python")
    b = Tensor(rng.random((64,), np.float32), device="python")

    def reductions_per_kernel(t: Tensor) -> list[int]:
        return [sum(u.op is K.REDUCE for u in it.ast.toposort()) for it in t.schedule()]

    fire = x.conv2d(w1, b).relu().cat(x.conv2d(w3, b, padding=1).relu(), dim=1)
    assert max(reductions_per_kernel(fire)) == 1 and sum(reductions_per_kernel(fire)) == 2
    assert max(reductions_per_kernel(fire.max_pool2d(3, 2))) == 1
    assert reductions_per_kernel(x.conv2d(w1, b).relu().mean((2, 3)))[-2:] == [1, 1]


@pytest.mark.parametrize("device", DEVICES)
def test_convs_under_pools_and_pads_match_numpy(device: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 20, 20)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    c = np.maximum(_conv_ref(x, w, 1), 0)
    t = Tensor(x, device=device).conv2d(Tensor(w, device=device), padding=1).relu()
    np.testing.assert_allclose(t.mean((2, 3)).numpy(), c.mean((2, 3)), rtol=1e-4, atol=1e-4)
    cp = np.pad(c, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.max([cp[:, :, dy:dy + 19:2, dx:dx + 19:2] for dy in range(3) for dx in range(3)], axis=0)
    np.testing.assert_allclose(t.max_pool2d(3, 2, padding=1).numpy(), want, rtol=1e-4, atol=1e-4)


def _depthwise_kernel(c: int, hw: int, k: int, stride: int) -> UOp:
    """The depthwise conv kernel (the schedule's last) of a relu'd input, as kernel-optimize sees it."""
    from uopir import parse_ir, print_ir
    from uopir.ir.regions import map_regions
    from uopir.passes.manager import PassManager
    rng = np.random.default_rng(0)
    x = Tensor(rng.random((1, c, hw, hw), np.float32), device="python")
    w = Tensor(rng.random((c, 1, k, k), np.float32), device="python")
    text = print_ir(x.relu().conv2d(w, groups=c, stride=stride, padding=k // 2).uop)
    root = PassManager.parse("canonicalize,tensor-split-reduce{target=cpu},tensor-to-kernel,kernel-simplify,"
                             "kernel-peel").run(parse_ir(text))
    kdefs: list = []
    map_regions(root, lambda r: r.op is K.DEF, lambda r: kdefs.append(r) or r)
    return kdefs[-1]


@pytest.mark.parametrize("c,hw,k,stride,rows,row", [(240, 14, 5, 1, 1, 14), (96, 112, 3, 2, 1, 55),
                                                    (64, 7, 5, 1, 7, 7), (672, 14, 5, 2, 7, 7), (96, 28, 5, 2, 1, 14)])
def test_a_depthwise_conv_vectorizes_its_row_and_unrolls_its_window(c: int, hw: int, k: int, stride: int, rows: int,
                                                                     row: int) -> None:
    """Its own schedule (issue 26, kernel/window.py): the output row is the vector (whole up to 4 vectors: 14
    columns; a longer one by its fullest divisor: 110 = 2 x 55), every tap unrolled (the weight a broadcast per
    channel), the channels split over the cores (when there is work enough). A row of at most half a vector has
    output rows beside it up to 4 vectors (independent accumulators: all 7 rows of 7, at stride 1 or 2); a longer row
    keeps one. Before, one row per step. A strided 3x3 window reads its padded input in place (nn_ops.IN_PLACE_WINDOW,
    over rows longer than IN_PLACE_MIN_ROW): kernel-peel cuts it into a reduction per segment, and the tile is the
    ungated interior's (55 of the 56 outputs of a row), one row, before the border segments' plain unrolls."""
    import uopir.backends  # noqa: F401 - registers the llvm target
    from uopir.passes.kernel.optimize import heuristic_opts
    from uopir.passes.target import target
    kdef = _depthwise_kernel(c, hw, k, stride)

    def outputs(red: UOp) -> list[UOp]:
        return sorted((u for u in red.toposort() if u.op is K.RANGE and u.attrs.kind != "reduce"),
                      key=lambda r: r.attrs.axis)

    reds = [u for u in kdef.toposort() if u.op is K.REDUCE]
    assert (len(reds) > 1) == (k == 3 and stride > 1 and hw // stride > IN_PLACE_MIN_ROW)  # peeled: read in place
    interior = max(reds, key=lambda u: np.prod([r.src[0].arg for r in outputs(u)]))
    opts = [str(o) for o in heuristic_opts(kdef, target("llvm"))]
    taps = [f"unroll {r.attrs.axis} by {k}" for r in interior.operands.ranges]
    tile = [f"upcast {outputs(interior)[-2].attrs.axis} by {rows}"] * (rows > 1)
    tile.append(f"upcast {outputs(interior)[-1].attrs.axis} by {row}")
    assert opts[:len(tile) + len(taps)] == [*tile, *taps], opts
    # then the border segments' unrolls, and the channels over the cores where the work pays for a second one
    rest, split = opts[len(tile) + len(taps):], f"global {outputs(interior)[0].attrs.axis}"
    assert outputs(interior)[0].src[0].arg == c and all(o.startswith("unroll") for o in rest if o != split), opts
    assert (split in rest) == (c * (hw // stride) ** 2 * k * k >= 1 << 19) and split not in rest[:-1], opts


@pytest.mark.parametrize("stride", [1, 2])
def test_a_7x7_depthwise_window_over_long_rows_shrinks_its_taps_outer_first(stride: int) -> None:
    """A ConvNeXt-style 7x7 depthwise conv over rows of 56 is over the code-size budget with every tap unrolled
    beside its row: _fit_code_size shrank kx (7 is prime: to no unroll) and kept ky, a loop between two unrolled
    ranges that kernel-expand cannot lay out, so the conv failed to compile. ky goes first now: kx stays unrolled."""
    import uopir.backends  # noqa: F401 - registers the llvm target
    from uopir.passes.kernel.optimize import heuristic_opts
    from uopir.passes.target import target
    kdef = _depthwise_kernel(32, 56 * stride, 7, stride)
    red = next(u for u in kdef.toposort() if u.op is K.REDUCE)
    ky, kx = red.operands.ranges[-2:]
    opts = [str(o) for o in heuristic_opts(kdef, target("llvm"))]
    assert f"unroll {kx.attrs.axis} by 7" in opts and not any(o.startswith(f"unroll {ky.attrs.axis} ") for o in opts)
    x = np.random.default_rng(5).standard_normal((1, 32, 56 * stride, 56 * stride)).astype(np.float32)
    w = np.random.default_rng(6).standard_normal((32, 1, 7, 7)).astype(np.float32)
    got = Tensor(x, device="c").conv2d(Tensor(w, device="c"), padding=3, groups=32, stride=stride).numpy()
    np.testing.assert_allclose(got, _conv_ref(x, w, 3, 32)[:, :, ::stride, ::stride], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,k,stride", [((1, 37, 13, 11), 3, 2), ((1, 24, 14, 14), 5, 1), ((1, 16, 15, 9), 5, 2),
                                            ((1, 64, 7, 7), 5, 1), ((1, 64, 13, 13), 5, 2)])
def test_depthwise_convs_match_numpy(device: str, shape: tuple[int, ...], k: int, stride: int) -> None:
    # read in place (peeled or gated), or copied: 14x14 in rows of 14, 7x7 planes with all 7 rows tiled (stride 1
    # and 2, the 13x13 input's odd border)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], 1, k, k)).astype(np.float32)
    got = Tensor(x, device=device).relu().conv2d(Tensor(w, device=device), padding=k // 2, groups=shape[1],
                                                 stride=stride).numpy()
    want = _conv_ref(np.maximum(x, 0), w, k // 2, shape[1])[:, :, ::stride, ::stride]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_a_squeeze_excite_block_stores_the_activated_conv_once(device: str) -> None:
    # the depthwise conv is read by the squeeze-excite's pool and by the scale: its kernel stores swish(conv + b),
    # which both read, instead of the bare conv from which each recomputed the bias and the swish (its exp); the
    # scale is then fused into the 1x1 conv after it, which reads x * s[c] (the gate s materialized: C values)
    from uopir.dialects import core as C
    rng = np.random.default_rng(5)
    xs, ws, bs = rng.standard_normal((1, 16, 8, 8)), rng.standard_normal((16, 1, 3, 3)), rng.standard_normal(16)
    w1 = rng.standard_normal((8, 16, 1, 1))
    x, w, b, p = (Tensor(a.astype(np.float32), device=device) for a in (xs, ws, bs, w1))
    h = x.conv2d(w, b, groups=16, padding=1).silu()
    out = (h * h.mean((2, 3), keepdim=True).sigmoid()).conv2d(p)
    items = out.schedule()
    exps = [it.name for it in items for u in it.ast.toposort() if u.op is C.EXP2]
    assert len(exps) == 2 and not any(it.name.startswith("E_16_8_8") for it in items), [it.name for it in items]
    hr = _conv_ref(xs, ws, 1, groups=16) + bs[None, :, None, None]
    hr = hr / (1 + np.exp(-hr))
    sr = 1 / (1 + np.exp(-hr.mean((2, 3), keepdims=True)))
    np.testing.assert_allclose(out.numpy(), _conv_ref(hr * sr, w1, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_a_hard_sigmoid_gate_fuses_into_the_conv_after_it(device: str) -> None:
    # MobileNetV3's scale x * hardsigmoid(s[c]) reads 3 distinct buffers (x, and s's two terms): no heavy value to
    # store, though its clip uses the gate's value twice (counted by load, not by path: was a 4-load "heavy" kernel)
    rng = np.random.default_rng(6)
    xs, ss, sb, w1 = (rng.standard_normal(s) for s in ((1, 16, 8, 8), (1, 16, 1, 1), (1, 16, 1, 1), (8, 16, 1, 1)))
    x, s, b, p = (Tensor(a.astype(np.float32), device=device) for a in (xs, ss, sb, w1))
    out = (x * (s + b).hardsigmoid()).conv2d(p)
    assert [it.name for it in out.schedule()] == ["r_8_8_8"]
    np.testing.assert_allclose(out.numpy(), _conv_ref(xs * np.clip((ss + sb) / 6 + 0.5, 0, 1), w1, 0),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_squeeze_excite_s_reductions_store_their_activations(device: str) -> None:
    # each reduction of the squeeze-excite (pool, squeeze conv, excite conv) is stored with the elementwise chain
    # above it (the mean's divide, the SiLU, the sigmoid gate) instead of bare, with that chain as a kernel of its own
    # after it (E_16, E_4, E_16n1): 5 kernels, not 8
    rng = np.random.default_rng(7)
    xs, ws, bs = rng.standard_normal((1, 16, 8, 8)), rng.standard_normal((16, 1, 3, 3)), rng.standard_normal(16)
    w1, w2, w3 = (rng.standard_normal(s) for s in ((8, 16, 1, 1), (4, 16, 1, 1), (16, 4, 1, 1)))
    x, w, b, p, q, r = (Tensor(a.astype(np.float32), device=device) for a in (xs, ws, bs, w1, w2, w3))
    h = x.conv2d(w, b, groups=16, padding=1).silu()
    out = (h * h.mean((2, 3), keepdim=True).conv2d(q).silu().conv2d(r).sigmoid()).conv2d(p)
    assert [it.name for it in out.schedule()] == ["r_16_8_8", "r_16", "r_4", "r_16n1", "r_8_8_8"]

    def silu(v: np.ndarray) -> np.ndarray:
        return v / (1 + np.exp(-v))
    hr = silu(_conv_ref(xs, ws, 1, groups=16) + bs[None, :, None, None])
    sr = 1 / (1 + np.exp(-_conv_ref(silu(_conv_ref(hr.mean((2, 3), keepdims=True), w2, 0)), w3, 0)))
    np.testing.assert_allclose(out.numpy(), _conv_ref(hr * sr, w1, 0), rtol=1e-4, atol=1e-4)
