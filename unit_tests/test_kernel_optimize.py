"""kernel-optimize and kernel-expand against the reference interpreter: random tensor programs lowered with
canonicalize,tensor-to-kernel,kernel-optimize{strategy=heuristic},kernel-expand (on several target descriptions,
and with random opts) give bit-identical results and buffers to the tensor-level interpretation; the heuristic's
choices on matmul, elementwise and reduction kernels; UOPIR_NOOPT; located errors."""
from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples
from test_tensor_to_kernel import _Gen, _input_arrays

from uopir.backends.python import evaluate
from uopir.backends.python.kernel import run_kernel
from uopir.dialects import core, kernel, tensor
from uopir.dialects.semantics import np_dtype, values_equal
from uopir.frontend.tensor import Tensor
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import dtypes
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.regions import map_regions
from uopir.ir.uop import UOp
from uopir.ir.verify import verify
from uopir.passes.kernel import codesize, opts
from uopir.passes.kernel.expand import expand_kernel
from uopir.passes.kernel.indexmath import const_extent
from uopir.passes.kernel.optimize import Opt, OptError, apply_opt, apply_opts, heuristic_opts
from uopir.passes.manager import PassManager
from uopir.passes.target import CPU, Target, register_target

# A target whose small vectors and factors make every opt a real split on the small shapes of random programs.
TINY = CPU.derive(name="test-tiny", max_vector_bytes=8, upcast_sizes=(2,), unroll_sizes=(2,), max_upcast=8, threads=2)
WIDE = CPU.derive(name="test-wide", max_vector_bytes=64, threads=2)
RICH = CPU.derive(name="test-rich", max_vector_bytes=64, max_upcast=256, threads=2)  # AVX-512: wide tiles, pack
register_target(TINY, replace=True)
register_target(WIDE, replace=True)
register_target(RICH, replace=True)
# a host-like target whose float sums may keep partial results in lanes (as host_cpu's: c, llvm)
ACC = CPU.derive(name="test-acc", max_vector_bytes=64, max_upcast=256, threads=2, reassociate_float_reductions=True)
register_target(ACC, replace=True)
HOST = CPU.derive(name="test-host", max_vector_bytes=64, threads=2, reassociate_float_reductions=True)  # host_cpu's


# ---- running a lowering against the interpreter ----------------------------------------------------------------------
def lowered_matches(root: UOp, lower: Callable[[UOp], UOp], seed: int = 0, whole: bool = False) -> UOp:
    """Assert that `lower(root)` (a schedule) computes what root computes, bit for bit; returns the schedule. With
    `whole`, float inputs are rounded to integers, so that a sum of them is exact in any order (a reordered one
    still matches bit for bit)."""
    bufs = _input_arrays(root, np.random.default_rng(seed))
    if whole:
        bufs = {k: np.round(v) if v.dtype.kind == "f" else v for k, v in bufs.items()}
    ref_bufs = {k: v.copy() for k, v in bufs.items()}
    ref = evaluate(root, ref_bufs)
    out = lower(root)
    verify(out)
    assert parse_ir(print_ir(out)) is out
    got_bufs = {k: v.copy() for k, v in bufs.items()}
    for u in out.toposort():
        if u.op is tensor.BUFFER and u.arg[0] not in got_bufs:
            got_bufs[u.arg[0]] = np.full(u.arg[2], 7, np_dtype(u.dtype))  # garbage: every element must be written
    got = evaluate(out, got_bufs)
    want, have = [ref, [ref_bufs[k] for k in sorted(bufs)]], [got, [got_bufs[k] for k in sorted(bufs)]]
    if not values_equal(want, have):
        raise AssertionError(f"the lowered program computes other values\nprogram:\n{print_ir(root)}\n"
                             f"lowered:\n{print_ir(out)}\nwant {want}\ngot {have}")
    return out


def pipeline(text: str) -> Callable[[UOp], UOp]:
    pm = PassManager.parse(text)
    return lambda root: pm.run(root)


def kernels(out: UOp) -> list[UOp]:
    found: list[UOp] = []
    map_regions(out, lambda r: r.op is kernel.DEF, lambda r: found.append(r) or r)
    return found


def kinds(kdef: UOp) -> dict[int, tuple[int | None, str]]:
    """axis -> (extent, kind) of every range."""
    return {u.arg[0]: (const_extent(u), u.arg[1]) for u in kdef.toposort() if u.op is kernel.RANGE}


def lanes_left(out: UOp) -> list[UOp]:
    return [u for k in kernels(out) for u in k.toposort() if u.op is kernel.RANGE and u.arg[1] in ("upcast", "unroll")]


# ---- the property: random programs, every target ---------------------------------------------------------------------
@settings(max_examples=examples(120), deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 3),
       st.sampled_from(["cpu", "gpu", "test-tiny", "test-wide", "test-rich"]))
def test_heuristic_then_expand_is_bit_identical(r: random.Random, seed: int, tgt: str) -> None:
    text = f"canonicalize,tensor-to-kernel,kernel-optimize{{strategy=heuristic target={tgt}}},kernel-expand"
    out = lowered_matches(_Gen(r).program(), pipeline(text), seed)
    assert lanes_left(out) == []


def _random_opts(kdef: UOp, r: random.Random) -> UOp:
    """Random valid upcasts of output ranges and unrolls of the innermost range of reductions."""
    order = list(kdef.toposort())
    reduces = [u for u in order if u.op is kernel.REDUCE]
    cands = []
    for u in order:
        n = const_extent(u) if u.op is kernel.RANGE else None
        if not n or n < 2:
            continue
        if u.arg[1] == "loop":
            cands.append(("upcast", u, n))
        elif u.arg[1] == "reduce" and all(u not in x.src[1:-1] for x in reduces):
            cands.append(("unroll", u, n))
    for kind, u, n in r.sample(cands, r.randint(0, len(cands))):
        f = r.choice([d for d in range(2, n + 1) if n % d == 0])
        kdef = apply_opt(kdef, Opt(kind, u.arg[0], f))  # type: ignore[arg-type]
    return kdef


@settings(max_examples=examples(120), deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 3))
def test_random_opts_then_expand_is_bit_identical(r: random.Random, seed: int) -> None:
    pre = PassManager.parse("canonicalize,tensor-to-kernel")
    rr = random.Random(r.random())

    def lower(root: UOp) -> UOp:
        opt = map_regions(pre.run(root), lambda k: k.op is kernel.DEF, lambda k: _random_opts(k, rr))
        verify(opt)
        return map_regions(opt, lambda k: k.op is kernel.DEF, expand_kernel)
    out = lowered_matches(_Gen(r).program(), lower, seed)
    assert lanes_left(out) == []


# ---- what the heuristic picks ----------------------------------------------------------------------------------------
def _f32(*shape: int) -> Tensor:
    return Tensor(np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32))


