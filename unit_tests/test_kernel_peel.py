"""kernel-peel: a gated copy's innermost loop cut into borders and a gate-free interior gives the values it gave
uncut (pads of any width and value, concats of several sources, crops), and leaves kernels it cannot help alone."""
from __future__ import annotations

import numpy as np
import pytest

from uopir.backends.registry import available
from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.frontend.tensor import Tensor
from uopir.passes.kernel.peel import peel_kernel
from uopir.passes.kernel.simplify import simplify_kernel

DEVICES = [d for d in ("c", "llvm") if d in available()]


def _kernel(t: Tensor):
    return simplify_kernel(t.schedule()[-1].ast)


def _gated_loads(k) -> int:
    return sum(1 for u in k.toposort() if u.op is K.LOAD and u.operands.gate is not None)


def test_a_pad_copy_is_cut_at_its_borders_and_its_interior_loses_every_gate() -> None:
    k = _kernel(Tensor(np.zeros((4, 30, 30), np.float32), device="python").pad([(0, 0), (2, 2), (2, 2)]))
    assert _gated_loads(k) == 1
    p = peel_kernel(k)
    # columns cut at 2 and 32, then rows likewise: 3 x 3 segments, the interior 30 x 30 without a gate
    assert _gated_loads(p) == 0
    assert sum(1 for u in p.toposort() if u.op is core.GROUP) == 4  # the rows' group and one per row segment
    loads = [u for u in p.toposort() if u.op is K.LOAD]
    assert len(loads) == 1  # the borders store the pad value: no load at all
    interior = [r.operands.end.arg for r in loads[0].toposort() if r.op is K.RANGE]
    assert sorted(interior) == [4, 30, 30]


def test_kernels_that_peeling_cannot_help_are_left_alone() -> None:
    x = Tensor(np.zeros((8, 8), np.float32), device="python")
    k = _kernel(x.pad([(0, 0), (1, 1)]).sum(1))  # gates on the reduced axis only
    assert peel_kernel(k) is k
    k = _kernel(x + 1.0)  # no gate
    assert peel_kernel(k) is k
    k = _kernel(x.tril())  # the gate is a diagonal, no bound on the column alone
    assert peel_kernel(k) is k or not any(u.op is core.GROUP for u in peel_kernel(k).toposort())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pads,value", [([(0, 0), (1, 1), (1, 1)], 0.0), ([(0, 0), (0, 3), (5, 0)], 0.0),
                                        ([(1, 0), (2, 1), (3, 4)], -1.5), ([(0, 0), (-2, 1), (1, -3)], 0.0)])
def test_peeled_pads_match_numpy(device: str, pads: list[tuple[int, int]], value: float) -> None:
    a = np.arange(3 * 17 * 19, dtype=np.float32).reshape(3, 17, 19)
    got = Tensor(a, device=device).pad(pads, value=value).numpy()
    crop = tuple(slice(max(0, -b), s - max(0, -e)) for (b, e), s in zip(pads, a.shape, strict=True))
    want = np.pad(a[crop], [(max(0, b), max(0, e)) for b, e in pads], constant_values=value)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("widths", [(40, 24), (1, 33, 2), (8, 8, 8, 8), (3, 5, 7, 9, 11)])
def test_peeled_concats_match_numpy(device: str, widths: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((6, w)).astype(np.float32) for w in widths]
    ts = [Tensor(p, device=device) for p in parts]
    np.testing.assert_array_equal(ts[0].cat(*ts[1:], dim=1).numpy(), np.concatenate(parts, axis=1))


def test_an_outer_range_is_cut_where_a_concat_changes_source_in_a_reduction() -> None:
    # max-pool over a channel concat: the gates are bounds on the channel range (outermost), constant over the rows,
    # columns and the pool's window; each source gets its own channel loop and its loads lose their gates
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1, c, 9, 9)).astype(np.float32) for c in (3, 5))
    x = Tensor(a, device="python").relu().cat(Tensor(b, device="python").exp(), dim=1)
    k = _kernel(x.max_pool2d(kernel_size=(3, 3), stride=2))
    assert _gated_loads(k) > 0
    p = peel_kernel(k)
    assert _gated_loads(p) == 0
    loops = sorted(u.operands.end.arg for u in p.toposort() if u.op is K.RANGE and u.attrs.kind == "loop")
    assert loops == [3, 4, 4, 4, 4, 5]  # channels 8 -> 3 + 5, each with its own rows and columns


