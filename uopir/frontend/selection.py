"""Ordering and selection ops of the Tensor: sort / argsort / topk, cummax / cummin / logcumsumexp, masked_select /
nonzero, each a decomposition into broadcasting comparisons, masked reductions and `pick`.

- sort is a rank (comparison-count) sort, not a sorting network: along the sorted axis every pair is compared once
  ((..., n, n) booleans), the rank of element i is the number of elements that go before it (smaller, or equal and
  earlier: a stable order), and output position r picks the element whose rank is r. O(n^2) work per row but one
  fused kernel for the ranks and one for the gather, where a bitonic network needs log^2 n dependent stages; it is
  exact for every dtype (values move bit for bit through `pick`) and needs no padding value. A topk of few of a long
  row skips the full sort (same order): one pick per round for k <= TOPK_ROUNDS_MAX, a radix select over order keys
  for more of a float32/int32 row of >= TOPK_SELECT_MIN, else each block's first k and then those candidates.
- Order: NaN sorts after +inf ascending and first descending (torch), NaNs equal to each other; -0.0 and +0.0 are
  equal (they keep their input order). Ties keep input order in both directions (torch's stable=True).
- Indices are int32 (tinygrad's default int; torch gives int64).
- cummax / cummin follow torch: the index is the last position where the running extreme is reached (torch
  updates on >=), and a NaN, once seen, is the running value and the last NaN its index.
- masked_select and nonzero have a data-dependent length: without `size` they realize the mask's count first
  (`.item()`, as tinygrad does), then build the output of that length; with `size` nothing runs early.

Each op's body is its method in the mixin `Selection` (Tensor inherits it); the pieces several methods share are
module functions (`sorted_first` for sort, argsort and topk, `running_extreme` for cummax and cummin, the rank and
permutation steps) that work through the public methods of the tensors they are given. Tensor is imported only for
type checking (tensor.py imports this module, never the reverse): new tensors come from `type(x)`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.frontend import dtype_promotion as P
from uopir.frontend.indexing import pick
from uopir.frontend.shapes import broadcast_shape, norm_axis
from uopir.ir.dtype import dtypes

if TYPE_CHECKING:
    from uopir.frontend.tensor import Scalar, Tensor

# a topk of at most this many of a row of at least 4x as many picks one per round (_first_by_rounds)
TOPK_ROUNDS_MAX = 8
# a topk of more of a float32 or int32 row at least this long selects by its order keys' bits (_first_by_select)
TOPK_SELECT_MIN = 1024
# a selection's kept positions are counted per block of this many (_kept_positions)
COMPACT_BLOCK = 16


def _arange(x: Tensor, n: int, shape: tuple[int, ...]) -> Tensor:
    return type(x).arange(n, dtype=P.DEFAULT_INT, device=x.device).reshape(shape)


def _key(x: Tensor) -> Tensor:
    return x.cast(dtypes.uint8) if x.dtype.is_bool else x


def _goes_before(a: Tensor, b: Tensor, descending: bool) -> Tensor:
    """a strictly before b in the sort order (NaN is the largest value)."""
    if descending:
        out = a > b
        return out | (a.isnan() & b.isnan().logical_not()) if a.dtype.is_float else out
    out = a < b
    return out | (b.isnan() & a.isnan().logical_not()) if a.dtype.is_float else out


def _ranks(x: Tensor, descending: bool) -> Tensor:
    """Rank of each element along the last axis in the stable sort order (int32, a permutation of 0..n-1)."""
    n = x.shape[-1]
    k = _key(x)
    xi, xj = k.unsqueeze(-1), k.unsqueeze(-2)  # [..., i, j]: element i against element j
    same = xi == xj
    if k.dtype.is_float:
        same = same | (xi.isnan() & xj.isnan())
    earlier = _arange(x, n, (1, n)) < _arange(x, n, (n, 1))  # j < i
    before = _goes_before(xj, xi, descending) | (same & earlier)
    return before.sum(-1).cast(P.DEFAULT_INT)


def _permute_last(x: Tensor, ranks: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """The first `count` elements of x along its last axis in rank order, and their positions (int32)."""
    n = x.shape[-1]
    onehot = ranks.unsqueeze(-2) == _arange(x, count, (count, 1))  # [..., r, i]: element i goes to position r
    pos = _arange(x, n, (n,)).expand(onehot.shape)
    vals = x.unsqueeze(-2).expand(onehot.shape)
    return pick(vals, onehot, (onehot.ndim - 1,)), pick(pos, onehot, (onehot.ndim - 1,))


def sorted_first(x: Tensor, d: int, descending: bool, count: int) -> tuple[Tensor, Tensor]:
    """The first `count` elements along the (normalized) dim d of a tensor of at least 1 dim in stable sort order,
    and their int32 indices: sort, argsort and topk."""
    n = x.shape[d]
    t = x.transpose(d, -1)
    if n <= 1:  # nothing to order (topk may still keep 0 of 1)
        keep = tuple((0, s) for s in t.shape[:-1]) + ((0, count),)
        vals, idx = t.shrink(keep), t.zeros_like(dtype=P.DEFAULT_INT).shrink(keep)
    elif isinstance(n, int) and count <= TOPK_ROUNDS_MAX and n >= 4 * TOPK_ROUNDS_MAX:
        vals, idx = _first_by_rounds(t, descending, count)
    elif isinstance(n, int) and n >= TOPK_SELECT_MIN and x.dtype in (dtypes.float32, dtypes.int32):
        vals, idx = _first_by_select(t, descending, count)
    elif (block := _topk_block(n, count)) is not None:
        vals, idx = _first_of_blocks(t, descending, count, block)
    else:
        vals, idx = _permute_last(t, _ranks(t, descending), count)
    return vals.transpose(d, -1), idx.transpose(d, -1)


def _first_by_rounds(t: Tensor, descending: bool, count: int) -> tuple[Tensor, Tensor]:
    """The first `count` along the last axis in stable order, one per round: the extreme value of the elements not
    yet picked, then the lowest index that holds it (a NaN, the largest value: the lowest index of a NaN not yet
    picked, first when descending, once no other value is left when ascending). Two or three plain reductions of n
    per round (64x1000 k=5: 15 kernels of 64K elements), where a rank sort compares n**2 pairs."""
    n = t.shape[-1]
    k = _key(t)
    d = k.dtype
    j = _arange(t, n, (n,))
    nan = k.isnan() if d.is_float else None
    if d.is_float:
        fill = float("-inf") if descending else float("inf")
    else:
        fill = d.min if descending else d.max
    picked: list[Tensor] = []
    for _ in range(count):
        free = None
        for p in picked:
            free = (j != p) if free is None else free & (j != p)
        avail = free if nan is None else (nan.logical_not() if free is None else free & nan.logical_not())
        masked = k if avail is None else avail.where(k, fill)
        # realized alone: fused with the index's reduction below, the max ran as one scalar chain (64x1000 on llvm:
        # 325-509 us per round -> 16)
        m = (masked.max(-1, keepdim=True) if descending else masked.min(-1, keepdim=True)).contiguous()
        hit = k == m if avail is None else avail & (k == m)
        if nan is None:
            i = hit.where(j, n).min(-1, keepdim=True)
        else:  # the first free NaN and the first hit in one reduction: the one that goes first keyed j, the other j + n
            free_nan = nan if free is None else free & nan
            first, then = (free_nan, hit) if descending else (hit, free_nan)
            i = first.where(j, then.where(j + n, 2 * n)).min(-1, keepdim=True)
            i = (i < n).where(i, (i < 2 * n).where(i - n, n))
        picked.append(i)
    idx = picked[0].cat(*picked[1:], dim=-1) if count > 1 else picked[0]
    onehot = idx.unsqueeze(-1) == j  # [..., r, i]
    return pick(t.unsqueeze(-2).expand(onehot.shape), onehot, (onehot.ndim - 1,)), idx


def _order_key(t: Tensor, descending: bool) -> Tensor:
    """uint32 keys whose unsigned order is the sort order reversed (the first element has the largest key): a float's
    bits with the sign flipped (negatives all flipped), -0.0 as +0.0 and every NaN one largest value; an int32's
    with its sign bit flipped. Ascending takes the complement."""
    if t.dtype.is_float:
        u = (t == 0).where(0.0, t).bitcast(dtypes.uint32)
        key = (u >= 0x80000000).where(~u, u | 0x80000000)
        key = t.isnan().where(0xFFFFFFFF, key)
    else:
        key = t.bitcast(dtypes.uint32) ^ 0x80000000
    return key if descending else ~key


def _first_by_select(t: Tensor, descending: bool, count: int) -> tuple[Tensor, Tensor]:
    """The first `count` along the last axis in stable order by a radix select: the count-th largest order key
    found one bit per round (32 counts of n), the elements above it and the first ties at it kept in index order
    (two running sums; their positions by _kept_positions, their values a gather), and only those `count`
    rank-sorted (a TopK of 100 of 8400: ~1.2M comparisons where the blocks take ~7M)."""
    n = t.shape[-1]
    key = _order_key(t, descending).contiguous()  # read by 32 rounds and the ties' running count
    prefix = key[..., :1] & 0  # (..., 1) uint32 zeros
    for b in range(31, -1, -1):
        cand = prefix | (1 << b)
        # at least count keys >= cand: at most n - count below it (one compare per key; int32 lanes, not int64)
        prefix = ((key < cand).sum(-1, keepdim=True, dtype=P.DEFAULT_INT) <= n - count).where(cand, prefix)
    above = key > prefix
    ties = key == prefix
    need = count - above.sum(-1, keepdim=True, dtype=P.DEFAULT_INT)
    sel = above | (ties & (ties.cumsum(-1) <= need))  # exactly count per row
    ki = _kept_positions(sel, count)
    kv = _gather_last(t, ki)
    vals, order = _permute_last(kv, _key_ranks(_gather_last(key, ki)), count)
    oh = order.unsqueeze(-1) == _arange(t, count, (count,))  # [..., r, s]: the r-th is kept element s
    return vals, pick(ki.unsqueeze(-2).expand(oh.shape), oh, (oh.ndim - 1,))


def _key_ranks(keys: Tensor) -> Tensor:
    """The stable rank (int32) of each element along the last axis by its order key (_order_key: the first element
    has the largest key; equal keys, as -0.0 and +0.0 or two NaNs, keep index order): one unsigned compare per pair
    where _ranks on the values also tests for NaN."""
    n = keys.shape[-1]
    ki, kj = keys.unsqueeze(-1), keys.unsqueeze(-2)  # [..., i, j]: element i against element j
    earlier = _arange(keys, n, (1, n)) < _arange(keys, n, (n, 1))  # j < i
    return ((kj > ki) | ((kj == ki) & earlier)).sum(-1, dtype=P.DEFAULT_INT)


def _kept_positions(sel: Tensor, count: int) -> Tensor:
    """The positions (int32, ascending) of the `count` set elements of each row of the bool `sel` (exactly `count`
    set per row): the r-th kept is at the number of positions whose running count of kept elements is at most r.
    Counted per block of COMPACT_BLOCK (the blocks whose last running count is at most r, then the elements of the
    next block, read as a gather), not per element: a TopK of 100 of 8400 counts 100 x (525 + 16), where a one-hot
    pick of each kept element compares 100 x 8400 per output."""
    n = sel.shape[-1]
    nb = -(-n // COMPACT_BLOCK)
    run = sel.cast(P.DEFAULT_INT).cumsum(-1).cast(P.DEFAULT_INT)
    if nb * COMPACT_BLOCK != n:  # the padding's count is past every r
        run = run.pad([(0, 0)] * (run.ndim - 1) + [(0, nb * COMPACT_BLOCK - n)], value=count)
    blocks = run.reshape(run.shape[:-1] + (nb, COMPACT_BLOCK))
    past = _arange(sel, count, (count, 1)) + 1  # r + 1: `run < r + 1` is one compare where `run <= r` is two
    ends = blocks[..., -1].contiguous()  # each block's last running count, read as vectors
    whole = (ends.unsqueeze(-2) < past).sum(-1, dtype=P.DEFAULT_INT)  # (..., count): the blocks before the r-th
    part = _gather_last(blocks.transpose(-1, -2), whole.unsqueeze(-2).expand(blocks.shape[:-2] + (COMPACT_BLOCK,
                                                                                                  count)))
    inside = (part < past.reshape(1, count)).sum(-2, dtype=P.DEFAULT_INT)  # (..., count)
    return whole * COMPACT_BLOCK + inside


def _gather_last(x: Tensor, idx: Tensor) -> Tensor:
    """x at the int32 positions idx along the last axis (idx of x's leading shape and any last length): a one-hot
    pick that kernel-simplify's fold-one-hot turns into a load at the index."""
    n = x.shape[-1]
    onehot = idx.unsqueeze(-1) == _arange(x, n, (n,))  # [..., r, i]
    return pick(x.unsqueeze(-2).expand(onehot.shape), onehot, (onehot.ndim - 1,))


def _topk_block(n: int, count: int) -> int | None:
    """The block length for a topk of `count` of n in blocks (_first_of_blocks), or None where the one rank sort
    of n**2 comparisons costs less than twice n * block + (blocks * count)**2: the block near the cube root of
    2 n count**2 that minimizes the sum, a power of two above count (64x1000 k=5: 32, 17x fewer comparisons)."""
    if not isinstance(n, int) or count >= n // 4:
        return None
    block = 1 << max(1, round((2 * n * count * count) ** (1 / 3)).bit_length() - 1)
    while block <= count:
        block *= 2
    work = n * block + (-(-n // block) * count) ** 2
    return block if 2 * work < n * n else None


def _first_of_blocks(t: Tensor, descending: bool, count: int, block: int) -> tuple[Tensor, Tensor]:
    """The first `count` along the last axis in stable order: each block's own first `count` (a rank sort of
    `block`), then a rank sort of those candidates, block after block, so a tie keeps the earlier block's element
    first, which is the earlier index. The padding at the end sorts after every element (ascending: NaN, the
    largest value; descending: the lowest value), and equal ones before it come first, so it is never picked."""
    n = t.shape[-1]
    nb = -(-n // block)
    d = t.dtype
    if d.is_float:
        fill = float("-inf") if descending else float("nan")
    elif d.is_bool:
        fill = not descending
    else:
        fill = d.min if descending else d.max
    tp = t.pad([(0, 0)] * (t.ndim - 1) + [(0, nb * block - n)], value=fill) if nb * block != n else t
    tb = tp.reshape(t.shape[:-1] + (nb, block))
    bv, bi = _permute_last(tb, _ranks(tb, descending), count)  # (..., nb, count)
    bi = bi + _arange(t, nb, (nb, 1)) * block
    cv, ci = bv.flatten(-2), bi.flatten(-2)
    onehot = _ranks(cv, descending).unsqueeze(-2) == _arange(t, count, (count, 1))  # [..., r, candidate]
    shape = onehot.shape
    axis = (onehot.ndim - 1,)
    return pick(cv.unsqueeze(-2).expand(shape), onehot, axis), pick(ci.unsqueeze(-2).expand(shape), onehot, axis)


def running_extreme(x: Tensor, a: int, largest: bool) -> tuple[Tensor, Tensor]:
    """cummax / cummin of a tensor of at least 1 dim, along its (normalized, non-empty) axis a: (running extreme,
    int32 index of the last position that reached it)."""
    n = x.shape[a]
    t = x.transpose(a, -1)
    d = x.dtype
    fill = (d.min if largest else d.max) if not d.is_float else float("-inf" if largest else "inf")
    xj = t.unsqueeze(-2).expand(t.shape[:-1] + (n, n))  # [..., i, j] = x_j
    cols = _arange(x, n, (1, n))
    upto = cols <= _arange(x, n, (n, 1))  # j <= i
    masked = upto.where(xj, fill)
    run = (masked.max(-1) if largest else masked.min(-1)).unsqueeze(-1)
    reached = xj == run
    if d.is_float:
        reached = reached | (xj.isnan() & run.isnan())
    reached = reached & upto
    idx = reached.where(cols, -1).max(-1)
    vals = pick(xj, reached & (cols == idx.unsqueeze(-1)), (xj.ndim - 1,))  # x at that index: -0.0 vs 0.0 as torch
    return vals.transpose(a, -1), idx.transpose(a, -1)


class Selection:
    """Tensor's ordering and selection ops."""

    __slots__ = ()

    def cummax(self, axis: int = 0) -> tuple[Tensor, Tensor]:
        """(running max, int32 index of the last position reaching it) along axis; NaN propagates (torch)."""
        a = norm_axis(axis, self.ndim, self.shape)
        if self.ndim == 0 or self.shape[a] == 0:
            return self, self.zeros_like(dtype=P.DEFAULT_INT)
        return running_extreme(self, a, True)

    def cummin(self, axis: int = 0) -> tuple[Tensor, Tensor]:
        """(running min, int32 index of the last position reaching it) along axis; NaN propagates (torch)."""
        a = norm_axis(axis, self.ndim, self.shape)
        if self.ndim == 0 or self.shape[a] == 0:
            return self, self.zeros_like(dtype=P.DEFAULT_INT)
        return running_extreme(self, a, False)

    def logcumsumexp(self, axis: int = 0) -> Tensor:
        """log(cumsum(exp(x))) with each prefix shifted by its running max (taken as 0 where infinite)."""
        x = self if self.dtype.is_float else self.float()
        a = norm_axis(axis, x.ndim, x.shape)
        if x.ndim == 0 or x.shape[a] == 0:
            return x
        n = x.shape[a]
        t = x.transpose(a, -1)
        xj = t.unsqueeze(-2).expand(t.shape[:-1] + (n, n))
        upto = _arange(x, n, (1, n)) <= _arange(x, n, (n, 1))
        masked = upto.where(xj, float("-inf"))
        m = masked.max(-1, keepdim=True)
        m = m.isinf().where(0.0, m)
        out = (masked - m).exp().sum(-1, keepdim=True).log() + m
        return out.squeeze(-1).transpose(a, -1)

    def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        """(values, int32 indices) along dim; stable (ties keep input order), NaN sorts as the largest value."""
        d = norm_axis(dim, self.ndim, self.shape)
        if self.ndim == 0:
            return self, self.zeros_like(dtype=P.DEFAULT_INT)
        return sorted_first(self, d, descending, self.shape[d])

    def argsort(self, dim: int = -1, descending: bool = False) -> Tensor:
        return self.sort(dim, descending)[1]

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
        """The k largest (smallest) along dim as (values, int32 indices), always in sorted order, ties by index."""
        d = norm_axis(dim, self.ndim, self.shape)
        n = self.shape[d] if self.ndim else 1
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
            raise ValueError(f"topk: k={k!r} is out of range for dim {dim} of shape {self.shape} (0 <= k <= {n})")
        if self.ndim == 0:
            v, i = sorted_first(self.reshape(1), 0, largest, k)
            return (v.reshape(()), i.reshape(())) if k == 1 else (v, i)
        return sorted_first(self, d, largest, k)

    def masked_select(self, mask: Tensor, size: int | None = None, fill_value: Scalar = 0) -> Tensor:
        """The elements where mask (broadcast with self) is set, in row-major order, as a 1-d tensor.

        Without `size` the length is the number of set elements, which needs the data: the mask's sum is realized
        here (a separate run) before the output is built. With `size` the output has that length, truncated or
        padded with fill_value, and nothing runs early."""
        mask = mask if isinstance(mask, type(self)) else type(self)(mask, device=self.device)
        if not mask.dtype.is_bool:
            raise RuntimeError(f"masked_select expects a bool mask, got {mask.dtype!r}")
        shape = broadcast_shape(self.shape, mask.shape)
        xf, mf = self.broadcast_to(shape).flatten(), mask.broadcast_to(shape).flatten()
        n = xf.shape[0]
        k = (int(mf.sum().item()) if n else 0) if size is None else size
        if n == 0:
            return type(self).full((k,), fill_value, dtype=self.dtype, device=self.device)
        pos = mf.cumsum(0) - 1  # the output slot of each selected element
        onehot = mf.unsqueeze(0) & (pos.unsqueeze(0) == _arange(self, k, (k, 1)))  # [r, i]
        out = pick(xf.unsqueeze(0).expand(onehot.shape), onehot, (1,))
        if size is None:
            return out
        return (_arange(self, k, (k,)) < mf.sum()).where(out, fill_value).cast(self.dtype)

    def nonzero(self, size: int | None = None, fill_value: Scalar = 0) -> Tensor:
        """(count, ndim) int32 coordinates of the nonzero elements, row-major; without size the count is realized
        first."""
        nz = self if self.dtype.is_bool else self != 0
        if self.ndim == 0:
            k = int(nz.item()) if size is None else size
            return type(self).zeros(k, 0, dtype=P.DEFAULT_INT, device=self.device)
        n = nz.numel()
        flat = _arange(self, n, (n,)).masked_select(nz.flatten(), size, -1)
        coords, stride = [], n
        for s in self.shape:
            stride //= max(s, 1)
            coords.append((flat // max(stride, 1)) % max(s, 1))
        out = type(self).stack(*coords, dim=-1)
        if size is None:
            return out
        return (flat < 0).unsqueeze(-1).where(fill_value, out).cast(P.DEFAULT_INT)