def _one_kernel(t: Tensor, text: str) -> UOp:
    out = lowered_matches(UOp.sink(t.uop), pipeline(text))
    ks = kernels(out)
    assert len(ks) == 1
    return ks[0]


def test_matmul_gets_register_tiling_and_an_unrolled_reduction() -> None:
    x, w = _f32(8, 32), _f32(32, 16)
    k = _one_kernel(x @ w, "tensor-to-kernel,kernel-optimize")
    got = kinds(k)
    # output axes 0 (rows, 8) and 1 (columns, 16) split 4x4 into registers; the reduction (32) unrolled by 4
    assert sorted(v for v in got.values() if v[1] in ("upcast", "unroll")) == [(4, "unroll"), (4, "upcast"),
                                                                              (4, "upcast")]
    assert got[0] == (2, "loop") and got[1] == (4, "loop") and got[2] == (8, "reduce")
    assert heuristic_opts(kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0], CPU) == [
        Opt("upcast", 0, 4), Opt("upcast", 1, 4), Opt("unroll", 2, 4)]


def test_matmul_on_wide_vectors_upcasts_the_columns_by_the_vector_width() -> None:
    x, w = _f32(8, 64), _f32(64, 32)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    # 64-byte vectors hold 16 f32: columns by 16, rows by 2 (max_upcast 32), the reduction by 4
    assert heuristic_opts(k, WIDE) == [Opt("upcast", 0, 2), Opt("upcast", 1, 16), Opt("unroll", 2, 4)]


def test_a_register_rich_target_gets_a_two_vector_tile_with_the_columns_outermost() -> None:
    """16 accumulator vectors (max_upcast 256 of 16-lane vectors): an 8 x 32 tile (two vectors of columns), the
    column range made the outermost loop and split across the threads, and the B panel each column block reads
    packed contiguous (`pack`: 16 row blocks read it, pointwise.PACK_MIN_REUSE); the result stays bit-identical."""
    x, w = _f32(128, 48), _f32(48, 64)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    assert heuristic_opts(k, RICH) == [Opt("upcast", 0, 8), Opt("upcast", 1, 32), Opt("unroll", 2, 4),
                                       Opt("outer", 1), Opt("global", 1), Opt("pack", 1)]
    end = apply_opts(k, heuristic_opts(k, RICH)).src[0]
    assert end.op is kernel.END and [r.arg for r in end.src[1:3]] == [(1, "global"), (0, "loop")]
    lowered_matches(UOp.sink((x @ w).uop), pipeline("tensor-to-kernel,kernel-optimize{target=test-rich},kernel-expand"))


@pytest.mark.parametrize("n, pack", [(1024, True), (256, False)])
def test_eight_row_blocks_pack_only_a_panel_whose_rows_alias_in_l1(n: int, pack: bool) -> None:
    """64 rows (8 row blocks, a TransformerEncoder's tokens) pack B's panel only when its rows are a multiple of
    4 KiB apart (1024 columns: pointwise.pack_pays; 64x256x1024 on c 192 -> 171 us), not 1 KiB (256 columns, where
    the copy costs more than it saves: 64x256x256 46 -> 50 us)."""
    x, w = _f32(64, 48), _f32(48, n)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    assert (Opt("pack", 1) in heuristic_opts(k, RICH)) is pack
    assert Opt("global", 1) in heuristic_opts(k, RICH)


def test_rows_no_power_of_two_divides_get_the_tile_anyway_their_last_lanes_clamped() -> None:
    """197 rows (a ViT's tokens, prime): the same 8 x 32 tile as 200 rows, 25 row blocks, the three lanes past the
    end clamped to row 196 (they store its value again); bit-identical through expand. Not ragged: a range the
    store reads consecutively (its lanes are a vector), a reduction range."""
    x, w = _f32(197, 48), _f32(48, 64)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    assert heuristic_opts(k, RICH) == [Opt("upcast", 0, 8), Opt("upcast", 1, 32), Opt("unroll", 2, 4),
                                       Opt("outer", 1), Opt("global", 1), Opt("pack", 1)]
    assert const_extent(next(u for u in apply_opt(k, Opt("upcast", 0, 8)).toposort()
                             if u.op is kernel.RANGE and u.arg == (0, "loop"))) == 25
    lowered_matches(UOp.sink((x @ w).uop), pipeline("tensor-to-kernel,kernel-optimize{target=test-rich},kernel-expand"))
    with pytest.raises(OptError, match="does not divide"):
        apply_opt(k, Opt("upcast", 1, 24))
    assert not opts.ragged_ok(k.substitute({}), next(u for u in k.toposort() if u.op is kernel.RANGE
                                                           and u.arg == (2, "reduce")))


def test_ragged_columns_of_a_register_tile_get_a_vector_body_and_a_scalar_tail() -> None:
    """37 columns (attention's 197 tokens, k^T copied to (d, tokens)): `tail` cuts them into 32 and 5 (coltail.py),
    the body takes the 8 x 32 tile and the tail (axis 4) one vector of 5 beside the 8 rows; bit-identical through
    expand. Before, neither column range was upcast (a scalar column per tile)."""
    x, w = _f32(40, 8), _f32(8, 37)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    # (no thread split: the kernel's 40 x 37 x 8 iterations, counted before the cut, are too few)
    assert heuristic_opts(k, RICH) == [Opt("tail", 1, 16), Opt("upcast", 0, 8), Opt("upcast", 3, 32),
                                       Opt("upcast", 4, 5), Opt("unroll", 2, 4)]
    lowered_matches(UOp.sink((x @ w).uop), pipeline("tensor-to-kernel,kernel-optimize{target=test-rich},kernel-expand"))
    # a row of 24 columns (under two vectors) keeps its scalar tile: no tail
    k24 = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ _f32(8, 24)).uop)))[0]
    assert not any(o.kind == "tail" for o in heuristic_opts(k24, RICH))


def test_columns_a_quarter_vector_divides_get_a_vector_body_and_a_tail() -> None:
    """36 columns (4 x 9, as a 1x1 conv's 14x14 plane is 4 x 49): a body of 32 and a tail of 4 (coltail.py), not
    4-lane vectors over all 36; bit-identical through expand."""
    x, w = _f32(40, 8), _f32(8, 36)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    assert heuristic_opts(k, RICH) == [Opt("tail", 1, 16), Opt("upcast", 0, 8), Opt("upcast", 3, 32),
                                       Opt("upcast", 4, 4), Opt("unroll", 2, 4)]
    lowered_matches(UOp.sink((x @ w).uop), pipeline("tensor-to-kernel,kernel-optimize{target=test-rich},kernel-expand"))


