"""tensor-to-kernel: turn a tensor-level program into an ordered schedule of kernel calls on buffers.

Plain code rather than patterns: choosing what to materialize is a whole-graph decision (who reads a value, at which
index, in which kernel), and a kernel body is the rendering of a tensor node *at an index*, which no UOp denotes.

What is materialized (gets a buffer and a kernel): `tensor.contiguous`, `tensor.copy` (and its operand), every
`tensor.assign` (into its target), the root sink's tensor results; then, found by building the kernels and looking at
them (`_Plan.review`), a reduction that would otherwise be computed twice (read by two kernels, or at two indices in
one) or recomputed (its value does not depend on exactly the outermost loops around it, so it could not be hoisted:
`m.sum(0)` expanded along the rows of an output, or read at an index that the loops around it reach more than twice per
element: a max-pool gradient reads each pooled value once per pixel of its window), and, for the first reason, an
elementwise value that is expensive (exp2, log2, sin, sqrt, recip, fdiv) or heavy (`HEAVY_LOADS` loads under it: a conv
weight gradient reads the pooling gradient once per kernel tap; or `HEAVY_OPS` ALU ops: GELU's erf tail under a matmul)
and no larger than its loops. A reduction is stored with the elementwise chain above it (views and elementwise ops of
its size, `_Plan._chain_top`) when every reader reaches it through that chain: a conv stores swish(conv + bias) once for
a squeeze-excite's pool and scale, an SE conv its sigmoid gate, a project conv its bias and residual add, where the bare
conv was stored and each reader (or a kernel of its own) added the rest. Size budget: a kernel whose body renders more
than `MAX_KERNEL_OPS` tensor nodes (a 20,000-op elementwise chain) is cut: every `MAX_KERNEL_OPS // 2` nodes in
rendering order, an elementwise node no larger than the kernel's output is materialized, so no kernel is huge (a C
compiler's time grows faster than linearly with the size of a function) and each piece is an ordinary kernel.
Everything else fuses into the kernel that reads it: elementwise chains, the producers of a reduction, and a reduction
into its consumer when each of its values is computed once per the loops around it (`(x @ w + b).relu()`, softmax and
layernorm rows are one kernel each).

Kernels: output ranges (kind loop) over the result's axes of size > 1, in axis order; a reduction's ranges (kind
reduce) in axis order, the first outermost, so it accumulates in the same order as `tensor.reduce`. Movement ops are
index arithmetic (`indexing.py`); a pad is a validity condition that gates the loads under it (a gated load with a
zero alternative), wrapped in a `core.where` only when the padded value is not itself such a load.

Schedule: one `tensor.call` per kernel; its operands are the buffers (param i is the i-th buffer) and then the calls
it must follow (void operands: read-after-write, write-after-read and write-after-write on the same buffer). New
buffers (intermediates and outputs) get ids above the largest `tensor.buffer` id of the input, in creation order,
on the device of the values they hold. A sink result becomes `tensor.after buf, calls...`: the buffer once every
call of the schedule has run; an input buffer result stays the buffer (its contents on entry).

Symbolic dimensions (tensor.var, tensor.bind): index math over them becomes index math over `kernel.var` of the
same name and range (indexing.kernel_dim), so a kernel's body never holds a bound value and one kernel serves every
value. Each `tensor.call` passes the variables its kernel reads as operands after the buffers (the tensor.bind
where the program binds the variable, else the tensor.var, whose value the caller supplies by name). A value of
symbolic shape is stored in a buffer of its largest shape (every variable at its max), at that shape's strides; a
sink result of symbolic shape is a shrink of that buffer back to its shape.

Assigns write their target through its reshape/permute/shrink/flip view in place, unless that is unsafe: the value
reads the target at another element, a later assign writes the same buffer, the result is a view the sink returns,
or the order of reads and writes cannot be kept. Then the value goes to a temporary buffer (which the assign's
readers read) and a second kernel copies it into the target.
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from uopir.dialects import core, kernel, tensor
from uopir.dialects.core import const_value
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import render, smax
from uopir.ir.uop import UOp
from uopir.passes.tensor_to_kernel.indexing import (
    Index,
    and_gate,
    iconst,
    kernel_index,
    movement_index,
    offset,
    strides,
)

MAX_KERNEL_OPS = 2000  # tensor nodes rendered into one kernel before the scheduler cuts it (see the size budget)
EXPENSIVE = frozenset((core.EXP2, core.LOG2, core.SIN, core.SQRT, core.RECIP, core.FDIV))
HEAVY_LOADS = 4  # an elementwise value reading this many loads is worth a buffer rather than recomputing it in a loop
# ... or computing this many ALU ops: GELU's erf tail (sign, polynomial, products: ~21) under a matmul over its output
# was recomputed once per output column (BERT-tiny's MLP matmul 0.07 -> 0.66 ms) once its constants were literals
HEAVY_OPS = 16
# a reduction read under a gate (a pad's, a concat's) or varying along an enclosing reduction's loop is rendered there
# only while its work in that kernel stays below this: beyond, it gets a buffer of its own (a concat of convs, or a
# conv under a global pool, would otherwise run as a gated or nested kernel: no vectors, every branch's loops run)
GATED_REDUCE_MAX_WORK = 1 << 16
_ELEMENTWISE = frozenset(core.ELEMENTWISE_OPS)
CHAIN_MAX = 32  # nodes of the elementwise chain above a twice-read reduction looked at for what to materialize
_CHAIN_VIEWS = frozenset((tensor.RESHAPE, tensor.DETACH))
_VIEWS = frozenset((tensor.RESHAPE, tensor.PERMUTE, tensor.SHRINK, tensor.FLIP))
_MOVEMENT = frozenset(tensor.MOVEMENT_OPS)


def _err(u: UOp, msg: str) -> IRError:
    return IRError(diagnostics=[diag_at(u, msg)])


def _zero(d) -> UOp:
    return UOp.const(d, False if d.is_bool else 0)


def base_buffer(target: UOp) -> UOp:
    """The tensor.buffer an assign target writes (through views and earlier assigns)."""
    while target.op is not tensor.BUFFER:
        target = target.src[0]
    return target


@dataclass
class Kernel:
    """One kernel of the schedule: `ast` is its kernel.def, `buffers` its tensor.buffer operands (param order)."""

    name: str
    ast: UOp
    buffers: list[UOp]
    node: UOp  # the tensor node whose value (or assign) it stores
    writes: UOp  # the buffer it writes
    reads: set[UOp] = field(default_factory=set)  # input buffers read on entry, and materialized nodes read
    deps: list[int] = field(default_factory=list)  # kernels that must run first (indices into the schedule)
    origin: dict[UOp, UOp] = field(default_factory=dict, repr=False)  # rendered reduce/expensive value -> tensor node
    gated: set[UOp] = field(default_factory=set, repr=False)  # rendered reductions read under a pad's validity gate
    ranges: tuple[UOp, ...] = ()  # the output ranges, outermost first
    vars: tuple[UOp, ...] = ()  # the tensor.bind / tensor.var operands that give the kernel's kernel.vars
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # the review's findings, shared by the builds
    # that reuse this rendering (_Rendered)


@dataclass(eq=False)
class _Rendered:
    """One kernel as a build rendered it, for the next builds to reuse while no node it rendered has been
    materialized (or made a temp assign) since: the plan grows by one decision per build, so most kernels of a
    build are the previous build's. Buffers are kept by what they hold (a fresh buffer's id moves when a node
    before it gets one): None for the kernel's own output, a tensor node for another kernel's (plan.storage), else an
    input buffer."""

    name: str
    ast: UOp
    sources: tuple[UOp | None, ...]
    node: UOp
    reads: set[UOp]
    origin: dict[UOp, UOp]
    gated: set[UOp]
    ranges: tuple[UOp, ...]
    vars: tuple[UOp, ...]
    visited: frozenset[UOp]  # every tensor node the rendering looked at
    reduces: tuple[tuple, ...]  # (reduction, index, gate) in rendering order: rendered_once's calls, to replay
    memo: dict = field(default_factory=dict)


# ---- rendering one kernel ------------------------------------------------------------------------------------------
class _Builder:
    """Renders tensor nodes at an index into one kernel body, memoized by (node, index, gate), without recursion."""

    def __init__(self, plan: _Plan, own: UOp):
        self.plan, self.own = plan, own
        self.params: dict[UOp, UOp] = {}
        self.buffers: list[UOp] = []
        self.memo: dict[tuple, UOp] = {}
        self.plans: dict[tuple, tuple] = {}  # keys being rendered: (operand keys, finish)
        self.reads: set[UOp] = set()
        self.origin: dict[UOp, UOp] = {}  # rendered reduce / expensive value -> its tensor node
        self.gated: set[UOp] = set()  # rendered reductions read under a gate
        self.axis = itertools.count()
        self.kernel_no = 0  # which kernel of the build this is
        self.reduces: list[tuple] = []  # (reduction, index, gate) rendered, in order
        self.stubbed = False  # a reduction was found rendered elsewhere already: this rendering is not kept

    def ptr(self, buf: UOp) -> UOp:
        if buf not in self.params:
            self.params[buf] = UOp(kernel.PARAM, buf.dtype.ptr(), (), len(self.buffers))
            self.buffers.append(buf)
        return self.params[buf]

    def load(self, buf: UOp, idx: Index, gate: UOp | None) -> UOp:
        p = UOp(kernel.INDEX, buf.dtype.ptr(), (self.ptr(buf), offset(idx, buf.attrs.shape)))
        if gate is None:
            return UOp(kernel.LOAD, buf.dtype, (p,))
        return UOp(kernel.LOAD, buf.dtype, (p, _zero(buf.dtype), gate))

    def address(self, target: UOp, idx: Index) -> tuple[UOp, UOp]:
        """(buffer, offset) of element idx of an assign target: a buffer seen through views or earlier assigns."""
        while target.op is not tensor.BUFFER:
            if target.op in _VIEWS:
                idx, _ = movement_index(target, idx)
            target = target.src[0]
        return target, offset(idx, target.attrs.shape)

    def render(self, u: UOp, idx: Index, gate: UOp | None) -> UOp:
        """u's value at idx (under gate), rendered iteratively: a node's operands are rendered before it, in
        operand order (depth first, as a recursive renderer would number ranges and params), with an explicit stack
        so that a 10^5-deep elementwise chain renders as well as a short one."""
        memo = self.memo
        top = (u, idx, gate)
        if (r := memo.get(top)) is not None:
            return r
        plans = self.plans
        stack = [top]
        while stack:
            key = stack[-1]
            if key in memo:
                stack.pop()
                continue
            plan = plans.get(key)
            if plan is None:
                plan = plans[key] = self._plan(*key)
            need, finish = plan
            missing = [k for k in need if k not in memo]
            if missing:
                stack.extend(reversed(missing))
                continue
            stack.pop()
            memo[key] = finish([memo[k] for k in need])
            del plans[key]
        return memo[top]

    def _plan(self, u: UOp, idx: Index, gate: UOp | None) -> tuple[list[tuple], Callable[[list[UOp]], UOp]]:
        """What rendering u at (idx, gate) needs (operand keys, in order) and how to finish it from their values.
        Called once per key: a reduction makes its ranges here."""
        n, op = u.op.name, u.op
        if u.shape is None:
            if u.op is core.CONST:
                return [], lambda _: u
            if _symbolic_scalar(u):  # an index expression over variables (a symbolic element count, `mean`)
                e = u.substitute({x: kernel_index(x) for x in u.toposort()
                                  if x.op is tensor.VAR or x.op is tensor.BIND})
                return [], lambda _: e
            raise _err(u, f"tensor-to-kernel cannot lower a shapeless {n} inside a tensor expression yet")
        if u is not self.own and u in self.plan.storage:
            self.reads.add(u)
            buf, target = self.plan.storage[u]
            if target is None:
                v = self.load(buf, idx, gate)
                return [], lambda _: v
            b, off = self.address(target, idx)
            p = UOp(kernel.INDEX, b.dtype.ptr(), (self.ptr(b), off))
            v = UOp(kernel.LOAD, b.dtype, (p,) if gate is None else (p, _zero(b.dtype), gate))
            return [], lambda _: v
        if op is tensor.BUFFER:
            self.reads.add(u)
            v = self.load(u, idx, gate)
            return [], lambda _: v
        if op is core.CONST:
            v = UOp.const(u.dtype, const_value(u))
            return [], lambda _: v
        if op is tensor.ARANGE:  # the element's index: the loop index itself, in the arange's dtype
            v = UOp(core.CAST, u.dtype, (idx[0],))
            return [], lambda _: v
        if op in _MOVEMENT:
            sidx, valid = movement_index(u, idx)
            if valid is None:
                return [(u.operands.x, sidx, gate)], lambda vs: vs[0]
            g = and_gate(gate, valid)

            def pad(vs: list[UOp]) -> UOp:
                v = vs[0]
                if v.op is kernel.LOAD and v.operands.gate is g:
                    return v  # the gated load is already zero outside
                return valid.where(v, _zero(u.dtype))
            return [(u.operands.x, sidx, g)], pad
        if op is tensor.REDUCE:
            if not self.plan.rendered_once(u, (self.kernel_no, idx, gate)):
                self.stubbed = True
                v = self.load(UOp(tensor.BUFFER, u.dtype, (), (0, "", u.shape), "stub"), idx, gate)
                return [], lambda _: v  # this build is discarded: do not render the reduction again
            self.reduces.append((u, idx, gate))
            rop, axes = u.attrs.op, u.attrs.axes
            src_shape = u.operands.x.shape
            ranges = [UOp(kernel.RANGE, dtypes.index, (kernel_index(src_shape[a]),), (next(self.axis), "reduce"))
                      for a in sorted(axes)]
            rmap = dict(zip(sorted(axes), ranges, strict=True))
            sidx = tuple(rmap.get(a, i) for a, i in enumerate(idx))

            def reduce(vs: list[UOp]) -> UOp:
                r = UOp(kernel.REDUCE, u.dtype, (vs[0], *ranges), rop)
                self.origin.setdefault(r, u)
                if gate is not None:
                    self.gated.add(r)
                return r
            return [(u.operands.x, sidx, gate)], reduce
        if op is tensor.DETACH:
            return [(u.operands.x, idx, gate)], lambda vs: vs[0]
        if op in _ELEMENTWISE:
            def alu(vs: list[UOp]) -> UOp:
                r = u.replace(src=tuple(vs))
                self.origin.setdefault(r, u)  # the review materializes an expensive or heavy one it recomputes
                return r
            return [(s, idx, gate) for s in u.src], alu
        raise _err(u, f"tensor-to-kernel cannot lower {n} yet")

    def output_ranges(self, shape: tuple[int, ...]) -> Index:
        return tuple(iconst(0) if d == 1 else
                     UOp(kernel.RANGE, dtypes.index, (kernel_index(d),), (next(self.axis), "loop"))
                     for d in shape)


def _symbolic_scalar(u: UOp) -> bool:
    """Is u a shapeless value computed from constants and variables only (tensor.var / tensor.bind)?"""
    return all(x.shape is None and (x.op is tensor.VAR or x.op is tensor.BIND or x.op is core.CONST or
                                    x.op in _ELEMENTWISE) for x in u.toposort())


def _kernel_name(node: UOp, nodes: dict[UOp, None], shape: tuple[int, ...]) -> str:
    """E (elementwise), r (a reduction) or copy, then the output's dims; `nodes`: the kernel's toposort."""
    kind = "r" if any(x.op is kernel.REDUCE for x in nodes) else "E"
    if node.op is tensor.COPY:
        kind = "copy"
    dims = (str(d) if type(d) is int else re.sub(r"\W+", "_", render(d)).strip("_") for d in shape)
    return "_".join([kind, *dims]) if shape else kind


def storage_shape(shape: tuple) -> tuple[int, ...]:
    """The buffer shape of a value: its shape, a symbolic dim at its largest value."""
    return tuple(d if type(d) is int else smax(d) for d in shape)


# ---- the plan: what is materialized, built and reviewed until nothing changes ---------------------------------------
class _Plan:
    def __init__(self, root: UOp, max_ops: int = MAX_KERNEL_OPS):
        self.root, self.max_ops = root, max(2, max_ops)
        self.cut = False  # this build materialized nodes to keep kernels under the size budget
        self.order = list(root.toposort())
        self.materialized: dict[UOp, str] = {}  # node -> why
        self.temp_assigns: set[UOp] = set()
        self.last_writes: set[UOp] = set()  # the last assign to each buffer
        self.storage: dict[UOp, tuple[UOp, UOp | None]] = {}  # node -> (buffer, assign target view or None)
        self.reduce_at: dict[UOp, tuple] = {}  # reduction -> where this build first rendered it
        self.twice: dict[UOp, None] = {}  # reductions this build found at a second place
        self.consumers: dict[UOp, list[UOp]] | None = None  # node -> the nodes that read it (made when first needed)
        self.pos: dict[UOp, int] = {}  # node -> its place in self.order
        self.kernel_no = 0
        self.renders: dict[tuple, _Rendered] = {}  # (node, value, target, own) of a _kernel call -> its rendering
        self.fresh: dict[UOp, UOp] = {}  # buffer made by this build -> the node it holds
        self.seen: tuple[int, frozenset[UOp]] = (0, frozenset())  # materialized count, temp assigns at the last build
        ids = [u.attrs.id for u in self.order if u.op is tensor.BUFFER]
        self.first_id = max(ids, default=-1) + 1
        self.devices: dict[UOp, str | None] = {}
        for u in self.order:
            if u.op is tensor.BUFFER:
                self.devices[u] = u.attrs.device
            elif u.op is tensor.COPY:
                self.devices[u] = u.attrs.device
            else:
                self.devices[u] = next((d for s in u.src if (d := self.devices[s]) is not None), None)
        self.default_device = next((d for d in self.devices.values() if d is not None), "python")
        self.var_operands = _var_operands(self.order)  # variable name -> the operand that gives it to a kernel
        self.outputs = [s for s in (root.src if root.op is core.SINK else (root,)) if self._needs_kernel(s)]
        self._initial()

    @staticmethod
    def _needs_kernel(u: UOp) -> bool:
        return u.dtype is not dtypes.void and u.shape is not None and u.op is not tensor.BUFFER

    def _initial(self) -> None:
        writers: dict[UOp, list[UOp]] = {}
        for u in self.order:
            op = u.op
            if op is tensor.CALL or op is tensor.AFTER:
                raise _err(u, f"tensor-to-kernel takes a tensor-level program; {op.name} shows it is already "
                              "scheduled")
            if op is tensor.CONTIGUOUS:
                self.materialized[u] = "contiguous"
            elif op is tensor.COPY:
                self.materialized[u] = "copy to another device"
                if u.operands.x.op is not tensor.BUFFER:
                    self.materialized.setdefault(u.operands.x, "copied to another device")
            elif op is tensor.ASSIGN:
                self.materialized[u] = "assign"
                writers.setdefault(base_buffer(u.operands.target), []).append(u)
        for u in self.outputs:
            self.materialized.setdefault(u, "output")
            if u.op is tensor.ASSIGN and u.operands.target.op is not tensor.BUFFER:
                self.temp_assigns.add(u)  # the sink returns a view of the target: keep the value in a buffer
        for ws in writers.values():
            self.temp_assigns.update(ws[:-1])  # an earlier write's result must survive the later ones
            self.last_writes.add(ws[-1])

    def rendered_once(self, u: UOp, where: tuple) -> bool:
        """Note that reduction u is rendered in kernel/index/gate `where`. False at a second place: u is to be
        materialized (rendering it again would compute it twice; a chain of fused reductions read at several indices
        would render exponentially many copies), and this build is only finished to find the others."""
        first = self.reduce_at.setdefault(u, where)
        if first == where:
            return True
        self.twice.setdefault(u, None)
        return False

    def build(self) -> list[Kernel] | None:
        """Every kernel of the current plan, in creation order (a valid order for reads of new buffers); None when
        building found reductions to materialize (the plan changed: build again)."""
        self.storage = {}
        self.reduce_at, self.twice = {}, {}
        self.kernel_no = 0
        self.cut = False
        self.fresh = {}
        self._forget_changed()
        ids = itertools.count(self.first_id)
        kernels: list[Kernel] = []
        names: dict[str, int] = {}
        named: dict[UOp, UOp] = {}  # a kernel body -> the named kernel.def of its first kernel
        for m in self.order:
            if m not in self.materialized:
                continue
            for k in self._kernels_for(m, ids):
                c = names.get(k.name, 0)
                names[k.name] = c + 1
                if (same := named.get(k.ast)) is not None:  # one body, one name: later passes lower it and the
                    k.name, k.ast = same.arg, same  # backend compiles it once (ResNet's repeated blocks, a ViT's
                else:  # layers), and each call launches it on its own buffers
                    body = k.ast
                    if c:
                        k.name = f"{k.name}n{c}"
                        k.ast = k.ast.replace(arg=k.name)
                    named[body] = k.ast
                kernels.append(k)
        if self.twice:
            for t in self.twice:
                top = self._chain_top(t)
                if top in self.materialized:
                    top = t
                self.materialized[top] = "a reduction read by two kernels or at two indices" + (
                    "" if top is t else ", through the elementwise chain above it")
            return None
        return None if self.cut else kernels

    def _forget_changed(self) -> None:
        """Drop the renderings that looked at a node materialized or made a temp assign since the last build."""
        n, temps = self.seen
        changed = set(itertools.islice(self.materialized, n, None)) | (self.temp_assigns - temps)
        self.seen = (len(self.materialized), frozenset(self.temp_assigns))
        if changed:
            self.renders = {key: r for key, r in self.renders.items() if r.visited.isdisjoint(changed)}

    def _chain_top(self, r: UOp) -> UOp:
        """What to materialize for reduction r (read twice, or recomputed where it is read): the topmost node of the
        elementwise chain above it (views and elementwise ops of r's size, at most CHAIN_MAX of them) through which
        every reader reaches r, else r. A depthwise conv read by its squeeze-excite's pool and by the scale then
        stores swish(conv + bias) once, where each reader recomputed the bias and the activation (its exp)."""
        if self.consumers is None:
            self.consumers = {}
            for u in self.order:
                for s in dict.fromkeys(u.src):
                    self.consumers.setdefault(s, []).append(u)
            self.pos = {u: i for i, u in enumerate(self.order)}
        size = math.prod(storage_shape(r.shape))
        region, frontier = {r}, [r]
        while frontier and len(region) < CHAIN_MAX:
            x = frontier.pop()
            for c in self.consumers.get(x, ()):
                if c not in region and (c.op in _ELEMENTWISE or c.op in _CHAIN_VIEWS) and c.shape is not None and \
                        c.dtype is not dtypes.void and math.prod(storage_shape(c.shape)) == size:
                    region.add(c)
                    frontier.append(c)
        for u in sorted(region - {r}, key=lambda x: -self.pos[x]):  # the topmost first
            below, stack = {u}, [u]
            while stack:
                for s in stack.pop().src:
                    if s in region and s not in below:
                        below.add(s)
                        stack.append(s)
            if r in below and all(x not in self.materialized and all(c in below for c in self.consumers.get(x, ()))
                                  for x in below - {u}):
                return u
        return r

    def _cut(self, b: _Builder, own: UOp, shape: tuple) -> None:
        """Keep a kernel under the size budget: every max_ops // 2 rendered nodes (operands come before their users,
        so each cut takes the nodes below it into a kernel of their own), materialize an elementwise node that is not
        larger than the kernel's output (never a big broadcast intermediate)."""
        limit = math.prod(storage_shape(shape))
        since = 0
        for u, _idx, _gate in b.memo:
            if u.op is tensor.DETACH:  # renders nothing (autograd's marker): not part of the kernel's size
                continue
            since += 1
            if since < self.max_ops // 2 or u is own or u in self.materialized or u.op not in _ELEMENTWISE or \
                    u.shape is None or math.prod(storage_shape(u.shape)) > limit:
                continue
            self.materialized[u] = "a cut: the kernel reading it would exceed the size budget"
            self.cut, since = True, 0

    def _new_buffer(self, u: UOp, ids: itertools.count) -> UOp:
        dev = self.devices.get(u) or self.default_device
        buf = UOp(tensor.BUFFER, u.dtype, (), (next(ids), dev, storage_shape(u.shape)))
        self.fresh[buf] = u
        return buf

    def _reuse(self, r: _Rendered, dbuf: UOp) -> Kernel | None:
        """The kernel of an earlier build's rendering, as this build would render it; None when one of its
        reductions is already rendered elsewhere in this build (rendering would find it twice)."""
        at, no = self.reduce_at, self.kernel_no
        if any(at.get(u, w) != w for u, idx, gate in r.reduces for w in ((no, idx, gate),)):
            return None
        for u, idx, gate in r.reduces:
            at.setdefault(u, (no, idx, gate))
        bufs = [dbuf if s is None else s if s.op is tensor.BUFFER else self.storage[s][0] for s in r.sources]
        return Kernel(r.name, r.ast, bufs, r.node, dbuf, r.reads, origin=r.origin, gated=r.gated, ranges=r.ranges,
                      vars=r.vars, memo=r.memo)

    def _kernel(self, node: UOp, value: UOp | None, dst: UOp, target: UOp | None, own: UOp | None) -> Kernel:
        """Store `value` (a tensor expression of node's shape, or node itself when own is node) into dst, through
        the assign target view `target` when given."""
        self.kernel_no += 1
        key = (node, value, target, own)
        if (r := self.renders.get(key)) is not None and \
                (k := self._reuse(r, dst if target is None else base_buffer(target))) is not None:
            return k
        made = len(self.materialized)
        b = _Builder(self, own if own is not None else node)
        b.kernel_no = self.kernel_no
        shape = node.shape
        assert shape is not None
        idx = b.output_ranges(shape)
        if target is None:
            dbuf, doff = dst, offset(idx, dst.attrs.shape)
        else:
            dbuf, doff = b.address(target, idx)
        dptr = UOp(kernel.INDEX, dbuf.dtype.ptr(), (b.ptr(dbuf), doff))
        v = b.render(node if value is None else value, idx, None)
        if len(b.memo) > self.max_ops and sum(u.op is not tensor.DETACH for u, _i, _g in b.memo) > self.max_ops:
            self._cut(b, own if own is not None else node, shape)
        if v.dtype is not dbuf.dtype:
            raise _err(node, f"tensor-to-kernel: value of type {v.dtype} stored into a {dbuf.dtype} buffer")
        store = UOp(kernel.STORE, dtypes.void, (dptr, v))
        rngs = [r for r in idx if r.op is kernel.RANGE]
        body = UOp(kernel.END, dtypes.void, (store, *rngs)) if rngs else store
        ast = UOp(kernel.DEF, dtypes.void, (body,), "k")
        nodes = ast.toposort()
        name = _kernel_name(node, nodes, tuple(d for d in shape if d != 1))
        names = sorted({x.attrs.name for x in nodes if x.op is kernel.VAR})
        k = Kernel(name, ast.replace(arg=name), b.buffers, node, dbuf, b.reads, origin=b.origin, gated=b.gated,
                   ranges=tuple(rngs), vars=tuple(self.var_operands[n] for n in names))
        if not b.stubbed and len(self.materialized) == made:  # else this build is discarded
            sources = tuple(None if x is dbuf else self.fresh.get(x, x) for x in b.buffers)
            visited = frozenset([node, *(mk[0] for mk in b.memo)])
            self.renders[key] = _Rendered(k.name, k.ast, sources, node, b.reads, b.origin, b.gated, k.ranges, k.vars,
                                          visited, tuple(b.reduces), k.memo)
        return k

    def _kernels_for(self, m: UOp, ids: itertools.count) -> list[Kernel]:
        if m.op is not tensor.ASSIGN:
            buf = self._new_buffer(m, ids)
            self.storage[m] = (buf, None)
            value = m.operands.x if m.op is tensor.CONTIGUOUS or m.op is tensor.COPY else None
            return [self._kernel(m, value, buf, None, None if value is not None else m)]
        target, value = m.operands.target, m.operands.value
        if m in self.temp_assigns:
            tmp = self._new_buffer(m, ids)
            k1 = self._kernel(m, value, tmp, None, m)
            self.storage[m] = (tmp, None)
            k2 = self._kernel(m, m, tmp, target, UOp.sink())  # reads m (now the temp) into the target
            return [k1, k2]
        k = self._kernel(m, value, base_buffer(target), target, m)
        self.storage[m] = (base_buffer(target), target)
        return [k]

    # --- review: what to materialize next ---------------------------------------------------------------------------
    def review(self, kernels: list[Kernel]) -> bool:
        """Materialize what the built kernels would recompute (a reduction computed twice is caught while building,
        `rendered_once`); True when the plan changed."""
        for want_reduce in (True, False):
            for k in kernels:
                if want_reduce not in k.memo:
                    k.memo[want_reduce] = _first_recomputed(k, want_reduce)
                bad = k.memo[want_reduce]
                if bad is not None:
                    top = self._chain_top(bad) if want_reduce else bad
                    self.materialized[bad if top in self.materialized else top] = \
                        "recomputed inside a loop its value does not depend on"
                    return True
        for k in kernels:
            if k.node.op is not tensor.ASSIGN or k.node in self.temp_assigns:
                continue
            if "other" not in k.memo:
                k.memo["other"] = _reads_other_element(k)
            if k.memo["other"]:
                self.temp_assigns.add(k.node)
                return True
        return False


