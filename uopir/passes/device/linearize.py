"""device-linearize: each kernel becomes a `device.program`, its ops in execution order with explicit loops.

Plain code rather than patterns: placing every op in a loop nest and ordering the blocks is a whole-kernel schedule.

The program (the contract the renderers read; docs/dialects.md, device section):
- operands are all the ops of the kernel in execution order, each after its operands; params, variables and
  constants first, then loop headers in nesting order with their bodies;
- `device.loop %n {id}` opens a loop whose counter is its value, `device.endloop %loop` closes it;
- `%acc = device.acc %init {id}` declares an accumulator before its loops; reading %acc gives its current value;
  `%new = device.accstore %acc, %v : T` assigns it, and its value is the accumulator after the assignment;
- a value defined inside a loop is used only inside it, except accumulator updates: the reduction's result is read
  after its loops through its `device.accstore` (the accumulator's final value).

Placement: an op sits in the loops its operands need (a loop counter needs its loop; an accumulator's update needs
the accumulator's loops; the reduction's result read after the update escapes those loops; an accumulator is inside
every loop that encloses one of its loops, even one that only another accumulator over them needs), as far out as
that allows, so loop-invariant work is hoisted. A hardware id (`device.special`) is a value, not a loop, but a cpu
renders it as a loop over the rest of the program (each core runs its share of the ids): the ops of the top level
that vary over no id (a reduction of a whole row that every element reads) come before the first one, so they run
once per core, not once per id; an accumulator that varies over an id, or whose loops run once per id, comes
after the ids. The nesting of the loops is read from the graph: the endloop chain of
a kernel.end (first range outermost), an accumulator's loops (in operand order, inside the loops its accumulator
needs), and a loop bound's own operands. Within a block, ops keep the kernel's toposort order where their
dependencies allow; a `kernel.after` runs after the loops and ops of the effects it names, and leaves the program
(its users read the scratch pointer itself, the order now being explicit). A loop with nothing inside is dropped.
Loops and accumulators are numbered in program order.
"""
from __future__ import annotations

import heapq
from collections import defaultdict

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.device.common import in_kernels
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass

__all__ = ["linearize"]

_MARKERS = frozenset((D.ENDLOOP, C.GROUP, C.SINK, K.DEF))  # order effects in the graph; not program ops
_UNLOWERED = frozenset((K.RANGE, K.REDUCE, K.END))


def _err(u: UOp, msg: str) -> IRError:
    return IRError(diagnostics=[diag_at(u, msg)])