def test_fewer_ragged_rows_take_smaller_row_blocks() -> None:
    """50 rows (a ViT-B/32's tokens) beside one vector of columns: 7 blocks of 8 rows, the last lanes clamped, where
    the 16 rows the budget holds would need 64 rows to run 4 blocks and the rows fell back to 2 (50's power of two):
    12 heads of q @ k^T over 50 tokens, 38 -> 31 us on one core."""
    x, w = _f32(50, 8), _f32(8, 16)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    assert heuristic_opts(k, RICH) == [Opt("upcast", 0, 8), Opt("upcast", 1, 16), Opt("unroll", 2, 8)]
    lowered_matches(UOp.sink((x @ w).uop), pipeline("tensor-to-kernel,kernel-optimize{target=test-rich},kernel-expand"))


def test_pack_copies_each_global_iteration_s_panel_and_reads_it_after_the_copy() -> None:
    """pack: B's panel of one column block ([k][32 columns], row-major) is copied to a kernel.local before the
    row blocks read it through kernel.after; the whole lowering (to the device program, run by the python backend)
    stays bit-identical; a batched matmul (B varies along an output loop too) is not packed."""
    x, w = _f32(128, 48), _f32(48, 64)  # 16 row blocks read each panel (PACK_MIN_REUSE)
    k = apply_opts(kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0],
                   [Opt("upcast", 0, 8), Opt("upcast", 1, 32), Opt("unroll", 2, 4), Opt("outer", 1),
                    Opt("global", 1), Opt("pack", 1)])
    (scratch,) = [u for u in k.toposort() if u.op is kernel.LOCAL]
    assert scratch.dtype.size == 64 * 48 and scratch.dtype.addrspace == "local"
    (after,) = [u for u in k.toposort() if u.op is kernel.AFTER]
    copy = after.src[1]
    assert copy.op is kernel.END and copy.src[0].op is kernel.STORE and copy.src[1].arg == (1, "global")
    assert [(const_extent(r), r.arg[1]) for r in copy.src[2:]] == [(12, "loop"), (4, "loop"), (32, "upcast")]
    loads = [u for u in k.toposort() if u.op is kernel.LOAD and u.src[0].src[0] is after]
    assert len(loads) == 1
    with pytest.raises(OptError, match="global"):
        apply_opt(apply_opt(kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0],
                            Opt("upcast", 1, 32)), Opt("pack", 1))
    one = CPU.derive(name="test-rich-1", max_vector_bytes=64, max_upcast=256, threads=1)  # one core: global to pack
    assert heuristic_opts(kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0], one)[-2:] == [
        Opt("global", 1), Opt("pack", 1)]
    for t in (x @ w, _f32(3, 16, 8) @ _f32(3, 8, 64)):
        out = lowered_matches(UOp.sink(t.uop), pipeline("default{target=test-rich}"))
        assert ("kernel.local" in print_ir(out)) == (t.ndim == 2)


def test_elementwise_gets_a_vector_upcast_of_the_contiguous_axis() -> None:
    a, b, c = _f32(64), _f32(64), _f32(64)
    k = _one_kernel(a * b + c, "tensor-to-kernel,kernel-optimize")
    assert sorted(kinds(k).values()) == [(4, "upcast"), (16, "loop")]
    k = _one_kernel(a * b + c, "tensor-to-kernel,kernel-optimize{target=test-wide}")
    assert sorted(kinds(k).values()) == [(4, "loop"), (16, "upcast")]
    k = _one_kernel(a * b + c, "tensor-to-kernel,kernel-optimize,kernel-expand")
    loads = [u for u in k.toposort() if u.op is kernel.LOAD]
    assert [u.dtype for u in loads] == [dtypes.float32.vec(4)] * 3
    stores = [u for u in k.toposort() if u.op is kernel.STORE]
    assert [u.src[1].dtype for u in stores] == [dtypes.float32.vec(4)]


def test_an_elementwise_row_no_vector_divides_takes_the_divisor_that_fills_vectors_best() -> None:
    # a squeeze-excite scale on 14x14 planes: 196 = 4 x 49, its power of two (4) fills a quarter of a 16-lane vector;
    # 28 lanes fill 7/8 of two. A 5x5 plane is upcast whole instead of staying scalar; a 7x7 plane's 49 (its best
    # divisor within this target's 16 lanes, 7, fills less than half a vector) is a body of 3 vectors and a tail.
    for hw, want in ((14, 28), (5, 25), (7, 16)):
        x, s = _f32(6, hw, hw), _f32(6, 1, 1)
        k = _one_kernel(x * s.sigmoid(), "tensor-to-kernel,kernel-simplify,kernel-optimize{target=test-wide}")
        assert (want, "upcast") in kinds(k).values(), kinds(k)
        lowered_matches(UOp.sink((x * s.sigmoid()).uop), pipeline("tensor-to-kernel,kernel-simplify,"
                                                                  "kernel-optimize{target=test-wide},kernel-expand"))
    k = _one_kernel(_f32(3, 64) + 1.0, "tensor-to-kernel,kernel-optimize{target=test-wide}")
    assert sorted(kinds(k).values()) == [(3, "loop"), (4, "loop"), (16, "upcast")]  # a full vector divides: kept


def test_a_transposed_read_is_not_vector_upcast() -> None:
    a = _f32(8, 8)
    k = _one_kernel(a.permute(1, 0) + 1.0, "tensor-to-kernel,kernel-optimize")
    assert all(kind == "loop" for _, kind in kinds(k).values())


def test_a_transposing_copy_on_wide_vectors_gets_a_square_tile_of_both_ranges() -> None:
    """attention's k^T copied (heads, d, t): 8 x 8 lanes of the stored range and of the range read contiguously,
    no loop reordered; the result still matches the reference bit for bit."""
    t = _f32(3, 24, 16).permute(0, 2, 1)
    k = _one_kernel(t.contiguous(), "tensor-to-kernel,kernel-optimize{target=test-wide}")
    assert sorted(v for v in kinds(k).values() if v[1] != "loop") == [(8, "upcast"), (8, "upcast")]
    lowered_matches(UOp.sink(t.contiguous().uop), pipeline("tensor-to-kernel,kernel-optimize{target=test-wide},"
                                                           "kernel-expand"))


def test_a_transposing_copy_whose_stored_range_the_tile_does_not_divide_gets_a_tail() -> None:
    """k^T copied to (d, 197) (ViT's tokens): the stored range (21 here) is cut into a body of 16 that takes the 8 x 8
    tile and a tail of 5 (coltail.copy_tail), where before the whole copy was a scalar load and store per element;
    bit-identical through expand."""
    t = _f32(21, 16).transpose(0, 1).contiguous() + 1
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink(t.uop)))[0]
    assert heuristic_opts(k, RICH) == [Opt("tail", 1, 8), Opt("upcast", 0, 8), Opt("upcast", 2, 8)]
    lowered_matches(UOp.sink(t.uop), pipeline("tensor-to-kernel,kernel-optimize{target=test-rich},kernel-expand"))