def _var_operands(order: list[UOp]) -> dict[str, UOp]:
    """Each variable's name -> the tensor-level value a kernel call passes for it: its tensor.bind where the program
    binds it (one value per variable), else the tensor.var (its value comes from the caller, by name)."""
    out: dict[str, UOp] = {}
    for u in order:
        if u.op is tensor.BIND and u.operands.var.op is tensor.VAR:
            name = u.operands.var.attrs.name
            prev = out.get(name)
            if prev is not None and prev.op is tensor.BIND and prev is not u:
                raise _err(u, f"variable {name!r} is bound to two values in one program "
                              f"({prev.operands.value.attrs.value} and {u.operands.value.attrs.value})")
            out[name] = u
        elif u.op is tensor.VAR:
            name = u.attrs.name
            prev = out.get(name)
            if prev is not None and (prev if prev.op is tensor.VAR else prev.operands.var) is not u:
                raise _err(u, f"two different variables are named {name!r}")
            out.setdefault(name, u)
    return out


def _free_ranges(root: UOp) -> dict[UOp, frozenset[UOp]]:
    """The ranges each node under root depends on (a reduction's own ranges are bound inside it), in one walk."""
    memo: dict[UOp, frozenset[UOp]] = {}
    empty: frozenset[UOp] = frozenset()
    for x in root.toposort():
        if x.op is kernel.RANGE:
            memo[x] = frozenset((x,))
        elif x.op is kernel.REDUCE:
            memo[x] = memo[x.operands.value] - frozenset(x.operands.ranges)
        elif len(x.src) == 1:
            memo[x] = memo[x.src[0]]
        else:
            memo[x] = frozenset().union(*(memo[s] for s in x.src)) if x.src else empty
    return memo


