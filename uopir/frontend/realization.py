"""Running a Tensor: realize (one tensor or several as one program), assign, schedule, and reading values back
(numpy, tolist, item, the Python conversions).

The frontend keeps the value semantics of numpy/torch across in-place assigns: every live unrealized tensor is
registered weakly (`LAZY`), and when an assign is realized the tensors that read its target's old contents are
computed with it or pointed at a copy of those contents (`old_readers`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import device as D
from uopir.frontend import dtype_promotion as P
from uopir.frontend import gradient as G
from uopir.frontend import variable as V
from uopir.frontend.schedule import ScheduleItem, schedule
from uopir.frontend.shapes import broadcast_shape
from uopir.frontend.weak_ids import WeakById
from uopir.ir.dtype import dtypes
from uopir.ir.symbolic import smax, sprod, ssub, sym_infer
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import Scalar, Tensor


# While a TinyJit captures, realize_all appends the fresh target buffers it allocates to the innermost list (a replay
# allocates new ones in their place instead of writing the captured buffers again).
FRESH_TARGETS: list[list[Any]] = []
# ... and the random tensors drawn on the host, with their generator and shape (a replay draws new ones).
RANDOM_SOURCES: list[list[tuple[Any, Any, tuple[int, ...]]]] = []


# Every live unrealized tensor (weakly: a dead one drops out by itself), by id (== builds a Tensor). When an assign
# is realized, the ones that read its target's old contents keep that value (see `_old_readers`).
LAZY: WeakById = WeakById()
# A reader of at most this many elements (a loss) is computed with the assign; a larger one (a gradient) reads a
# snapshot of the old contents instead, so a program that does not need it does not grow.
SMALL_READER = 1
# The live tensors whose graph is a pending assign of a buffer (weakly, by id): a realize whose graph contains one
# also realizes that tensor, so it points at its written buffer and the assign is not run a second time.
PENDING: WeakById = WeakById()


def _view_base(u: UOp, through_assign: bool = True) -> UOp:
    """The op under a chain of assignable views (a buffer for a view of a realized tensor); with through_assign
    False an assign stops the walk."""
    while u.op in T.ASSIGNABLE_VIEWS and u.src and (through_assign or u.op is not T.ASSIGN):
        u = u.src[0]
    return u


def _old_readers(targets: set[UOp], realizing: set[int], device: str) -> list[Tensor]:
    """The live unrealized tensors of `device`, other than those being realized, that read one of the `targets`
    buffers, which the program about to run writes: computed later they would see the new contents. Those that
    read through a pending assign of a target, or hold at most SMALL_READER elements, are returned: the caller
    realizes them in the same program. The others read the old contents directly: they are pointed at a copy of
    those contents (copy-on-write, taken now; no kernel). A pure view of a buffer (a reshape, permute, shrink...
    of it) is left alone: it aliases the buffer, so it sees the new contents by design. One walk over all their
    graphs together."""
    cands = [t for t in list(LAZY.values()) if id(t) not in realizing and t.device == device
             and t.uop.op is not T.BUFFER and _view_base(t.uop, False).op is not T.BUFFER]
    if not cands:
        return []
    raw: set[UOp] = set()  # reads a target's old contents
    thru: set[UOp] = set()  # reads through a pending assign of a target
    topo = list(UOp.sink(*(t.uop for t in cands)).toposort(gate=lambda u: u.op is not T.ASSIGN or
                                                           _view_base(u) not in targets))
    for u in topo:
        if u.op is T.ASSIGN and _view_base(u) in targets:
            thru.add(u)
        elif u in targets:
            raw.add(u)
        elif u.src:
            if any(s in raw for s in u.src):
                raw.add(u)
            if any(s in thru for s in u.src):
                thru.add(u)
    now: list[Tensor] = []
    cow: list[Tensor] = []
    for t in cands:
        if any(V.is_sym(d) for d in t.shape):
            continue  # not handled (see docs/internals.md)
        if t.uop in thru or (t.uop in raw and sprod(t.shape) <= SMALL_READER):
            now.append(t)
        elif t.uop in raw:
            cow.append(t)
    if cow:
        new: dict[UOp, UOp] = {}
        for u in UOp.sink(*(t.uop for t in cow)).toposort(gate=lambda u: u in raw or u.op is C.SINK):
            if u not in raw:
                continue
            if u in targets:
                new[u] = D.new_buffer(P.host_array(D.buffer_data(u), u.dtype), u.dtype, device)  # snapshot
            else:
                new[u] = u.replace(src=tuple(new.get(s, s) for s in u.src))
        for t in cow:
            t.uop = new[t.uop]
    return now


def _written(u: UOp) -> UOp:
    """An assign's target once the assign has run: its view chain with every assign replaced by its own target."""
    chain: list[UOp] = []
    while u.op in T.ASSIGNABLE_VIEWS and u.src:
        if u.op is T.ASSIGN:
            u = u.operands.target
            continue
        chain.append(u)
        u = u.operands.x
    for v in reversed(chain):
        u = v.replace(src=(u, *v.src[1:]))
    return u