def test_small_reductions_are_unrolled_fully_and_long_ones_by_a_factor() -> None:
    k = _one_kernel(_f32(5, 3).sum(1), "tensor-to-kernel,kernel-optimize")
    assert sorted(kinds(k).values()) == [(3, "unroll"), (5, "loop")]
    k = _one_kernel(_f32(5, 64).sum(1), "tensor-to-kernel,kernel-optimize")
    assert sorted(kinds(k).values()) == [(4, "unroll"), (5, "loop"), (16, "reduce")]
    k = _one_kernel(_f32(5, 7, 3).sum((1, 2)), "tensor-to-kernel,kernel-optimize,kernel-expand")
    (red,) = [u for u in k.toposort() if u.op is kernel.REDUCE]
    assert red.src[0].dtype is dtypes.float32.vec(3) and red.dtype is dtypes.float32  # 3 lanes fold into one
    assert [kinds(k)[r.arg[0]] for r in red.src[1:]] == [(7, "reduce")]


def _many_gathers_sum(rows: int) -> Tensor:
    rng = np.random.default_rng(5)
    acc = None
    for _ in range(48):  # 48 buffers read through a transposed view: every lane is a scalar load
        x = Tensor(rng.standard_normal((16, rows)).astype(np.float32)).permute(1, 0)
        acc = x if acc is None else acc * 0.5 + x
    return acc.sum(1)


def test_a_long_body_is_unrolled_only_as_far_as_the_code_size_budget_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    # a reduction of 16 is unrolled fully, but not when its body has 48 gathers: 16 copies of it would be code size
    # for no speed (regression: a stack of fused softmax layers took seconds per kernel to lower and compile)
    opt, expand = "tensor-to-kernel,kernel-optimize", "tensor-to-kernel,kernel-optimize,kernel-expand"
    assert sorted(kinds(_one_kernel(_many_gathers_sum(1024), opt)).values()) == \
        [(2, "reduce"), (4, "upcast"), (8, "unroll"), (256, "loop")]
    n_ops = len(_one_kernel(_many_gathers_sum(1024), expand).toposort())
    assert n_ops <= codesize.EXPAND_MAX_OPS
    # a kernel of 8 x 16 iterations gets a budget of its own size: no unroll at all
    small = [(2, "loop"), (4, "upcast"), (16, "reduce")]
    assert sorted(kinds(_one_kernel(_many_gathers_sum(8), opt)).values()) == small
    monkeypatch.setattr(codesize, "EXPAND_MAX_OPS", 1 << 30)  # without the budgets: the full unroll
    monkeypatch.setattr(codesize, "EXPAND_SMALL_OPS", 1 << 30)
    assert sorted(kinds(_one_kernel(_many_gathers_sum(1024), opt)).values()) == \
        [(4, "upcast"), (16, "unroll"), (256, "loop")]
    assert len(_one_kernel(_many_gathers_sum(1024), expand).toposort()) > 1.8 * n_ops
    assert sorted(kinds(_one_kernel(_many_gathers_sum(8), opt)).values()) == [*small[:2], (16, "unroll")]


def _whole(*shape: int, dtype: type = np.float32) -> Tensor:
    return Tensor(np.zeros(shape, dtype))


def _reduce_kernel(t: Tensor, target: str) -> UOp:
    """The one kernel of t lowered for target, checked on integer-valued inputs (exact in any order)."""
    pm = pipeline(f"tensor-to-kernel,kernel-optimize{{target={target}}},kernel-expand")
    (k,) = kernels(lowered_matches(UOp.sink(t.uop), pm, whole=True))
    return k


def test_long_contiguous_reductions_get_partial_accumulators() -> None:
    """A full sum and a row sum read along the reduction: 4 vectors of 16 lanes accumulate side by side (one
    `upcast` of the reduce axis, nested reduces), folded once after the loop; the rows still go to threads."""
    k = _one_kernel(_whole(4096).sum(), "tensor-to-kernel")
    assert heuristic_opts(k, ACC) == [Opt("upcast", 0, 64)]
    tiled = apply_opt(k, Opt("upcast", 0, 64))
    outer, = [u for u in tiled.toposort() if u.op is kernel.REDUCE and u.src[0].op is kernel.REDUCE]
    assert [kinds(tiled)[r.arg[0]] for r in outer.src[1:]] == [(64, "upcast")]
    assert [kinds(tiled)[r.arg[0]] for r in outer.src[0].src[1:]] == [(64, "reduce")]
    red = [u for u in _reduce_kernel(_whole(4096).sum(), "test-acc").toposort() if u.op is kernel.REDUCE]
    assert sorted(str(u.dtype) for u in red) == ["f32", "vector<64xf32>"]  # the accumulators, then their fold
    rows = _one_kernel(_whole(64, 1024).sum(1), "tensor-to-kernel")
    assert heuristic_opts(rows, ACC) == [Opt("upcast", 1, 64), Opt("global", 0)]
    _reduce_kernel(_whole(64, 1024).sum(1), "test-acc")
    _reduce_kernel(_whole(64, 1024).max(1), "test-acc")
    # a shorter row: at least 8 steps of the accumulators (256: 2 vectors); under 8 vectors (64) a row keeps its
    # order (unrolled), its 4 rows the lanes of one vector instead
    assert heuristic_opts(_one_kernel(_whole(4, 256).sum(1), "tensor-to-kernel"), ACC) == [Opt("upcast", 1, 32)]
    assert heuristic_opts(_one_kernel(_whole(4, 64).sum(1), "tensor-to-kernel"), ACC) == [Opt("upcast", 0, 4),
                                                                                          Opt("unroll", 1, 4)]
    _reduce_kernel(_whole(4, 64).sum(1), "test-acc")


def test_partial_accumulators_only_where_the_order_may_change_and_the_reads_are_contiguous() -> None:
    # the generic cpu keeps a float sum's order (an unroll), but an integer sum is exact in any order
    k = _one_kernel(_whole(4096).sum(), "tensor-to-kernel")
    assert heuristic_opts(k, CPU) == [Opt("unroll", 0, 4)]
    k = _one_kernel(_whole(4096, dtype=np.int32).sum(), "tensor-to-kernel")
    assert heuristic_opts(k, CPU) == [Opt("upcast", 0, 8)]  # 4 vectors of 2 i64 (an int32 sum accumulates in i64)
    _reduce_kernel(_whole(4096, dtype=np.int32).sum(), "cpu")
    # a column sum reads along the reduction with a stride: no accumulators (the columns are a vector upcast)
    k = _one_kernel(_whole(1024, 64).sum(0), "tensor-to-kernel")
    assert heuristic_opts(k, ACC) == [Opt("upcast", 0, 16), Opt("unroll", 1, 4), Opt("global", 0)]