def _distinct_under(order: list[UOp], cap: int, member: Callable[[UOp], bool],
                    below: bool = True) -> dict[UOp, int]:
    """For each node of `order` (a toposort), how many distinct `member` nodes lie under it, counted up to `cap` (a
    set of `cap` placeholders stands for cap or more, so no set grows past it); below=False: a member counts alone,
    not the members under it (a load's index)."""
    full = frozenset(range(cap))
    under: dict[UOp, frozenset] = {}
    for x in order:
        if member(x):
            got = frozenset((x,)).union(*(under[s] for s in x.src)) if below else frozenset((x,))
        else:
            got = frozenset().union(*(under[s] for s in x.src))
        under[x] = got if len(got) < cap else full
    return {x: len(v) for x, v in under.items()}


def _first_recomputed(k: Kernel, want_reduce: bool) -> UOp | None:
    """The first tensor node (a reduction, or an expensive elementwise value) whose value in k does not depend on
    exactly the outermost loops around it: hoisting cannot save it from being computed once per inner iteration."""
    origin = k.origin
    if not any((t.op is tensor.REDUCE) == want_reduce and t is not k.node for t in origin.values()):
        return None
    free = _free_ranges(k.ast)
    loads: dict[UOp, int] = {}
    alus: dict[UOp, int] = {}
    if not want_reduce:
        # the distinct loads under each node, up to HEAVY_LOADS (a value used twice, as a clip's compare and select
        # use it, is one load: a hard-sigmoid gate reads 2), and its distinct ALU ops on data, up to HEAVY_OPS
        order = k.ast.toposort()
        loads = _distinct_under(order, HEAVY_LOADS, lambda x: x.op is kernel.LOAD, below=False)
        alus = _distinct_under(order, HEAVY_OPS, lambda x: x.op in _ELEMENTWISE and x.dtype is not dtypes.index)
    seen: set[tuple[UOp, tuple[UOp, ...]]] = set()
    stack: list[tuple[UOp, tuple[UOp, ...]]] = [(k.ast, k.ranges)]
    while stack:
        u, loops = stack.pop()
        if (u, loops) in seen:
            continue
        seen.add((u, loops))
        deps = free[u]
        t = origin.get(u)
        if t is not None and t is not k.node and (t.op is tensor.REDUCE) == want_reduce:
            if want_reduce:
                if deps != frozenset(loops[:len(deps)]) or (u not in k.gated and _repeats(deps, t)):
                    return t
                if u in k.gated and _gated_work(deps, t) > GATED_REDUCE_MAX_WORK:
                    return t
                if len(loops) > len(k.ranges) and deps & set(loops[len(k.ranges):]) and \
                        _gated_work(deps, t) > GATED_REDUCE_MAX_WORK:
                    return t  # varies along an enclosing reduction's loop (a conv under a global pool): no tile fits
            elif deps != frozenset(loops[:len(deps)]) and (t.op in EXPENSIVE or (
                    (loads[u] >= HEAVY_LOADS or alus[u] >= HEAVY_OPS) and
                    math.prod(storage_shape(t.shape)) <= _runs(deps))):
                return t
        if u.op is kernel.REDUCE:
            inner = loops[:len(deps)] + tuple(u.operands.ranges)
            stack.append((u.operands.value, inner))
        else:
            stack.extend((s, loops) for s in u.src if s.dtype is not dtypes.index)
    return None


