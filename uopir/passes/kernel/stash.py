"""The `stash` opt: a row's transcendental values computed once into scratch, not once per pass over the row.

A softmax row kernel sums exp(x - max) over a reduce range and then stores exp(x - max) / sum over an output range
of the same extent: the same expression over the same elements, computed twice (on a cpu the exp polynomial, not the
memory, is what a row of floats costs once it is in L1). `stash` on the reduce range's axis computes the reduction's
operand once per element, in a fill loop (a fresh `loop` range of the same extent), into a `kernel.local` laid out
[row][n], and both the reduction and the output read it back through `kernel.after`. The fill's end closes the fill
range only, so each row iteration reads the row it filled: exact under any order of the rows. On a cpu,
`private_rows` (kernel-to-device) then cuts the scratch to one row per core. The heuristic stashes only where the
row range is the global one (`stash_opts`; a row no vector divides, a ViT's 197, gets the fill cut into the same
body and tail as the sum); a kernel too small to split across cores keeps the exp twice.
"""
from __future__ import annotations

from uopir.dialects import core
from uopir.dialects import kernel as K
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import const_extent, linear_coeffs, range_deps

__all__ = ["stash_candidates", "stash", "row_ranges", "private_rows"]

STASH_OPS = (core.EXP2, core.LOG2, core.SIN)  # the operations whose recomputation costs more than a load from L1
STASH_MAX_BYTES = 1 << 16  # one row's scratch, on the stack of each core (the backends' stack scratch limit)


def _match(kdef: UOp, red: UOp, order: list[UOp] | None = None) -> UOp | None:
    """The output range over which the kernel's stores also compute red's operand (the reduce range swapped for
    it), when red is an add over one reduce range of constant extent whose operand holds a transcendental.
    `order`: kdef's toposort, when the caller has it (one walk for all of a kernel's reductions)."""
    if red.attrs.op != "add":
        return None
    rs = red.operands.ranges
    if len(rs) != 1 or rs[0].attrs.kind != "reduce":
        return None
    r, v = rs[0], red.operands.value
    n = const_extent(r)
    if n is None or n < 2 or not v.dtype.is_float or v.dtype.count != 1 or n * v.dtype.itemsize > STASH_MAX_BYTES:
        return None
    ops = {u.op for u in v.toposort()}
    if K.AFTER in ops or not ops & set(STASH_OPS):  # (AFTER: already reads a scratch, maybe this one)
        return None
    order = list(kdef.toposort()) if order is None else order
    inside = set(order)
    outer = row_ranges(kdef, red, order)
    for q in (u for u in order if u.op is K.RANGE and u.attrs.kind == "loop" and const_extent(u) == n):
        # the row the operand varies over encloses q in the store's loop nest, so one fill per row serves q's loop
        ends = [e for e in order if e.op is K.END and q in e.operands.ranges]
        if v.substitute({r: q}) in inside and len(ends) == 1 \
                and outer <= set(ends[0].operands.ranges[:ends[0].operands.ranges.index(q)]):
            return q
    return None


def row_ranges(kdef: UOp, red: UOp, order: list[UOp] | None = None) -> frozenset[UOp]:
    """The ranges red's operand varies over besides red's own: those a fill of the scratch runs inside."""
    deps = range_deps(list(kdef.toposort()) if order is None else order, reduce_consumes=True)
    return deps[red.operands.value] - set(red.operands.ranges)


def stash_candidates(kdef: UOp) -> list[UOp]:
    """The reduce ranges `stash` applies to."""
    order = list(kdef.toposort())
    return [red.operands.ranges[0] for red in order if red.op is K.REDUCE and _match(kdef, red, order) is not None]