class _Nest:
    """The loops each op needs (`inside`) and each loop's enclosing loops (`enclosing`), from the graph."""

    def __init__(self, order: list[UOp]):
        self.order = order
        self.acc_loops: dict[UOp, frozenset[UOp]] = {u: frozenset(u.operands.loops) for u in order if u.op is D.ACC}
        self.stores_of: dict[UOp, list[UOp]] = defaultdict(list)
        for u in order:
            if u.op is D.ACCSTORE:
                self.stores_of[u.operands.acc].append(u)
        self.inside: dict[UOp, frozenset[UOp]] = {}
        self.acc_extra: dict[UOp, frozenset[UOp]] = {a: frozenset() for a in self.acc_loops}
        while True:  # an accumulator is inside the loops enclosing its loops (until no accumulator moves)
            self._place()
            self.enclosing = self._enclosing()
            if not self._outer_loops_of_accs():
                break
        self._close()

    def escape(self, s: UOp) -> frozenset[UOp]:
        """What a user inherits from operand s."""
        ins = self.inside[s]
        if s.op is D.LOOP:
            return ins | {s}
        if s.op is D.ACCSTORE:
            return ins - self.acc_loops[s.operands.acc]
        if s.op is D.ACC:  # its value changes in every iteration of its loops
            return ins | self.acc_loops[s]
        return ins

    def _place(self) -> None:
        """inside[u]: the loops u's operands need. An accumulator needs what its updates need outside its loops;
        that feeds back into its readers, so iterate until no accumulator moves (once per nesting level)."""
        acc_extra = self.acc_extra
        while True:
            inside = self.inside
            for u in self.order:
                if u.op in _MARKERS:
                    inside[u] = frozenset()
                    continue
                need: frozenset[UOp] = frozenset()
                for s in u.src:
                    need = need | self.escape(s) if s.op is not D.LOOP or u.op is not D.ACC else need | inside[s]
                if u.op is D.ACC:
                    need = need | acc_extra[u]
                elif u.op is D.ACCSTORE:
                    need = need | self.acc_loops[u.operands.acc]
                inside[u] = need
            moved = False
            for a, loops in self.acc_loops.items():
                extra = frozenset().union(*(inside[s] - loops for s in self.stores_of[a])) - inside[a]
                if extra:
                    acc_extra[a] = acc_extra[a] | extra
                    moved = True
            if not moved:
                return

    def _outer_loops_of_accs(self) -> bool:
        """Add to each accumulator the loops enclosing its own loops that it is not inside yet; whether any moved.
        Two accumulators may share loops (device-devectorize splits one into a vector and a scalar part) while only
        one of them needs an outer loop: the loops then run inside that outer loop, so the other accumulator must
        start again in every iteration of it too (declared outside, it would sum across them, and its result, read
        after its loops, would be placed outside the loop that holds them: a cycle)."""
        moved = False
        for a, loops in self.acc_loops.items():
            extra = frozenset().union(*(self.enclosing[lp] for lp in loops)) - loops - self.inside[a]
            if extra:
                self.acc_extra[a] = self.acc_extra[a] | extra
                moved = True
        return moved

    def _enclosing(self) -> dict[UOp, set[UOp]]:
        enc: dict[UOp, set[UOp]] = {u: set(self.inside[u]) for u in self.order if u.op is D.LOOP}
        for a in self.acc_loops:
            outer = set(self.inside[a])
            for lp in a.operands.loops:
                enc[lp] |= outer
                outer = outer | {lp}
        for u in self.order:
            if u.op is D.ENDLOOP:
                stack = list(u.operands.deps)
                while stack:  # endloops (through groups) closed inside this one are nested in its loop
                    d = stack.pop()
                    if d.op is D.ENDLOOP:
                        enc[d.operands.block].add(u.operands.block)
                    elif d.op is C.GROUP:
                        stack.extend(d.src)
        changed = True
        while changed:  # transitive closure
            changed = False
            for e in enc.values():
                more = set().union(*(enc[m] for m in e)) - e
                if more:
                    e |= more
                    changed = True
        for lp, e in enc.items():
            if lp in e:
                raise _err(lp, "device-linearize: this loop would be nested inside itself (its accumulators and "
                               "endloops order the loops in a cycle)")
        return enc

    def _close(self) -> None:
        """Every op is also inside the loops enclosing the loops it needs."""
        enc = self.enclosing
        for u in self.order:
            ins = frozenset(enc[u]) if u.op is D.LOOP else self.inside[u]
            if ins:
                self.inside[u] = ins.union(*(enc[lp] for lp in ins))

    def chain(self, u: UOp) -> list[UOp]:
        """The loops around u, outermost first; an error when they are not one nest."""
        loops = sorted(self.inside[u], key=lambda lp: (len(self.enclosing[lp]), lp.arg))
        for i, lp in enumerate(loops):
            if len(self.enclosing[lp]) != i:
                ids = ", ".join(str(m.arg) for m in loops)
                raise _err(u, f"device-linearize: this op needs loops that are not one nest (ids {ids}): no "
                              f"endloop chain or accumulator says which encloses which")
        return loops


def _priority(u: UOp, pos: int) -> tuple:
    """Params (by index), variables (by name), constants, then the rest in the kernel's toposort order."""
    if u.op is K.PARAM:
        return (0, u.attrs.idx, pos)
    if u.op is K.VAR:
        return (1, u.attrs.name, pos)
    if u.op is C.CONST:
        return (2, 0, pos)
    return (3, 0, pos)