def test_outer_axis_goes_to_threads_when_the_target_has_them() -> None:
    a, b = _f32(256, 256), _f32(256, 256)
    k = _one_kernel(a + b, "tensor-to-kernel,kernel-optimize{target=test-wide}")
    assert kinds(k)[0] == (256, "global") and kinds(k)[1] == (16, "loop")
    k = _one_kernel(a + b, "tensor-to-kernel,kernel-optimize")  # the generic cpu has one thread
    assert kinds(k)[0] == (256, "loop")
    small = _one_kernel(_f32(4, 8) + 1.0, "tensor-to-kernel,kernel-optimize{target=test-wide}")
    assert "global" not in {kind for _, kind in kinds(small).values()}  # too little work to share
    # a gpu: output ranges run on a work-group's threads (local, at most LOCAL_MAX of them), the rest on work-groups
    g = _one_kernel(_f32(4, 8) + 1.0, "tensor-to-kernel,kernel-optimize{target=gpu}")
    assert kinds(g) == {0: (4, "local"), 1: (2, "local"), 2: (4, "upcast")}  # one work-group of 4 x 2 threads
    g = _one_kernel(_f32(64, 1024) + 1.0, "tensor-to-kernel,kernel-optimize{target=gpu}")
    assert kinds(g) == {0: (64, "global"), 1: (256, "local"), 2: (4, "upcast")}


def test_a_host_target_keeps_a_small_matmul_on_one_core() -> None:
    """The host cpu's targets split a kernel across cores only from `parallel_min_work` iterations (1 << 19): an
    LSTM's input projection (20 x 64 -> 256, 327,680 iterations) stays on one core, where the test targets'
    default (1 << 15) splits it; a 4x larger one is split on the host too."""
    from uopir.backends.cpu.runtime import host_target
    host = host_target("c").derive(threads=2)
    x, w = _f32(20, 64), _f32(64, 256)
    k = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop)))[0]
    assert not any(o.kind == "global" for o in heuristic_opts(k, host))
    assert any(o.kind == "global" for o in heuristic_opts(k, host.derive(parallel_min_work=CPU.parallel_min_work)))
    big = kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((_f32(80, 64) @ w).uop)))[0]
    assert any(o.kind == "global" for o in heuristic_opts(big, host))


def test_a_target_splits_by_what_a_kernel_does_per_iteration() -> None:
    """`parallel_min_work_by_kind`: with rows for elementwise kernels (a load and a store per iteration) from 2^17
    iterations and depthwise windows from 2^18, the host's target splits those from there, where a register-tiled
    1x1 conv of as many iterations (each a vector FMA: "reduce") stays on one core below its 2^19; the host's own
    table has the elementwise row, not the window one; a row of another kind is refused."""
    from uopir.backends.cpu.runtime import host_target
    plain = host_target("c").derive(threads=2)
    host = plain.derive(parallel_min_work_by_kind=(("elementwise", 1 << 17), ("window", 1 << 18)))

    def split(t: Tensor, target: Target = host) -> bool:
        return any(o.kind == "global" for o in heuristic_opts(_one_kernel(t, "tensor-to-kernel,kernel-simplify"),
                                                              target))
    assert split(_f32(64, 2048) * 2.0) and not split(_f32(64, 1024) * 2.0)  # 2^17 / 2^16
    assert split(_f32(1, 32, 34, 34).conv2d(_f32(32, 1, 3, 3), groups=32))  # 294,912
    assert not split(_f32(1, 32, 18, 34).conv2d(_f32(32, 1, 3, 3), groups=32))  # 147,456
    assert not split(_f32(1, 64, 8, 8).conv2d(_f32(64, 64, 1, 1)))  # a 1x1 conv: 2^18 ("reduce")
    assert split(_f32(64, 1024) * 2.0, plain) and not split(_f32(64, 512) * 2.0, plain)  # the host's 2^16
    assert not split(_f32(1, 32, 34, 34).conv2d(_f32(32, 1, 3, 3), groups=32), plain)
    with pytest.raises(ValueError, match="parallel_min_work_by_kind row .'pointwise', 1.: the kind must be one of"):
        host.derive(parallel_min_work_by_kind=(("pointwise", 1),))