def stash(kdef: UOp, r: UOp) -> UOp:
    """kdef with the operand of the add-reduction over r computed once into a one-row scratch (module docstring);
    ValueError when r's reduction does not fit the pattern."""
    red = next((u for u in kdef.toposort() if u.op is K.REDUCE and u.operands.ranges == (r,)), None)
    q = _match(kdef, red) if red is not None else None
    if red is None or q is None:
        raise ValueError(f"axis {r.attrs.axis}: no add-reduction over it whose operand the output computes again")
    rows = row_ranges(kdef, red)
    row = next(iter(rows)) if len(rows) == 1 else None
    n0 = const_extent(row) if row is not None else None
    if row is None or n0 is None:
        raise ValueError(f"axis {r.attrs.axis}: its operand varies over {len(rows)} other ranges (stash needs one row "
                         "range of constant extent)")
    v = red.operands.value
    n = const_extent(r)
    assert n is not None  # _match checked
    axis = 1 + max(u.attrs.axis for u in kdef.toposort() if u.op is K.RANGE)
    lid = sum(1 for u in kdef.toposort() if u.op is K.LOCAL)
    fill = UOp(K.RANGE, dtypes.index, (UOp.const(dtypes.index, n),), (axis, "loop"))
    scratch = UOp(K.LOCAL, v.dtype.ptr("local", n0 * n), (), lid)

    def at(ptr: UOp, i: UOp) -> UOp:  # [row][i]: a row per row iteration (on a cpu, one per core: private_rows)
        return UOp(K.INDEX, scratch.dtype, (ptr, row * UOp.const(dtypes.index, n) + i))
    store = UOp(K.STORE, dtypes.void, (at(scratch, fill), v.substitute({r: fill})))
    # the end closes the fill only: the row stays open, so each row iteration reads the row it filled
    ready = UOp(K.AFTER, scratch.dtype, (scratch, UOp(K.END, dtypes.void, (store, fill))))

    def read(i: UOp) -> UOp:
        return UOp(K.LOAD, v.dtype, (at(ready, i),))
    again = v.substitute({r: q})
    out = kdef.substitute({again: read(q)})
    return out.substitute({red: red.replace(src=(read(r), r))})


def private_rows(kdef: UOp) -> UOp:
    """On a cpu, where each core runs its share of the global range's iterations one after the other: a kernel.local
    laid out [global iteration][P] whose every index is `g * P + (a part that does not vary over g)` and whose
    stores are each closed by an end that leaves g open (each iteration fills, then reads, its own row: stash's
    scratch, not pack's, whose copy closes g) is cut to one row of P elements. kernel-to-device then makes g a
    `group_id`: each iteration a work-group of one thread with its own kernel.local (the reference interpreter keeps
    one per group), which a cpu renders as the same loop over its share of the ids, one scratch per core."""
    order = list(kdef.toposort())
    glob = [u for u in order if u.op is K.RANGE and u.attrs.kind == "global"]
    ng = const_extent(glob[0]) if len(glob) == 1 else None
    locals_ = [u for u in order if u.op is K.LOCAL and ng is not None and u.dtype.size % ng == 0]
    if ng is None or not locals_:  # (most kernels: nothing to cut, no range analysis)
        return kdef
    g = glob[0]
    deps = range_deps(order)
    zero = UOp.const(dtypes.index, 0)
    rows: dict[UOp, UOp] = {}
    for loc in locals_:
        p = loc.dtype.size // ng
        idx = [u for u in order if u.op is K.INDEX and K.pointer_base(u) is loc]
        stores = [u for u in order if u.op is K.STORE and K.pointer_base(u.operands.ptr) is loc]
        ends = [u for u in order if u.op is K.END and u.operands.value in stores]
        if len(ends) != len(stores) or any(g in e.operands.ranges for e in ends):
            continue
        if all(linear_coeffs(i.operands.offset, frozenset({g}), deps) == {g: p} for i in idx):
            rows[loc] = UOp(K.LOCAL, loc.dtype.base.ptr("local", p), (), loc.arg)
    if not rows:
        return kdef
    new: dict[UOp, UOp] = {}
    for u in order:
        if u in rows:
            new[u] = rows[u]
            continue
        src = tuple(new[s] for s in u.src)
        base = K.pointer_base(u) if u.op is K.INDEX or u.op is K.AFTER else None
        if base in rows:
            if u.op is K.INDEX:
                src = (src[0], u.operands.offset.substitute({g: zero}), *src[2:])
            new[u] = u.replace(src=src, dtype=rows[base].dtype)
            continue
        new[u] = u if src == u.src else u.replace(src=src)
    return new[kdef]