def _runs(deps: frozenset[UOp]) -> int:
    """How many times the loops `deps` run together (0 when one has a symbolic size)."""
    runs = 1
    for r in deps:
        n = const_value(r.operands.end)
        if type(n) is not int:
            return 0
        runs *= n
    return runs


def _repeats(deps: frozenset[UOp], t: UOp) -> bool:
    """Do the loops a value depends on run more than twice as many times as it has elements? Then most elements are
    computed again and again (a many-to-one index: a pooling gradient reads each pooled value once per input pixel
    of its window), which hoisting cannot save either. (A reduction read under a pad's gate is left out: most of
    those loops are gated off, as when `cat` pads scalar sums into one vector; its work is bounded instead,
    GATED_REDUCE_MAX_WORK.)"""
    return _runs(deps) > 2 * math.prod(storage_shape(t.shape))


def _gated_work(deps: frozenset[UOp], t: UOp) -> int:
    """The work of a reduction read under a gate, or inside another reduction, where it is rendered: how often its
    loops run there times the elements it reduces (a gate selects the value; the reduction's loops still run)."""
    x = t.operands.x.shape or ()
    reduced = math.prod(storage_shape(tuple(x[a] for a in t.attrs.axes))) if x else 1
    return _runs(deps) * reduced


def _reads_other_element(k: Kernel) -> bool:
    """Does an in-place assign kernel read its target buffer anywhere but the element it writes?"""
    nodes = k.ast.toposort()
    store = next(x for x in nodes if x.op is kernel.STORE)
    dst = store.operands.ptr
    for x in nodes:
        if x.op is not kernel.LOAD:
            continue
        at = x.operands.ptr
        if at.operands.ptr is dst.operands.ptr and (at is not dst or len(x.src) > 1):
            return True
    return False