@pytest.mark.parametrize("device", DEVICES)
def test_pooled_concat_matches_numpy(device: str) -> None:
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((2, c, 11, 11)).astype(np.float32) for c in (4, 7))
    got = Tensor(a, device=device).relu().cat(Tensor(b, device=device) * 2.0, dim=1).max_pool2d(
        kernel_size=(3, 3), stride=2).numpy()
    e = np.concatenate([np.maximum(a, 0), b * 2], 1)
    want = np.max([e[:, :, i:i + 9:2, j:j + 9:2] for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_array_equal(got, want)


def test_a_padded_window_is_cut_where_it_leaves_the_border() -> None:
    # max-pool 3x3/2 with padding 1: a gate 0 < 2y + ky holds for the whole window from y = 1 on; rows and columns
    # are cut there, and the interior reads without a gate (the border rows and columns keep theirs)
    x = Tensor(np.zeros((1, 4, 12, 12), np.float32), device="python").relu()
    k = _kernel(x.max_pool2d(kernel_size=(3, 3), stride=2, padding=1))
    p = peel_kernel(k)
    loads = [u for u in p.toposort() if u.op is K.LOAD]
    assert len(loads) == 4 and sum(1 for u in loads if u.operands.gate is None) == 1
    free = next(u for u in loads if u.operands.gate is None)
    loops = [r.operands.end.arg for r in free.toposort() if r.op is K.RANGE and r.attrs.kind == "loop"]
    assert sorted(loops) == [4, 5, 5]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,k,s,p", [((2, 3, 13, 11), 3, 2, 1), ((1, 5, 9, 9), 3, 1, 1), ((1, 2, 16, 16), 5, 2, 2),
                                         ((1, 3, 7, 12), 2, 2, 1)])
def test_peeled_pools_match_numpy(device: str, shape: tuple[int, ...], k: int, s: int, p: int) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal(shape).astype(np.float32)
    got = Tensor(a, device=device).relu().max_pool2d(kernel_size=(k, k), stride=s, padding=p).numpy()
    e = np.pad(np.maximum(a, 0), [(0, 0), (0, 0), (p, p), (p, p)], constant_values=-np.inf)
    oh, ow = (shape[2] + 2 * p - k) // s + 1, (shape[3] + 2 * p - k) // s + 1
    want = np.max([e[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s] for i in range(k) for j in range(k)],
                  axis=0)
    np.testing.assert_array_equal(got, want)


def _reduces(k) -> int:
    return sum(1 for u in k.toposort() if u.op is K.REDUCE)