def linearize(kdef: UOp) -> UOp:
    """The device.program of one lowered kernel.def (IRError, located, for a graph that is not one nest)."""
    order = list(kdef.toposort())
    for u in order:
        if u.op in _UNLOWERED:
            raise _err(u, f"device-linearize: {u.op.name} is not lowered yet (run kernel-to-device first)")
    nest = _Nest(order)
    pos = {u: i for i, u in enumerate(order)}
    ops = [u for u in order if u.op not in _MARKERS]
    chain = {u: nest.chain(u) for u in ops}  # the loops around an op (for a loop: around its header)

    # the items of each block (None: the top level) are its ops and child loops; edges order items of one block
    items: dict[UOp | None, list[UOp]] = defaultdict(list)
    for u in ops:
        items[chain[u][-1] if chain[u] else None].append(u)
    edges: dict[UOp, set[UOp]] = defaultdict(set)
    indeg: dict[UOp, int] = defaultdict(int)

    def depend(u: UOp, s: UOp) -> None:
        """u runs after s: order the items that hold them in the first block where they differ."""
        cu, cs = chain[u], chain[s]
        k = 0
        for a, b in zip(cu, cs, strict=False):  # the length of their common chain prefix (chains differ in length)
            if a is not b:
                break
            k += 1
        iu = cu[k] if k < len(cu) else u
        is_ = cs[k] if k < len(cs) else s
        if iu is not is_ and is_ not in edges[iu]:  # (u inside loop s: both are the item s, no order)
            edges[iu].add(is_)
            indeg[iu] += 1

    readers: dict[UOp, list[UOp]] = defaultdict(list)
    for u in ops:
        if u.op is K.AFTER:  # a scratch pointer used after effects: order it after the ops under their markers
            stack, seen = list(u.operands.effects), set()
            while stack:
                s = stack.pop()
                if s in seen:
                    continue
                seen.add(s)
                if s.op in _MARKERS:
                    stack.extend(s.src)
                else:
                    depend(u, s)
        for s in u.src:
            if s.op in _MARKERS or (u.op is D.ACC and s.op is D.LOOP):  # an accumulator comes before its loops
                continue
            depend(u, s)
            if s.op is D.ACC and u.op is not D.ACCSTORE:
                readers[s].append(u)
    for a, stores in nest.stores_of.items():  # a read of the old value comes before the update
        for st in stores:
            for r in readers[a]:
                if st not in r.toposort():
                    depend(st, r)

    # ops that vary over no hardware id come before the first one (a cpu renders an id as a loop over the rest of
    # the program: work placed before it runs once per core, not once per id). An accumulator varies with its
    # updates (one whose updates read an id starts again for every id), which feeds back into its readers.
    on_id: set[UOp] = set()
    grew = True
    while grew:
        grew = False
        for u in order:
            if u not in on_id and (u.op is D.SPECIAL or any(s in on_id for s in u.src) or (
                    u.op is D.ACC and any(st in on_id for st in nest.stores_of[u]))):
                on_id.add(u)
                grew = True
    late: set[UOp] = set()  # top-level items (ops or loops) that hold an op varying over an id
    for u in ops:
        if u in on_id:
            late.add(chain[u][0] if chain[u] else u)
    # a top-level accumulator that varies over an id, or whose loops run once per id (they hold an op that varies),
    # must start again for every id: it comes after the ids (before them, a core would sum across all its ids; two
    # accumulators that device-devectorize split from one share their loops while only one reads the id)
    ids = [u for u in ops if u.op is D.SPECIAL and not chain[u]]
    for a in nest.acc_loops:
        if ids and not chain[a] and (a in on_id or any((chain[lp][0] if chain[lp] else lp) in late
                                                       for lp in a.operands.loops)):
            late.add(a)
            for sp in ids:
                depend(a, sp)

    users: dict[UOp, list[UOp]] = defaultdict(list)
    for it, deps in edges.items():
        for d in deps:
            users[d].append(it)

    def key(u: UOp) -> tuple:
        return (u in late, _priority(u, pos[u]), pos[u])  # (inside a loop no item is late: the ids are outside)

    def block_order(block: UOp | None) -> list[UOp]:
        mine = items.get(block, [])
        ready = [(key(u), u) for u in mine if indeg[u] == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            _, u = heapq.heappop(ready)
            out.append(u)
            for v in users[u]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(ready, (key(v), v))
        if len(out) != len(mine):
            stuck = next(u for u in mine if u not in set(out))
            raise _err(stuck, "device-linearize: the ops of this block depend on each other in a cycle")
        return out

    # emit, rebuilding each op on the emitted operands
    new: dict[UOp, UOp] = {}
    program: list[UOp] = []
    ids = {D.LOOP: 0, D.ACC: 0}  # loops and accumulators are numbered in program order

    def emit(u: UOp) -> None:
        if u.op is K.AFTER:  # the program's order says what it said: the pointer itself
            new[u] = new[u.operands.ptr]
            return
        if u.op is D.ACC:  # declared before its loops: the program's accumulator names only its init
            src: tuple[UOp, ...] = (new[u.operands.init],)
        else:
            src = tuple(new[s] for s in u.src if s.op not in _MARKERS)
        if u.op in ids:
            n = u.replace(src=src, arg=ids[u.op])
            ids[u.op] += 1
        else:
            n = u if src == u.src else u.replace(src=src)
        new[u] = n
        program.append(n)

    stack: list[tuple[UOp | None, list[UOp], int]] = [(None, block_order(None), 0)]
    while stack:
        block, todo, i = stack.pop()
        if i == len(todo):
            if block is not None:
                program.append(UOp(D.ENDLOOP, dtypes.void, (new[block],)))
            continue
        u = todo[i]
        stack.append((block, todo, i + 1))
        if u.op is D.LOOP:
            body = block_order(u)
            if body:
                emit(u)
                stack.append((u, body, 0))
        else:
            emit(u)
    return UOp(D.PROGRAM, dtypes.void, tuple(program), kdef.attrs.name)


@register_pass("device-linearize", summary="order each kernel's ops into a device.program with explicit loops",
               consumes=("core", "kernel", "device"), produces=("core", "kernel", "device"))
def device_linearize(root: UOp, options: None, ctx: PassContext) -> UOp:
    def run(kdef: UOp) -> UOp:
        if kdef.op is D.PROGRAM:
            return kdef
        prog = linearize(kdef)
        ctx.count("programs")
        ctx.count("program-ops", len(prog.src))
        return prog
    return in_kernels(root, run)