def test_noopt_environment_turns_the_heuristic_off(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = _f32(8, 32), _f32(32, 16)
    base = PassManager.parse("tensor-to-kernel").run(UOp.sink((x @ w).uop))
    monkeypatch.setenv("UOPIR_NOOPT", "1")
    assert PassManager.parse("kernel-optimize").run(base) is base
    monkeypatch.setenv("UOPIR_NOOPT", "0")
    assert PassManager.parse("kernel-optimize").run(base) is not base
    assert PassManager.parse("kernel-optimize{strategy=none}").run(base) is base


def test_optimizing_twice_changes_nothing_more() -> None:
    once = PassManager.parse("tensor-to-kernel,kernel-optimize").run(UOp.sink((_f32(8, 32) @ _f32(32, 16)).uop))
    assert PassManager.parse("kernel-optimize").run(once) is once
    expanded = PassManager.parse("kernel-expand").run(once)
    assert PassManager.parse("kernel-optimize").run(expanded) is expanded  # vectors: already optimized


def test_the_pass_runs_on_a_lone_kernel_and_under_the_anchor() -> None:
    prog = PassManager.parse("tensor-to-kernel").run(UOp.sink((_f32(8, 32) @ _f32(32, 16)).uop))
    (k,) = kernels(prog)
    direct = PassManager.parse("kernel-optimize,kernel-expand").run(k)
    (anchored,) = kernels(PassManager.parse("kernel(kernel-optimize,kernel-expand)").run(prog))
    assert direct is anchored


# ---- opts and their errors -------------------------------------------------------------------------------------------
def _matvec() -> UOp:
    return kernels(PassManager.parse("tensor-to-kernel").run(UOp.sink((_f32(4, 6) @ _f32(6, 1)).uop)))[0]


def test_a_split_rewrites_the_index_and_keeps_the_reduction_order() -> None:
    k = apply_opt(_matvec(), Opt("unroll", 1, 3))
    (red,) = [u for u in k.toposort() if u.op is kernel.REDUCE]
    assert [kinds(k)[r.arg[0]] for r in red.src[1:]] == [(2, "reduce"), (3, "unroll")]  # r_o, r_i in r's place
    text = print_ir(k)
    assert "core.mul" in text and "kind = unroll" in text


def test_opts_that_do_not_apply_are_errors() -> None:
    k = _matvec()
    with pytest.raises(OptError, match="does not divide"):
        apply_opt(k, Opt("upcast", 0, 3))
    with pytest.raises(OptError, match="ranges on it"):
        apply_opt(k, Opt("upcast", 9, 2))
    with pytest.raises(OptError, match="only an output"):
        apply_opt(k, Opt("global", 1))
    with pytest.raises(OptError, match="already"):
        apply_opt(apply_opt(k, Opt("upcast", 0, 2)), Opt("upcast", 2, 2))


def test_unknown_target_is_a_pipeline_error() -> None:
    with pytest.raises(IRError, match="unknown target 'nope'"):
        PassManager.parse("kernel-optimize{target=nope}").run(_matvec())


_BAD_UNROLL = """\
%0 = kernel.param {idx = 0} : ptr<f32, global>
%1 = kernel.param {idx = 1} : ptr<f32, global>
%2 = core.const 2 : index
%3 = kernel.range %2 {axis = 0, kind = unroll} : index
%4 = core.const 3 : index
%5 = kernel.range %4 {axis = 1, kind = reduce} : index
%6 = core.mul %3, %4 : index
%7 = core.add %6, %5 : index
%8 = kernel.index %1, %7 : ptr<f32, global>
%9 = kernel.load %8 : f32
%10 = kernel.reduce %9, %3, %5 {op = add} : f32
%11 = core.const 0 : index
%12 = kernel.index %0, %11 : ptr<f32, global>
%13 = kernel.store %12, %10
kernel.def %13 {name = "k"}
"""


def test_an_unroll_range_that_is_not_innermost_in_its_reduction_is_a_located_error() -> None:
    k = parse_ir(_BAD_UNROLL, "bad.uop")
    with pytest.raises(IRError, match=r"bad.uop:11:\d+: error: kernel-expand: the upcast/unroll ranges"):
        expand_kernel(k)
    with pytest.raises(IRError, match="must be its last"):
        PassManager.parse("kernel-expand").run(k)


def test_an_upcast_range_without_a_constant_extent_is_a_located_error() -> None:
    text = _BAD_UNROLL.replace("%2 = core.const 2 : index", '%2 = kernel.var {name = "n", min = 1, max = 2} : index')
    with pytest.raises(IRError, match=r"bad.uop:4:\d+: error: kernel-expand: an unroll range needs a constant"):
        expand_kernel(parse_ir(text, "bad.uop"))


# ---- bit-identical float reductions ----------------------------------------------------------------------------------
def test_an_unrolled_float_sum_accumulates_in_the_original_order() -> None:
    # 1e8 + 1 + 1 + ... in f32: sequentially every +1 is lost; summing the unrolled lanes first would keep them
    vals = np.array([1e8] + [1.0] * 15, np.float32).reshape(1, 16)
    t = Tensor(vals).sum(1)
    out = lowered_matches(UOp.sink(t.uop), pipeline("tensor-to-kernel,kernel-optimize,kernel-expand"))
    assert lanes_left(out) == [] and kinds(kernels(out)[0]) == {}  # fully unrolled: one lane reduction
    k = kernels(out)[0]
    res = np.zeros(1, np.float32)
    run_kernel(k, [res, vals.reshape(-1)])
    assert res[0] == np.float32(1e8)  # not 1e8 + 15


# ---- the interpreter's vector semantics ------------------------------------------------------------------------------
def test_vector_load_store_and_lane_reduction_in_the_interpreter() -> None:
    f32, idx = dtypes.float32, dtypes.index
    p0, p1 = (UOp(kernel.PARAM, f32.ptr(), (), i) for i in (0, 1))
    r = UOp(kernel.RANGE, idx, (UOp.const(idx, 2),), (0, "loop"))
    four = UOp.const(idx, 4)
    v = UOp(kernel.LOAD, f32.vec(4), (UOp(kernel.INDEX, f32.ptr(), (p1, r * four)),))  # p1[4r .. 4r+3]
    doubled = v * UOp.const(f32.vec(4), 2.0)
    pair = UOp(kernel.REDUCE, f32.vec(2), (doubled,), "add")  # lanes (0,1) and (2,3) fold
    st_ = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, f32.ptr(), (p0, r * UOp.const(idx, 2))), pair))
    kdef = UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st_, r)),), "k")
    verify(kdef)
    src = np.arange(8, dtype=np.float32)
    out = np.zeros(4, np.float32)
    run_kernel(kdef, [out, src])
    np.testing.assert_array_equal(out, [2, 10, 18, 26])


def test_a_reduce_with_lanes_that_do_not_divide_is_a_verifier_error() -> None:
    f32 = dtypes.float32
    x = UOp(core.VECTORIZE, f32.vec(3), tuple(UOp.const(f32, float(i)) for i in range(3)))
    bad = UOp(kernel.REDUCE, f32.vec(2), (x,), "add")
    with pytest.raises(IRError, match="result lanes 2 must divide the operand's 3 lanes"):
        verify(UOp.sink(bad))


def test_softmax_gets_partial_accumulators_for_its_max_and_its_sum() -> None:
    """Softmax over rows is one kernel: a max loop, a sum-of-exp loop and the output loop (a vector upcast). The two
    reductions depend on no upcast range, so each gets its own accumulators (the sum's, not only the first one's)."""
    k = _one_kernel(_whole(64, 1024).softmax(-1), "tensor-to-kernel")
    (mx, sm) = [u for u in k.toposort() if u.op is kernel.REDUCE]
    assert (mx.arg, sm.arg) == ("max", "add")
    opts = heuristic_opts(k, ACC)
    assert Opt("upcast", sm.src[-1].arg[0], 64) in opts and Opt("upcast", mx.src[-1].arg[0], 64) in opts
    assert opts == [Opt("stash", 3), Opt("upcast", 1, 32), Opt("upcast", 2, 64), Opt("upcast", 3, 64), Opt("global", 0),
                    Opt("upcast", 4, 64)]
    # a sum of exps is not exact in another order (the values: the frontend's tests on c); the lanes are
    (k,) = kernels(pipeline("tensor-to-kernel,kernel-optimize{target=test-acc},kernel-expand")(
        UOp.sink(_whole(64, 1024).softmax(-1).uop)))
    red = [u for u in k.toposort() if u.op is kernel.REDUCE]
    assert sorted(str(u.dtype) for u in red) == ["f32", "f32", "vector<64xf32>", "vector<64xf32>"]


def _same_softmax_bits(x: np.ndarray, stashed: UOp, plain: UOp) -> np.ndarray:
    """The stashed softmax kernel's output over x, after asserting the plain schedule gives the same bits."""
    outs = []
    for kd in (stashed, plain):
        out = np.full(x.size, 7, np.float32)
        run_kernel(kd, [out, x.reshape(-1)])
        outs.append(out.reshape(x.shape))
    np.testing.assert_array_equal(outs[0], outs[1])
    return outs[0]


def test_softmax_stashes_each_exp_once_and_computes_the_same_bits() -> None:
    """`stash`: the sum's exp(x - max) is stored into a one-row scratch by a fill loop and read back by the sum and the
    output, one exp per element instead of two; the sums keep their order, so the values are the same bits as the
    schedule without it (rows of -inf, +inf and huge values included), and numpy's softmax to rounding."""
    x = np.random.default_rng(5).standard_normal((64, 1024)).astype(np.float32) * 20
    x[1] = -np.inf
    x[2, ::3] = -np.inf
    x[3, 9], x[4, 1], x[4, 2] = np.inf, 3e38, -3e38
    k = _one_kernel(Tensor(x).softmax(-1), "tensor-to-kernel")
    stashed = apply_opts(k, heuristic_opts(k, ACC))
    plain = apply_opts(k, heuristic_opts(k, ACC, stash=False))
    assert [sum(u.op is core.EXP2 for u in s.toposort()) for s in (stashed, plain)] == [1, 2]
    assert heuristic_opts(k, CPU) == heuristic_opts(k, CPU, stash=False)  # one core: no global range to fill under
    out = _same_softmax_bits(x, stashed, plain)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
    # (exp(d) to rounding times |d|: arguments reach -150 here)
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=3e-5, atol=1e-30)