def _keep_graph(t: Any, graph: UOp) -> None:
    """Remember the graph a realized tensor was computed from while gradients may be asked for (a tensor with
    requires_grad=True is alive, outside no_grad), as torch keeps its autograd graph: `loss.numpy(); loss.backward()`.
    Otherwise nothing is kept, so an inference result does not hold its inputs' buffers alive."""
    if G.any_tracked() and not type(t).no_grad and t.uop.dtype.is_float:
        t._graph = (t.uop, graph)


class Realization:
    """Running a Tensor and reading its value back."""

    __slots__ = ()

    def realize(self, *others: Tensor) -> Tensor:
        """Evaluate the graph on the device, keep the result in a fresh buffer and point this tensor at it. With
        `others`, or when this tensor is an assign, all of them are realized as one program (see `realize_all`)."""
        u = self.uop
        op = u.op
        if others or op is T.ASSIGN or (PENDING.data and op is not T.BUFFER):
            type(self).realize_all(self, *others)
            return self
        if UOp in map(type, u.shape):  # a symbolic dim (V.is_sym), found without a Python call per dim
            return self._realize_symbolic()
        if op is not T.BUFFER:
            self.uop = D.realize(u, self.device)
            _keep_graph(self, u)
            LAZY.pop(id(self), None)
        return self

    @classmethod
    def realize_all(cls, *tensors: Tensor) -> None:
        """Realize several tensors as one program per device, so values they share are computed once and their
        assigns are ordered (reads see the values on entry unless they read the assign). Each tensor ends up pointing
        at a buffer: an assign at its target (written in place), any other value at a fresh buffer it is assigned to.
        """
        groups: dict[str, list[Tensor]] = {}
        for t in tensors:
            if not isinstance(t, cls):
                raise TypeError(f"realize: expected Tensors, got {type(t).__name__}")
            if t.uop.op is T.BUFFER:
                continue
            if any(V.is_sym(d) for d in t.shape):
                t._realize_symbolic()
                continue
            groups.setdefault(t.device, []).append(t)
        for device, ts in groups.items():
            pending = [t for t in list(PENDING.values()) if t.device == device and t.uop.op is T.ASSIGN]
            if pending:  # pending assigns inside the graphs run now: their tensors are realized with them
                inside = {id(t) for t in ts}
                pending = [t for t in pending if id(t) not in inside]
                if pending:
                    graph = UOp.sink(*(t.uop for t in ts)).toposort()
                    ts = ts + [t for t in pending if t.uop in graph]
            targets = {b for t in ts if t.uop.op is T.ASSIGN and (b := _view_base(t.uop)).op is T.BUFFER}
            if targets:  # readers of the old contents: computed in this program, or pointed at a copy of them
                ts = ts + _old_readers(targets, {id(t) for t in ts}, device)
            roots: list[UOp] = []
            seen: set[int] = set()
            graphs = {id(t): t.uop for t in ts if t.uop.op is not T.ASSIGN}
            for t in ts:
                if id(t) in seen:
                    continue
                seen.add(id(t))
                if t.uop.op is not T.ASSIGN:  # into a fresh buffer, so it is a write the program keeps
                    target = D.new_buffer(np.empty(t.shape, P.to_np(t.dtype)), t.dtype, device)
                    if FRESH_TARGETS:
                        FRESH_TARGETS[-1].append(D.buffer_of(target))
                    t.uop = UOp(T.ASSIGN, t.dtype, (target, t.uop))
                roots.append(t.uop)
            D.realize(UOp.sink(C.const(dtypes.int32, 0), *roots), device)
            for t in ts:
                if t.uop.op is T.ASSIGN:
                    t.uop = _written(t.uop)
                if id(t) in graphs:
                    _keep_graph(t, graphs[id(t)])
                LAZY.pop(id(t), None)
                PENDING.pop(id(t), None)

    def assign(self, x: Tensor | Scalar | np.ndarray) -> Tensor:
        """Write x into this tensor (lazily; in place when realized): its value becomes x. A realized tensor (a
        buffer, or a reshape/permute/shrink/flip view of one) keeps its buffer, which the realize writes, so every
        other tensor of that buffer sees the new value; an unrealized one just takes x's graph (tinygrad)."""
        if not isinstance(x, type(self)):
            x = type(self)(x, dtype=self.dtype, device=self.device)
        if x.shape != self.shape:
            try:
                fits = broadcast_shape(x.shape, self.shape) == tuple(self.shape)
            except ValueError:
                fits = False
            if not fits:
                raise ValueError(f"assign: value of shape {V.fmt_dims(x.shape)} does not fit a tensor of shape "
                                 f"{V.fmt_dims(self.shape)}")
            x = x.expand(self.shape)
        if x.device != self.device:
            raise ValueError(f"assign: value on device {x.device!r}, tensor on {self.device!r}")
        if x.dtype != self.dtype:
            raise TypeError(f"assign: value of dtype {x.dtype!r} into a tensor of dtype {self.dtype!r} (cast it first)")
        base = self.uop
        while base.op in T.ASSIGNABLE_VIEWS and base.src:
            base = base.src[0]
        if base.op is T.BUFFER:
            if x.uop is not self.uop:
                self.uop = UOp(T.ASSIGN, self.dtype, (self.uop, x.uop))
                PENDING[id(self)] = self
        else:
            self.uop = x.uop
        LAZY[id(self)] = self
        return self

    def replace(self, x: Tensor) -> Tensor:
        """Make this tensor x (its graph, dtype and device), in place of its own (tinygrad's; only the shapes must
        match). Unlike assign nothing is written: other tensors of the old buffer keep its contents. Used to swap a
        parameter's value without a program (`p.replace(Tensor.ones_like(p))`), or its device (`to_`)."""
        if not isinstance(x, type(self)):
            raise TypeError(f"replace: needs a Tensor, got {type(x).__name__}")
        if x.shape != self.shape:
            raise ValueError(f"replace: shape {V.fmt_dims(x.shape)} does not match the tensor's "
                             f"{V.fmt_dims(self.shape)}")
        if self._requires_grad and not x.dtype.is_float:
            raise TypeError(f"replace: a tensor that requires a gradient cannot become {x.dtype!r}")
        self.uop, self.device = x.uop, x.device
        G.live(self, self._requires_grad is None and self.dtype.is_float)
        if self.uop.op is T.ASSIGN:
            PENDING[id(self)] = self
        else:
            PENDING.pop(id(self), None)
        if _view_base(self.uop).op is not T.BUFFER:
            LAZY[id(self)] = self
        return self

    def to_(self, device: str | None) -> Tensor:
        """Move this tensor (and its .grad) to another device in place (tinygrad's; `to` then `replace`)."""
        moved = self.to(device)
        if self.grad is not None:
            self.grad.replace(self.grad.to(device))
        return self.replace(moved)

    def schedule(self, *others: Tensor) -> list[ScheduleItem]:
        """The kernel calls that realizing this tensor (and `others`) would run, in order; realized inputs are not
        kernels. `print(print_ir(t.schedule()[-1].ast))` shows the last kernel."""
        return schedule(self, *others)

    def programs(self) -> list[Any]:
        """The compiled kernels realizing this tensor runs on its device, in order (nothing runs): each Program has
        its `name`, `source` (the C text on c; None on the python interpreter) and `program` (the device program,
        or kernel.def, it was compiled from)."""
        return D.compiled(self.uop, self.device)

    def _realize_symbolic(self) -> Tensor:
        """A symbolic shape is realized into a buffer of its largest size (every variable at its max), zero-padded
        beyond the bound size: the tensor becomes a shrink of that buffer to its symbolic shape. The kernels keep the
        variables, so realizing again with other bound values runs the same kernels."""
        u = self.uop
        if u.op is T.SHRINK and u.operands.x.op is T.BUFFER:
            return self  # already a view of a realized buffer (numpy() reads it at the bound values)
        bound = u.unbind_all()[1]
        free = [v.attrs.name for v in u.variables() if v not in bound]
        if free:
            raise ValueError(f"realize: variable {', '.join(repr(n) for n in free)} is not bound (a tensor of symbolic "
                             f"shape {V.fmt_dims(self.shape)} realizes at bound values: Variable(...).bind(n))")
        top = tuple(smax(d) for d in self.shape)
        padded = self._mv(T.PAD, tuple((0, ssub(m, d)) for m, d in zip(top, self.shape, strict=True)))
        buf = D.realize(padded.uop, self.device)
        self.uop = T.movement(T.SHRINK, buf, tuple((0, d) for d in self.shape))
        return self

    def numpy(self) -> np.ndarray:
        """A fresh numpy copy of the value (bfloat16 comes back as float32); a symbolic shape at its bound values."""
        t = self.realize()
        if t.uop.op is not T.SHRINK:
            return D.buffer_data(t.uop)
        try:  # a view of a realized buffer: its bounds at the bound values
            bounds = tuple((sym_infer(b), sym_infer(e)) for b, e in T.sym_arg(t.uop))
        except ValueError as e:
            raise ValueError(f"numpy() of a tensor of symbolic shape {V.fmt_dims(t.shape)}: {e}") from None
        return np.ascontiguousarray(D.buffer_data(t.uop.operands.x)[tuple(slice(b, e) for b, e in bounds)])

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return self.numpy().reshape(()).item()

    def data(self) -> np.ndarray:
        return self.numpy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if not self.dtype.is_int:
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype!r}")
        return int(self.item())