# ---- ordering and emission -------------------------------------------------------------------------------------------
def _order(kernels: list[Kernel]) -> list[Kernel] | None:
    """The kernels in an order that keeps every read and write where the program has it, each with the kernels it
    must follow; None when in-place assigns make that impossible (a kernel reads a buffer before and after a write)."""
    producer: dict[UOp, int] = {}
    writers: dict[UOp, list[int]] = {}
    for i, k in enumerate(kernels):
        producer.setdefault(k.node, i)  # a temp assign's first kernel fills the temp its readers read
        if k.node.op is tensor.ASSIGN and k.writes is base_buffer(k.node.operands.target):
            writers.setdefault(k.writes, []).append(i)
    deps: list[set[int]] = [set() for _ in kernels]
    for i, k in enumerate(kernels):
        for r in k.reads:
            if r.op is tensor.BUFFER:
                for w in writers.get(r, ()):
                    if w != i:
                        deps[w].add(i)  # write after the reads of the entry contents
            elif producer[r] != i:
                deps[i].add(producer[r])  # read after write
    for ws in writers.values():
        for a, b in itertools.pairwise(ws):
            deps[b].add(a)  # writes of one buffer in program order
    order: list[int] = []
    done: set[int] = set()
    pending = list(range(len(kernels)))
    while pending:
        ready = next((i for i in pending if deps[i] <= done), None)
        if ready is None:
            return None
        pending.remove(ready)
        order.append(ready)
        done.add(ready)
    pos = {old: new for new, old in enumerate(order)}
    out = [kernels[i] for i in order]
    for k, i in zip(out, order, strict=True):
        k.deps = sorted(pos[d] for d in deps[i])
    return out