def test_softmax_over_rows_no_vector_divides_stashes_its_exp_body_and_tail() -> None:
    """A ViT's attention rows of 197: the sum and the output are cut into a body of 192 and a tail of 5, and the
    fill loop gets the same tail, so each element's exp is computed once (the fill's body and its tail: 2 exp2 ops,
    not the sum's and the output's 4), with the same bits as the schedule without the stash (rows of -inf, +inf,
    huge values) and numpy's softmax to rounding."""
    x = np.random.default_rng(7).standard_normal((16, 197)).astype(np.float32) * 20
    x[1] = -np.inf
    x[2, ::3] = -np.inf
    x[3, 196], x[4, 1], x[4, 195] = np.inf, 3e38, -3e38
    k = _one_kernel(Tensor(x).softmax(-1), "tensor-to-kernel")
    o = heuristic_opts(k, ACC)
    assert o[:2] == [Opt("stash", 3), Opt("tail", 4, 16)] and Opt("upcast", 5, 32) in o
    stashed, plain = apply_opts(k, o), apply_opts(k, heuristic_opts(k, ACC, stash=False))
    assert [sum(u.op is core.EXP2 for u in s.toposort()) for s in (stashed, plain)] == [2, 4]
    out = _same_softmax_bits(x, stashed, plain)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=3e-5, atol=1e-30)


def test_a_matrix_vector_product_vectorizes_the_reduction_or_a_longer_output_run() -> None:
    """Batch 1: with the weight laid out [N, K] no output range is a vector (each lane another weight row), so the
    reduction is (2 vectors of partial sums beside 4 rows sharing each vector of x; a dot-product tile); laid out
    [K, N], the outputs are, in 2.5 vectors (40 of 200) instead of one chain through half a vector."""
    x = _whole(1, 256)
    nk = _one_kernel(x @ _whole(64, 256).T, "tensor-to-kernel")
    assert heuristic_opts(nk, ACC) == [Opt("upcast", 0, 4), Opt("upcast", 1, 32)]  # 64 x 256: too little for threads
    big = _one_kernel(_whole(1, 1024) @ _whole(1000, 1024).T, "tensor-to-kernel")
    assert heuristic_opts(big, ACC) == [Opt("upcast", 0, 4), Opt("upcast", 1, 32), Opt("global", 0)]
    k = _reduce_kernel(x @ _whole(64, 256).T, "test-acc")
    assert sorted(str(u.dtype) for u in k.toposort() if u.op is kernel.REDUCE) == ["vector<128xf32>",
                                                                                   "vector<4xf32>"]
    # an SE conv's expand (48 -> 1152): 3 steps of 16 lanes beside 4 rows; 221 KiB of weight: one core
    se = _one_kernel(_whole(1, 48) @ _whole(1152, 48).T, "tensor-to-kernel")
    assert heuristic_opts(se, ACC) == [Opt("upcast", 0, 4), Opt("upcast", 1, 16)]
    _reduce_kernel(_whole(1, 48) @ _whole(96, 48).T, "test-acc")
    kn = _one_kernel(x @ _whole(256, 200), "tensor-to-kernel")
    assert heuristic_opts(kn, ACC) == [Opt("upcast", 0, 40), Opt("unroll", 1, 4), Opt("global", 0)]
    _reduce_kernel(x @ _whole(256, 200), "test-acc")
    # a global pool's short row (196 = 4 x 49) shares its vector with 3 more channels; a 7x7 pool's 49 gives no
    # vector: 16 channels are the lanes
    assert heuristic_opts(_one_kernel(_whole(64, 196).sum(1), "tensor-to-kernel"), ACC)[:2] == [
        Opt("upcast", 0, 4), Opt("upcast", 1, 4)]
    assert heuristic_opts(_one_kernel(_whole(64, 49).sum(1), "tensor-to-kernel"), ACC)[:1] == [Opt("upcast", 0, 16)]
    _reduce_kernel(_whole(64, 196).sum(1), "test-acc")
    _reduce_kernel(_whole(64, 49).sum(1), "test-acc")


def test_a_row_no_vector_divides_gets_a_vector_body_and_a_tail() -> None:
    """Softmax over a ViT's 197-wide attention rows: the output row and both reductions are cut into a body of 192
    (vectors: the row upcast, the max and the sum with partial results) and a tail of 5. A row minus its max plus
    its sum, on integer-valued inputs (exact in any order), computes the same values, interpreted."""
    k = _one_kernel(_whole(6, 197, 197).softmax(-1), "tensor-to-kernel")
    opts = heuristic_opts(k, ACC)
    assert opts[:3] == [Opt("tail", 2, 16), Opt("tail", 3, 16), Opt("tail", 4, 16)]
    assert Opt("upcast", 5, 32) in opts  # the body of the output row: 6 x 2 vectors, as a 1024-wide row gets
    cut = apply_opts(k, opts[:3])
    assert sorted(e for e, kind in kinds(cut).values() if kind == "reduce") == [5, 5, 192, 192]
    assert [u.arg for u in cut.toposort() if u.op in (core.MAX, core.ADD) and u.dtype is dtypes.float32] == [None] * 2
    # the values (a sum of exps is exact in no other order: softmax's, on c and llvm, in the frontend's tests)
    x = _whole(6, 197)
    _reduce_kernel(x - x.max(1, keepdim=True) + x.sum(1, keepdim=True), "test-acc")
    # where a vector divides (or a quarter of one: a pool's 196), or the sum's order must stay, no tail
    assert not any(o.kind == "tail" for o in heuristic_opts(_one_kernel(_whole(64, 196).sum(1), "tensor-to-kernel"),
                                                             ACC))
    assert [o for o in heuristic_opts(k, WIDE) if o.kind == "tail"] == [Opt("tail", 2, 16), Opt("tail", 3, 16)]
    with pytest.raises(OptError, match="tail by 16"):
        apply_opt(_one_kernel(_whole(6, 192).softmax(-1), "tensor-to-kernel"), Opt("tail", 1, 16))


@pytest.mark.parametrize("opt", [Opt("upcast", 0, 16), Opt("unroll", 2, 4), Opt("global", 1), Opt("outer", 0),
                                 Opt("pack", 3), Opt("local", 0, 8), Opt("group", 1, 32), Opt("tail", 2, 16),
                                 Opt("regroup", 2)])
def test_opt_text_round_trips(opt: Opt) -> None:
    assert Opt.parse(str(opt)) == opt