def test_a_reduction_over_a_concat_is_cut_at_the_seam() -> None:
    # a 1x1 conv over concat(relu(a), b) along channels (SqueezeNet's classifier over its last Fire module): the
    # sum over input channels is cut at 3, one reduction per source without a gate; a float sum only where the target
    # allows reordering it, a max (exact in any order) always
    rng = np.random.default_rng(2)
    a, b = (Tensor(rng.standard_normal((1, c, 5, 5)).astype(np.float32), device="python") for c in (3, 5))
    x = a.relu().cat(b, dim=1)
    k = _kernel(x.conv2d(Tensor(rng.standard_normal((4, 8, 1, 1)).astype(np.float32), device="python")))
    assert _reduces(k) == 1 and _gated_loads(k) == 2
    p = peel_kernel(k, reassociate=True)
    assert _reduces(p) == 2 and _gated_loads(p) == 0
    extents = sorted(r.operands.end.arg for u in p.toposort() if u.op is K.REDUCE for r in u.operands.ranges)
    assert extents == [3, 5]
    assert _reduces(peel_kernel(k)) == 1  # the order of the float sum kept
    m = _kernel(x.max(axis=1))
    assert _reduces(peel_kernel(m)) == 2 and _gated_loads(peel_kernel(m)) == 0


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_cut_at_a_concat_match_numpy(device: str) -> None:
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((2, c, 7, 7)).astype(np.float32) for c in (24, 40))
    w = rng.standard_normal((72, 64, 1, 1)).astype(np.float32)
    x = Tensor(a, device=device).relu().cat(Tensor(b, device=device), dim=1)
    e = np.concatenate([np.maximum(a, 0), b], 1)
    got = x.conv2d(Tensor(w, device=device)).numpy()
    np.testing.assert_allclose(got, np.einsum("nchw,oc->nohw", e, w[:, :, 0, 0]), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(x.max(axis=1).numpy(), e.max(axis=1))


def test_alike_concat_halves_share_one_split_loop() -> None:
    # two equal sources: two loop nests of one extent, each vectorized and global (kernel/siblings.py), where the pad
    # rule vectorized one and split only the other across the cores
    from uopir.passes.kernel.heuristic import heuristic_opts
    from uopir.passes.kernel.opts import Opt
    from uopir.passes.target import CPU
    x = Tensor(np.zeros((1, 4, 128, 128), np.float32), device="python")
    k = peel_kernel(_kernel(x.cat(x + 1.0, dim=1)))
    ranges = [r for r in k.toposort() if r.op is K.RANGE]
    opts = heuristic_opts(k, CPU.derive(threads=2))
    assert opts == [Opt("upcast", ranges[0].attrs.axis, 4), Opt("upcast", ranges[1].attrs.axis, 4),
                    Opt("global", ranges[0].attrs.axis), Opt("global", ranges[1].attrs.axis)]


@pytest.mark.parametrize("device", DEVICES)
def test_alike_concat_halves_match_numpy(device: str) -> None:
    # 2 x 65536 elements: split across the cores by one shared global id (kernel_to_device._siblings)
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((1, 4, 128, 128)).astype(np.float32) for _ in range(2))
    got = Tensor(a, device=device).cat(Tensor(b, device=device), dim=1).numpy()
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("device", DEVICES)
def test_a_pool_over_alike_concat_halves_tiles_both(device: str) -> None:
    # SqueezeNet's max pool over a Fire module's two expands: two alike nests, each with its row upcast whole and its
    # taps unrolled (the pad rule tiled the first and left the second's strided row scalar); values as numpy's
    from uopir.passes.kernel.heuristic import heuristic_opts
    from uopir.passes.target import CPU
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((1, 4, 11, 11)).astype(np.float32) for _ in range(2))
    x, z = (Tensor(v, device="python") for v in (a, b))
    k = peel_kernel(_kernel(x.relu().cat(z.relu(), dim=1).max_pool2d(kernel_size=(3, 3), stride=2)))
    opts = heuristic_opts(k, CPU.derive(max_vector_bytes=64))
    ups = [o for o in opts if o.kind == "upcast"]
    assert len(ups) == 2 and {o.factor for o in ups} == {5}  # each nest's row of 5 outputs, whole
    assert len([o for o in opts if o.kind == "unroll"]) == 2
    got = Tensor(a, device=device).relu().cat(Tensor(b, device=device).relu(), dim=1).max_pool2d(
        kernel_size=(3, 3), stride=2).numpy()
    e = np.maximum(np.concatenate([a, b], 1), 0)
    want = np.max([e[:, :, i:i + 9:2, j:j + 9:2] for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_array_equal(got, want)


def test_alike_nests_that_read_what_they_store_keep_the_heuristic() -> None:
    # the second nest reads the buffer the first writes: the nests may not interleave under one split loop
    from uopir.ir.parser import parse_ir
    from uopir.passes.kernel.heuristic import heuristic_opts
    from uopir.passes.kernel.siblings import sibling_opts
    from uopir.passes.target import CPU
    text = """
%0 = kernel.param {idx = 0} : ptr<f32, global>
%1 = core.const 65536 : index
%2 = kernel.range %1 {axis = 0} : index
%3 = kernel.index %0, %2 : ptr<f32, global>
%4 = kernel.param {idx = 1} : ptr<f32, global>
%5 = kernel.index %4, %2 : ptr<f32, global>
%6 = kernel.load %5 : f32
%7 = kernel.store %3, %6
%8 = kernel.end %7, %2
%9 = kernel.range %1 {axis = 1} : index
%10 = core.add %9, %1 : index
%11 = kernel.index %0, %10 : ptr<f32, global>
%12 = kernel.index SRC, %9 : ptr<f32, global>
%13 = kernel.load %12 : f32
%14 = kernel.store %11, %13
%15 = kernel.end %14, %9
%16 = core.group %8, %15
kernel.def %16 {name = "nests"}
"""
    t = CPU.derive(threads=2)
    assert sibling_opts(parse_ir(text.replace("SRC", "%4")), t, heuristic_opts) is not None
    assert sibling_opts(parse_ir(text.replace("SRC", "%0")), t, heuristic_opts) is None