def schedule(root: UOp, max_ops: int = MAX_KERNEL_OPS) -> tuple[list[Kernel], UOp]:
    """The kernels of a tensor-level program, in execution order, and the scheduled program (tensor.calls and a
    root whose results are the same values as root's). `max_ops`: the size budget of one kernel (tensor nodes)."""
    plan = _Plan(root, max_ops)
    for _ in range(10_000):
        kernels = plan.build()
        if kernels is None or plan.review(kernels):
            continue
        ordered = _order(kernels)
        if ordered is not None:
            break
        if plan.temp_assigns >= {u for u in plan.materialized if u.op is tensor.ASSIGN}:
            raise _err(root, "tensor-to-kernel could not order the kernels (internal error)")
        plan.temp_assigns.update(u for u in plan.materialized if u.op is tensor.ASSIGN)
    else:
        raise _err(root, "tensor-to-kernel did not settle on a schedule")
    calls: list[UOp] = []
    for k in ordered:
        calls.append(UOp(tensor.CALL, dtypes.void, (*k.buffers, *k.vars, *(calls[d] for d in k.deps)),
                         (k.ast, k.name)))
    used = {d for k in ordered for d in k.deps}
    frontier = tuple(c for i, c in enumerate(calls) if i not in used)
    results = []
    for s in (root.src if root.op is core.SINK else (root,)):
        if s in plan.storage:
            buf, _ = plan.storage[s]
            if s in plan.last_writes and s.operands.target.op is tensor.BUFFER:
                buf = s.operands.target  # the target itself holds the value once every call has run
            after = UOp(tensor.AFTER, buf.dtype, (buf, *frontier))
            if after.shape != s.shape:  # a symbolic shape: its buffer has the largest one
                after = tensor.movement(tensor.SHRINK, after, tuple((0, d) for d in s.shape))
            results.append(after)
        else:
            results.append(s)
    out = UOp.sink(*results) if root.op is core.SINK else results[0]
    return ordered, out


__all__ = ["Kernel", "schedule", "base_buffer", "EXPENSIVE", "HEAVY_LOADS", "MAX_KERNEL_OPS", "strides"]