@pytest.mark.parametrize("text", ["", "upcast 0", "upcast 0 by", "upcast x by 4", "global 1 by 2", "tile 0 by 4",
                                  "upcast 0 times 4", "upcast -1 by 4"])
def test_opt_parse_rejects_bad_text(text: str) -> None:
    with pytest.raises(OptError, match="not an opt"):
        Opt.parse(text)


def test_a_row_minus_its_mean_keeps_the_rows_outermost() -> None:
    """A layernorm's centring (64 x 256, each row minus its mean): the columns are a vector upcast and the mean's
    range keeps partial results, which is no second tiled output range, so the columns do not become the outer
    loop: the rows go to the threads and each row's mean is computed once, not once per block of columns (the
    TransformerEncoder's r_64_256 kernels)."""
    x = _whole(64, 256)
    opts = heuristic_opts(_one_kernel(x - x.mean(-1, keepdim=True), "tensor-to-kernel"), ACC)
    assert opts == [Opt("upcast", 1, 32), Opt("upcast", 2, 32), Opt("global", 0)]


def test_a_peeled_layernorm_splits_its_interior_rows_and_keeps_each_row_s_statistics_once() -> None:
    """A ViT's first layernorm, of concat(class token, patches) + position: kernel-peel cuts the class row from the
    196 patch rows. The interior's rows go to the threads (not the class row's columns, which left the interior
    unsplit on every core), and its columns are not made the outer loop: the row's mean and variance vary along
    no column, so every block of columns would compute them again (the ViT's r_197_384 kernels: 0.6 ms)."""
    from uopir.passes.kernel.peel import peel_kernel
    from uopir.passes.kernel.simplify import simplify_kernel
    x = _whole(1, 64).cat(_whole(64, 196).T, dim=0) + _whole(197, 64)
    c = x - x.mean(-1, keepdim=True)
    k = peel_kernel(simplify_kernel(_one_kernel(c / ((c * c).mean(-1, keepdim=True) + 1e-6).sqrt(),
                                                "tensor-to-kernel")))
    opts = heuristic_opts(k, ACC)
    assert not any(o.kind == "outer" for o in opts)
    (g,) = [o for o in opts if o.kind == "global"]
    assert kinds(apply_opts(k, opts))[g.axis] == (49, "global")  # 196 rows in tiles of 4


def test_a_short_softmax_row_keeps_one_vector_of_partial_results() -> None:
    """A TransformerEncoder's softmax over 64 tokens: its max and its sum run 4 vectors, fewer than ACC_MIN_STEPS
    iterations of 4 vectors, so each keeps one vector of partial results (its exps vector code) rather than a
    scalar unroll of libm calls (0.26 -> ~0.05 ms per kernel)."""
    k = _one_kernel(_whole(8, 64, 64).softmax(-1), "tensor-to-kernel")
    (mx, sm) = [u for u in k.toposort() if u.op is kernel.REDUCE]
    opts = heuristic_opts(k, ACC)
    assert Opt("upcast", mx.src[-1].arg[0], 16) in opts and Opt("upcast", sm.src[-1].arg[0], 16) in opts
    assert heuristic_opts(_one_kernel(_whole(8, 16).sum(-1), "tensor-to-kernel"), ACC)[:1] != [Opt("upcast", 1, 16)]


def _se_projection(cin: int, blocks: int, hw: int) -> UOp:
    """A 1x1 conv's kernel after a squeeze-excite block: out[b][o][p] = sum_c x[c][p] * s[c] * w[b][c][o] (weights
    in blocks of 16 output channels, as nn_ops lays them out), p over a hw x hw plane."""
    p, text = hw * hw, []
    for i, line in enumerate([
            "kernel.param {idx = 0} : ptr<f32, global>", f"core.const {blocks} : index", "kernel.range %1 {axis = 0}"
            " : index", f"core.const {16 * p} : index", "core.mul %2, %3 : index", "core.const 16 : index",
            "kernel.range %5 {axis = 2} : index", f"core.const {p} : index", "core.mul %6, %7 : index",
            "core.add %4, %8 : index", "kernel.range %7 {axis = 1} : index", "core.add %9, %10 : index",
            "kernel.index %0, %11 : ptr<f32, global>", "kernel.param {idx = 1} : ptr<f32, global>",
            f"core.const {cin} : index", "kernel.range %14 {axis = 3, kind = reduce} : index",
            "core.mul %15, %7 : index", "core.add %16, %10 : index", "kernel.index %13, %17 : ptr<f32, global>",
            "kernel.load %18 : f32", "kernel.param {idx = 2} : ptr<f32, global>",
            "kernel.index %20, %15 : ptr<f32, global>", "kernel.load %21 : f32", "core.mul %19, %22 : f32",
            "kernel.param {idx = 3} : ptr<f32, global>", f"core.const {16 * cin} : index", "core.mul %2, %25 : index",
            "core.mul %15, %5 : index", "core.add %26, %27 : index", "core.add %28, %6 : index",
            "kernel.index %24, %29 : ptr<f32, global>", "kernel.load %30 : f32", "core.mul %23, %31 : f32",
            "kernel.reduce %32, %15 {op = add} : f32", "kernel.store %12, %33", "kernel.end %34, %2, %6, %10"]):
        text.append(f"%{i} = {line}")
    return parse_ir("\n".join(text) + '\nkernel.def %35 {name = "r_se"}\n')


def test_a_squeeze_excite_scale_is_multiplied_into_the_weight_vector_first() -> None:
    """`regroup` (kernel/regroup.py): under a channel tile (the weights' 16 output channels the vector) the
    per-channel scale multiplies the weight vector, x * (w * s), so the input stays a broadcast read from memory; a
    host target asks for it, the generic cpu (sums in order, compared bit for bit) does not. Same values to
    rounding; a second regroup finds nothing to do."""
    k = _se_projection(16, 2, 7)
    assert heuristic_opts(k, HOST)[0] == Opt("regroup", 2)
    assert all(o.kind != "regroup" for o in heuristic_opts(k, CPU))
    new = apply_opt(k, Opt("regroup", 2))
    prod = next(u for u in new.toposort() if u.op is kernel.REDUCE).src[0]
    params = [[p.arg for p in f.toposort() if p.op is kernel.PARAM] for f in (prod.src[0], *prod.src[1].src)]
    assert params == [[1], [3], [2]]  # x * (w * s)
    rng = np.random.default_rng(0)
    x, s, w = (rng.standard_normal(n).astype(np.float32) for n in (16 * 49, 16, 2 * 16 * 16))
    want = np.einsum("cp,c,bco->bop", x.reshape(16, 49), s, w.reshape(2, 16, 16)).reshape(-1)
    for kd in (k, apply_opts(k, heuristic_opts(k, HOST))):
        out = np.full(2 * 16 * 49, 7, np.float32)
        run_kernel(kd, [out, x, s, w])
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(OptError, match="no sum of a product"):
        apply_opt(new, Opt("regroup", 2))
