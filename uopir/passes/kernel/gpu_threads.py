"""kernel-optimize on a gpu target: which ranges run on a work-group's threads, and which reductions they share.

Plain code (a whole-kernel decision, like the rest of the heuristic). It reads the kernel after the register opts
(upcast, unroll) and the target description only (`max_threads_per_block`, `max_local_dims`, `max_global_dims`,
`has_local`, `local_bytes`, `warp_size`, `reassociate_float_reductions`), and returns opts as
`(kind, axis, factor)` rows that kernel-optimize applies after the others:

- a **group reduction**, where a kernel reduces long axes into few results (a sum of 1M floats, the max and the sum of
  each softmax row): every reduction's outer `reduce` range is split `group` by L threads (thread l reduces
  elements l, l + L, l + 2L, ...: neighbouring threads read neighbouring addresses), kernel-to-device combines the L
  partial results in local memory after a barrier; the output ranges the reductions vary over become work-groups
  (`global`), and the innermost other output range is split `local` by the same L, so the threads that shared the
  reductions share the elementwise work after them too (softmax's exp and divide). It needs local memory for L
  partials per reduction, at least GROUP_MIN_REDUCE steps per reduction, at most GROUP_MAX_OUTPUTS results, every
  reduction's value free of other reductions' ranges, and, for a float add/mul reduction (whose rounding changes
  with the order), a target that allows reassociating float reductions;
- otherwise **work-groups**: the innermost output range is split `local` by the largest power of two that divides
  it within the target's work-group size (at most LOCAL_MAX threads), the next range by what is left of that
  budget (2-d work-groups), and every output range left is `global` (a work-group id).

Applied as opts, the choices show in the printed kernel as range kinds (`local`, `group`, `global`);
`UOPIR_NOOPT=1` turns them off with the rest of kernel-optimize (one work item per output element, global ids).
"""
from __future__ import annotations

from uopir.dialects import kernel as K
from uopir.ir.uop import UOp
from uopir.passes.kernel.indexmath import const_extent, range_deps
from uopir.passes.target import Target

__all__ = ["gpu_thread_opts", "LOCAL_MAX", "GROUP_MIN_REDUCE", "GROUP_MAX_OUTPUTS", "GROUP_MIN_THREADS"]

LOCAL_MAX = 256  # threads per work-group the heuristic asks for at most (below most devices' limit)
GROUP_MIN_REDUCE = 64  # steps of a reduction range below which one thread reduces it alone
GROUP_MAX_OUTPUTS = 1024  # reduction results above which one thread per result already fills the device
GROUP_MIN_THREADS = 16  # fewer threads than this do not pay for the local memory and barrier of a group reduction
_REORDERED = ("add", "mul")  # reductions whose float result depends on the order

OptRow = tuple[str, int, int]


def _pow2_divisor(n: int, cap: int) -> int:
    f = 1
    while f * 2 <= cap and n % (f * 2) == 0:
        f *= 2
    return f


def _output_ranges(order: list[UOp]) -> list[UOp]:
    out: dict[UOp, None] = {}
    for u in order:
        if u.op is K.END:
            out.update((r, None) for r in u.operands.ranges if r.attrs.kind in ("loop", "global"))
    return list(out)


def _group_opts(order: list[UOp], out: list[UOp], t: Target, lim: int) -> list[OptRow]:
    """The group-reduction opts of a kernel, or [] when it does not qualify (the module docstring says when)."""
    reduces = [u for u in order if u.op is K.REDUCE]
    if not reduces or not t.has_local:
        return []
    deps = range_deps(order, reduce_consumes=True)
    outs = set(out)
    rows: set[UOp] = set()
    split: dict[UOp, int] = {}
    local_bytes = 0
    for red in reduces:
        own = set(red.operands.ranges)
        if not deps[red.operands.value] <= outs | own:
            return []  # nested in another reduction's loop
        if red.dtype.scalar.is_float and red.attrs.op in _REORDERED and not t.reassociate_float_reductions:
            return []
        r = next((x for x in reversed(red.operands.ranges) if x.attrs.kind == "reduce"), None)
        n = const_extent(r) if r is not None else None
        if r is None or n is None or n < GROUP_MIN_REDUCE or any(r in u.operands.ranges for u in reduces
                                                                if u is not red):
            return []
        split[r] = n
        rows |= deps[red.operands.value] & outs
        local_bytes += red.dtype.count * max(1, red.dtype.scalar.itemsize)
    results = 1
    for r in rows:
        results *= const_extent(r) or GROUP_MAX_OUTPUTS + 1
    if results > GROUP_MAX_OUTPUTS or len(rows) > 3 or any((const_extent(r) or 0) > min(t.max_global_dims)
                                                           for r in rows):
        return []
    threads = min(_pow2_divisor(n, min(lim, max(1, n // 4))) for n in split.values())
    while threads > 1 and threads * local_bytes > t.local_bytes:
        threads //= 2
    if threads < max(GROUP_MIN_THREADS, t.warp_size if t.warp_size <= lim else 1):
        return []
    opts: list[OptRow] = [("group", r.attrs.axis, threads) for r in split]
    cols = [r for r in out if r not in rows and r.attrs.kind == "loop" and (const_extent(r) or 0) % threads == 0]
    if cols:
        opts.append(("local", cols[-1].attrs.axis, threads))
    opts += [("global", r.attrs.axis, 0) for r in out if r in rows and r.attrs.kind == "loop"]
    return opts


def gpu_thread_opts(kdef: UOp, t: Target) -> list[OptRow]:
    """The thread opts of one kernel (after its register opts) on gpu target t: group reductions or work-groups."""
    order = list(kdef.toposort())
    out = _output_ranges(order)
    lim = min(LOCAL_MAX, t.max_threads_per_block, t.max_local_dims[0])
    opts = _group_opts(order, out, t, lim) if lim >= 2 else []
    if opts:
        return opts
    loops = [r for r in out if r.attrs.kind == "loop"]
    budget, whole = lim, set()
    for dim, r in enumerate(reversed(loops)):
        n = const_extent(r)
        if dim >= 2 or budget < 2 or n is None:
            break
        f = _pow2_divisor(n, min(budget, t.max_local_dims[dim]))
        if f < 2:
            break
        opts.append(("local", r.attrs.axis, f))
        budget //= f
        if f == n:
            whole.add(r)
    return opts + [("global", r.attrs.axis, 0) for r in loops if r not in whole]
