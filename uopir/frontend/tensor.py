"""The lazy Tensor: a tinygrad-style frontend that builds tensor-dialect IR and runs nothing until asked.

Every method returns a new Tensor whose `.uop` is a tensor-dialect graph (buffers, movement ops, core ALU ops,
tensor.reduce). `.realize()` / `.numpy()` / `.tolist()` / `.item()` evaluate that graph on the tensor's device,
store the result in a fresh buffer and make the tensor point at it, so a second realize costs nothing.

Semantics follow tinygrad's names and numpy's numbers: numpy broadcasting (made explicit in the IR with
tensor.reshape + tensor.expand), numpy dtype promotion with weak Python scalars (see dtype_promotion.py),
Python floor semantics for `//` and `%`. High-level ops decompose into the dialect's primitives; nothing here adds
an opaque op. Bad use (shapes, axes, dtypes) raises ValueError/TypeError where the call is made, not at realize.

Random tensors (rand, randn, ...) and data tensors are created on the host at creation time, from a numpy
Generator that `Tensor.manual_seed(n)` reseeds; they enter the graph as buffers.
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Iterator, Sequence
from contextlib import ContextDecorator
from typing import Any, ClassVar

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import device as D
from uopir.frontend import dtype_promotion as P
from uopir.frontend import gradient as G
from uopir.frontend import indexing, math_ops, nn_ops, scatter, selection, shape_ops
from uopir.frontend import variable as V
from uopir.frontend.schedule import ScheduleItem, schedule
from uopir.frontend.shapes import broadcast_shape, check_shape, norm_axis, shape_args, tensor_args
from uopir.ir.diagnostics import ArgumentError, AxisError, DTypeError, ShapeError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef
from uopir.ir.symbolic import render, seq, sfloordiv, smax, smul, sprod, ssub, sym_infer
from uopir.ir.uop import UOp

Scalar = bool | int | float
Operand = "Tensor | Scalar"
DTypeLike = DType | str | np.dtype | type | None
LOG2_E = math.log2(math.e)
LN_2 = math.log(2)


# ---- small helpers --------------------------------------------------------------------------------------------------
_UINT_OF_SIZE = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}  # to work on a float's bits

# While a TinyJit captures, realize_all appends the fresh target buffers it allocates to the innermost list (a replay
# allocates new ones in their place instead of writing the captured buffers again).
FRESH_TARGETS: list[list[Any]] = []
# ... and the random tensors drawn on the host, with their generator and shape (a replay draws new ones).
RANDOM_SOURCES: list[list[tuple[Any, Any, tuple[int, ...]]]] = []


# Every live unrealized tensor (weakly: a dead one drops out by itself), by id (== builds a Tensor). When an assign
# is realized, the ones that read its target's old contents keep that value (see `_old_readers`).
_LAZY: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
# A reader of at most this many elements (a loss) is computed with the assign; a larger one (a gradient) reads a
# snapshot of the old contents instead, so a program that does not need it does not grow.
SMALL_READER = 1
# The live tensors whose graph is a pending assign of a buffer (weakly, by id): a realize whose graph contains one
# also realizes that tensor, so it points at its written buffer and the assign is not run a second time.
_PENDING: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


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
    cands = [t for t in list(_LAZY.values()) if id(t) not in realizing and t.device == device
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
            u = u.src[0]
            continue
        chain.append(u)
        u = u.src[0]
    for v in reversed(chain):
        u = v.replace(src=(u, *v.src[1:]))
    return u


def _tensor_type(t: Tensor) -> str:
    return T.tensor_type(t.shape, t.dtype)


_SYM_MOVEMENT = (T.RESHAPE, T.EXPAND, T.PAD, T.SHRINK)  # the movement ops that take symbolic dims


def _creation(fn: Any) -> Any:
    """A creation function that also takes tinygrad's `requires_grad=` keyword."""
    def create(*args: Any, requires_grad: bool | None = None, **kwargs: Any) -> Tensor:
        t = fn(*args, **kwargs)
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t
    create.__name__, create.__qualname__, create.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    create.__wrapped__ = fn  # type: ignore[attr-defined]
    return create


# ---- the Tensor -----------------------------------------------------------------------------------------------------
class Tensor:
    """A lazy n-d array. `.uop` is its tensor-dialect graph; `.device` the device it lives on."""

    __slots__ = ("uop", "device", "grad", "_requires_grad", "__weakref__")
    __hash__ = object.__hash__  # == builds a Tensor, so hashing must not go through it
    __array_ufunc__ = None  # `np_array + tensor` calls Tensor.__radd__ instead of converting the tensor

    training: ClassVar[bool] = False
    no_grad: ClassVar[bool] = False  # while set, every op's result is detached (carries no gradient)
    _rng: ClassVar[np.random.Generator] = np.random.default_rng()

    uop: UOp
    device: str
    grad: Tensor | None

    def __init__(self, data: Any, dtype: DTypeLike = None, device: str | None = None,
                 requires_grad: bool | None = None) -> None:
        self.grad, self._requires_grad = None, None
        self._init(data, dtype, device)
        if self.uop.dtype.is_float:
            G.live(self, True)
        if self.uop.op is not T.BUFFER and self.uop.op is not C.CONST:
            _LAZY[id(self)] = self
        if requires_grad is not None:
            self.requires_grad = requires_grad

    def _init(self, data: Any, dtype: DTypeLike, device: str | None) -> None:
        if isinstance(dtype, str) and dtypes.from_name(dtype) is None and dtype.lower() in D.DEVICES:
            dtype, device = None, dtype  # Tensor(x, "python"): tinygrad's positional device
        dt = P.to_dtype(dtype)
        if isinstance(data, UOp):
            if data.shape is None:
                raise TypeError(f"a Tensor needs a UOp with a shape, got {data.op.name} of type {data.dtype}")
            self.uop, self.device = (data if dt is None else data.cast(dt)), D.canonical(device)
            return
        if isinstance(data, Tensor):
            src = data.cast(dt) if dt is not None else data
            src = src.to(device) if device is not None else src
            self.uop, self.device = src.uop, src.device
            return
        self.device = D.canonical(device)
        if P.is_scalar(data):
            d = dt if dt is not None else P.scalar_dtype(data)
            P.check_fits(data, d)
            self.uop = C.const(d, data, ())
            return
        if isinstance(data, np.ndarray | np.generic):
            arr = np.asarray(data)
            d = dt if dt is not None else P.from_np(arr.dtype)
        elif isinstance(data, list | tuple | range):
            arr, d = P.from_python(data, dt)
        elif isinstance(data, bytes | bytearray):
            arr = np.frombuffer(bytes(data), np.uint8)
            d = dt if dt is not None else dtypes.uint8
        else:
            raise TypeError(f"cannot make a Tensor from {type(data).__name__}")
        self.uop = D.new_buffer(P.host_array(arr, d), d, self.device)

    # ---- internal construction --------------------------------------------------------------------------------------
    def _new(self, u: UOp, device: str | None = None) -> Tensor:
        """Wrap a new tensor value. Its shape is computed now, while every source's shape is already known, so a long
        chain of ops (`x = x + 1` in a loop) never computes shapes recursively, and a shape error shows here."""
        if Tensor.no_grad and u.op is not T.DETACH:
            u = UOp(T.DETACH, u.dtype, (u,))
        u.shape  # noqa: B018 - computed and cached on the UOp
        t = object.__new__(Tensor)
        t.uop, t.device = u, device if device is not None else self.device
        t.grad, t._requires_grad = None, None
        if u.dtype.is_float:
            G.live(t, True)
        _LAZY[id(t)] = t
        return t

    def _op(self, op: OpDef, *srcs: Tensor | Scalar, dtype: DType | None = None, arg: Any = None) -> Tensor:
        """Apply one op; the operands already agree on shape and dtype, Python scalars become shapeless consts."""
        cd = self.dtype
        us = (self.uop,) + tuple(s.uop if isinstance(s, Tensor) else C.const(cd, s) for s in srcs)
        return self._new(UOp(op, dtype if dtype is not None else cd, us, arg))

    def _mv(self, op: OpDef, arg: Any) -> Tensor:
        if op in _SYM_MOVEMENT:  # a symbolic dim in the arg becomes `?` and an operand
            return self._new(T.movement(op, self.uop, arg))
        return self._new(UOp(op, self.dtype, (self.uop,), arg))

    # ---- introspection ----------------------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.uop.shape  # type: ignore[return-value]

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int | UOp:
        return sprod(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def size(self, dim: int | None = None) -> int | tuple[int, ...]:
        return self.shape if dim is None else self.shape[norm_axis(dim, self.ndim, self.shape)]

    def is_floating_point(self) -> bool:
        return self.dtype.is_float

    def __repr__(self) -> str:
        state = "realized" if self.uop.op is T.BUFFER else self.uop.op.name
        return f"<Tensor {state} on {self.device} with shape {V.fmt_dims(self.shape)} and dtype {self.dtype!r}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        return (self[i] for i in range(len(self)))

    # ---- running ----------------------------------------------------------------------------------------------------
    def realize(self, *others: Tensor) -> Tensor:
        """Evaluate the graph on the device, keep the result in a fresh buffer and point this tensor at it. With
        `others`, or when this tensor is an assign, all of them are realized as one program (see `realize_all`)."""
        if others or self.uop.op is T.ASSIGN or (_PENDING and self.uop.op is not T.BUFFER):
            Tensor.realize_all(self, *others)
            return self
        if any(V.is_sym(d) for d in self.shape):
            return self._realize_symbolic()
        if self.uop.op is not T.BUFFER:
            self.uop = D.realize(self.uop, self.device)
            _LAZY.pop(id(self), None)
        return self

    @staticmethod
    def realize_all(*tensors: Tensor) -> None:
        """Realize several tensors as one program per device, so values they share are computed once and their
        assigns are ordered (reads see the values on entry unless they read the assign). Each tensor ends up pointing
        at a buffer: an assign at its target (written in place), any other value at a fresh buffer it is assigned to.
        """
        groups: dict[str, list[Tensor]] = {}
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"realize: expected Tensors, got {type(t).__name__}")
            if t.uop.op is T.BUFFER:
                continue
            if any(V.is_sym(d) for d in t.shape):
                t._realize_symbolic()
                continue
            groups.setdefault(t.device, []).append(t)
        for device, ts in groups.items():
            pending = [t for t in list(_PENDING.values()) if t.device == device and t.uop.op is T.ASSIGN]
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
                _LAZY.pop(id(t), None)
                _PENDING.pop(id(t), None)

    def assign(self, x: Tensor | Scalar | np.ndarray) -> Tensor:
        """Write x into this tensor (lazily; in place when realized): its value becomes x. A realized tensor (a
        buffer, or a reshape/permute/shrink/flip view of one) keeps its buffer, which the realize writes, so every
        other tensor of that buffer sees the new value; an unrealized one just takes x's graph (tinygrad)."""
        if not isinstance(x, Tensor):
            x = Tensor(x, dtype=self.dtype, device=self.device)
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
                _PENDING[id(self)] = self
        else:
            self.uop = x.uop
        _LAZY[id(self)] = self
        return self

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
        if u.op is T.SHRINK and u.src[0].op is T.BUFFER:
            return self  # already a view of a realized buffer (numpy() reads it at the bound values)
        bound = u.unbind_all()[1]
        free = [v.arg[0] for v in u.variables() if v not in bound]
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
        return np.ascontiguousarray(D.buffer_data(t.uop.src[0])[tuple(slice(b, e) for b, e in bounds)])

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

    # ---- devices ----------------------------------------------------------------------------------------------------
    def to(self, device: str | None) -> Tensor:
        """The same value on another device (a tensor.copy)."""
        d = D.canonical(device)
        return self if d == self.device else self._new(UOp(T.COPY, self.dtype, (self.uop,), d), d)

    def clone(self) -> Tensor:
        return self._mv(T.CONTIGUOUS, None)

    def contiguous(self) -> Tensor:
        return self._mv(T.CONTIGUOUS, None)

    def detach(self) -> Tensor:
        return self._mv(T.DETACH, None)

    # ---- autograd (the derivative rules live in gradient.py) -------------------------------------------------------
    @property
    def requires_grad(self) -> bool | None:
        """True or None (the default): backward() gives this tensor a .grad when it is in the graph (as tinygrad).
        False: it does not."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool | None) -> None:
        if value and not self.dtype.is_float:
            raise TypeError(f"only float tensors can require a gradient, got {_tensor_type(self)}")
        if value and self.uop.op is C.CONST:
            # a splat (zeros, ones, full) is one hash-consed node that equal splats share: give it its own buffer
            arr = np.full(self.shape, C.const_value(self.uop), P.to_np(self.dtype))
            self.uop = D.new_buffer(P.host_array(arr, self.dtype), self.dtype, self.device)
        self._requires_grad = value
        G.track(self, bool(value))
        G.live(self, value is None and self.dtype.is_float)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    def _root_gradient(self, gradient: Tensor | None, what: str) -> UOp:
        if not self.dtype.is_float:
            raise TypeError(f"{what}: cannot differentiate a non-float tensor ({_tensor_type(self)})")
        if gradient is None:
            if self.shape != ():
                raise ValueError(f"{what}: without a gradient argument the tensor must be a scalar (shape ()), got "
                                 f"shape {V.fmt_dims(self.shape)}")
            return C.const(self.dtype, 1.0, ())
        if not isinstance(gradient, Tensor) or gradient.shape != self.shape:
            got = V.fmt_dims(gradient.shape) if isinstance(gradient, Tensor) else type(gradient).__name__
            raise ValueError(f"{what}: gradient must be a Tensor of shape {V.fmt_dims(self.shape)}, got {got}")
        return gradient.cast(self.dtype).uop

    def gradient(self, *targets: Tensor, gradient: Tensor | None = None,
                 materialize_grads: bool = False) -> list[Tensor]:
        """d(self)/d(target) for each target, as lazy Tensors (tinygrad's Tensor.gradient). A target self does not
        depend on is an error, unless materialize_grads (then its gradient is zeros)."""
        root = self._root_gradient(gradient, "gradient")
        for t in targets:
            if not isinstance(t, Tensor) or not t.dtype.is_float:
                raise TypeError(f"gradient: targets must be float Tensors, got "
                                f"{_tensor_type(t) if isinstance(t, Tensor) else type(t).__name__}")
        grads = G.compute_gradient(self.uop, root, [t.uop for t in targets])
        out = []
        for i, t in enumerate(targets):
            g = grads.get(t.uop)
            if g is None:
                if not materialize_grads:
                    raise ValueError(f"gradient: target {i} ({_tensor_type(t)}) is not in the graph of this tensor"
                                     f"{self._realized_hint()}; pass materialize_grads=True for a zero gradient")
                out.append(t.zeros_like())
            else:
                out.append(t._new(g))
        return out

    def backward(self, gradient: Tensor | None = None) -> Tensor:
        """Add d(self)/d(t) to t.grad for every live float tensor t other than self that self depends on and whose
        requires_grad is True or None (tinygrad's backward: reset grads with `t.grad = None`; requires_grad=False
        opts out). self must be a scalar unless `gradient` is given."""
        root = self._root_gradient(gradient, "backward")
        params = G.tracked() + [t for t in G.live_tensors() if t is not self and t._requires_grad is None]
        grads = G.compute_gradient(self.uop, root, [t.uop for t in params])
        if not grads:
            raise ValueError(f"backward: no tensor with requires_grad True or None is in the graph of this tensor"
                             f"{self._realized_hint()}")
        for t in params:
            g = grads.get(t.uop)
            if g is not None:
                t.grad = t._new(g) if t.grad is None else t.grad + t._new(g)
        return self

    def _realized_hint(self) -> str:
        return " (it is realized, so its graph is gone: differentiate before realizing it)" \
            if self.uop.op is T.BUFFER else ""

    class train(ContextDecorator):  # noqa: N801 - tinygrad's name
        """`with Tensor.train():` sets Tensor.training (dropout, batchnorm statistics) and restores it after;
        `Tensor.train(False)` for evaluation."""

        def __init__(self, mode: bool = True) -> None:
            self.mode = mode

        def __enter__(self) -> None:
            self.prev, Tensor.training = Tensor.training, self.mode

        def __exit__(self, *exc: object) -> None:
            Tensor.training = self.prev

    class test(ContextDecorator):  # noqa: N801 - tinygrad's name
        """`with Tensor.test():` sets Tensor.no_grad (results carry no gradient) and restores it after."""

        def __init__(self, mode: bool = True) -> None:
            self.mode = mode

        def __enter__(self) -> None:
            self.prev, Tensor.no_grad = Tensor.no_grad, self.mode

        def __exit__(self, *exc: object) -> None:
            Tensor.no_grad = self.prev

    # ---- creation ---------------------------------------------------------------------------------------------------
    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        """Reseed the host generator behind rand/randn/randint/uniform/normal, for reproducible programs."""
        Tensor._rng = np.random.default_rng(seed)

    @staticmethod
    @_creation
    def full(shape: int | Sequence[int], fill_value: Scalar, dtype: DTypeLike = None,
             device: str | None = None) -> Tensor:
        """A splat value: one shaped core.const, no buffer (a symbolic shape: a const expanded to it)."""
        shp = shape_args(shape, ())
        sym = any(V.is_sym(x) for x in shp)
        shp = V.dims(shp, "full") if sym else check_shape(shp)
        if sym and any(not V.is_sym(x) and x < 0 for x in shp):
            raise ValueError(f"full: shape {V.fmt_dims(shp)} must have non-negative dims")
        if not P.is_scalar(fill_value):
            fill_value = np.asarray(fill_value).item()
        d = P.to_dtype(dtype) or P.scalar_dtype(fill_value)
        P.check_fits(fill_value, d)
        if sym:
            return Tensor(T.movement(T.EXPAND, C.const(d, fill_value, (1,) * len(shp)), shp), device=device)
        return Tensor(C.const(d, fill_value, shp), device=device)

    @staticmethod
    @_creation
    def zeros(*shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return Tensor.full(shape_args(shape[0], shape[1:]) if shape else (), 0.0, P.to_dtype(dtype) or
                           P.DEFAULT_FLOAT, device)

    @staticmethod
    @_creation
    def ones(*shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return Tensor.full(shape_args(shape[0], shape[1:]) if shape else (), 1.0, P.to_dtype(dtype) or
                           P.DEFAULT_FLOAT, device)

    @staticmethod
    @_creation
    def empty(*shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """A fresh buffer (zero-filled here, so programs stay deterministic)."""
        shp = check_shape(shape_args(shape[0], shape[1:]) if shape else (), "empty shape")
        d = P.to_dtype(dtype) or P.DEFAULT_FLOAT
        return Tensor(np.zeros(shp, P.to_np(d)), dtype=d, device=device)

    @staticmethod
    @_creation
    def arange(start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: DTypeLike = None,
               device: str | None = None) -> Tensor:
        """start, start+step, ... < stop; int32 when all bounds are ints, else float32 (tinygrad's defaults)."""
        if stop is None:
            start, stop = 0, start
        if any(V.is_sym(v) for v in (start, stop, step)):
            raise TypeError("arange: start, stop and step must be numbers, not symbolic (slice a static arange with "
                            "the Variable instead: Tensor.arange(max)[:n])")
        if step == 0:
            raise ValueError("arange step must not be zero")
        n = max(0, math.ceil((stop - start) / step))
        ints = all(isinstance(v, int) for v in (start, stop, step))
        d = P.to_dtype(dtype) or (P.promote_scalars(start, start + (n - 1) * step) if ints and n else
                                  P.DEFAULT_INT if ints else P.DEFAULT_FLOAT)
        if ints and n:
            P.check_fits(int(start), d)
            P.check_fits(int(start + (n - 1) * step), d)
        vals = start + np.arange(n, dtype=np.float64 if d.is_float else np.int64) * step
        return Tensor(vals, dtype=d, device=device)

    @staticmethod
    @_creation
    def linspace(start: float, stop: float, steps: int, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        if steps < 0:
            raise ArgumentError(f"linspace steps must be >= 0, got {steps}")
        d = P.to_dtype(dtype) or P.DEFAULT_FLOAT
        if d.is_bool:
            raise ArgumentError("linspace with dtype bool is not supported (tinygrad)")
        return Tensor(np.linspace(start, stop, steps), dtype=d, device=device)

    @staticmethod
    @_creation
    def eye(n: int, m: int | None = None, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Ones on the diagonal, built lazily: a column of ones padded by one and re-read row by row."""
        m = n if m is None else m
        check_shape((n, m))
        k = max(n, m)
        d = P.to_dtype(dtype) or P.DEFAULT_FLOAT
        if k == 0:
            return Tensor.zeros(n, m, dtype=d, device=device)
        sq = Tensor.ones(k, 1, dtype=d, device=device).pad(((0, 0), (0, k))).flatten().shrink(((0, k * k),))
        return sq.reshape(k, k).shrink(((0, n), (0, m)))

    def full_like(self, fill_value: Scalar, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return Tensor.full(self.shape, fill_value, P.to_dtype(dtype) or self.dtype, device or self.device)

    def zeros_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return self.full_like(0, dtype, device)

    def ones_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return self.full_like(1, dtype, device)

    @staticmethod
    def _random(shape: tuple, dtype: DTypeLike, device: str | None, gen: Any, default: DType) -> Tensor:
        shp = check_shape(shape_args(shape[0], shape[1:]) if shape else (), "random tensor shape")
        t = Tensor(gen(shp), dtype=P.to_dtype(dtype) or default, device=device)
        if RANDOM_SOURCES:  # a TinyJit capture: a replay draws this tensor again
            RANDOM_SOURCES[-1].append((D.buffer_of(t.uop), gen, shp))
        return t

    @staticmethod
    @_creation
    def rand(*shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Uniform in [0, 1)."""
        return Tensor._random(shape, dtype, device, lambda s: Tensor._rng.random(s), P.DEFAULT_FLOAT)

    @staticmethod
    @_creation
    def randn(*shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Standard normal."""
        return Tensor._random(shape, dtype, device, lambda s: Tensor._rng.standard_normal(s), P.DEFAULT_FLOAT)

    @staticmethod
    @_creation
    def randint(*shape: Any, low: int = 0, high: int = 10, dtype: DTypeLike = None,
                device: str | None = None) -> Tensor:
        """Uniform integers in [low, high)."""
        if high <= low:
            raise ValueError(f"randint needs low < high, got low={low} high={high}")
        return Tensor._random(shape, dtype, device, lambda s: Tensor._rng.integers(low, high, s), P.DEFAULT_INT)

    @staticmethod
    @_creation
    def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, dtype: DTypeLike = None,
                device: str | None = None) -> Tensor:
        if not low < high:
            raise ValueError(f"uniform needs low < high, got low={low}, high={high}")
        return Tensor._random(shape, dtype, device, lambda s: Tensor._rng.uniform(low, high, s), P.DEFAULT_FLOAT)

    @staticmethod
    @_creation
    def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, dtype: DTypeLike = None,
               device: str | None = None) -> Tensor:
        if std < 0:
            raise ValueError(f"normal needs std >= 0, got {std}")
        return Tensor._random(shape, dtype, device, lambda s: Tensor._rng.normal(mean, std, s), P.DEFAULT_FLOAT)

    @staticmethod
    @_creation
    def scaled_uniform(*shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Uniform in [-1, 1) scaled by 1/sqrt(numel) (tinygrad's default layer init)."""
        shp = check_shape(shape_args(shape[0], shape[1:]) if shape else (), "random tensor shape")
        scale = math.prod(shp) ** -0.5 if math.prod(shp) else 1.0
        return Tensor._random(shp, dtype, device, lambda s: Tensor._rng.uniform(-1.0, 1.0, s) * scale, P.DEFAULT_FLOAT)

    @staticmethod
    @_creation
    def glorot_uniform(*shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        shp = shape_args(shape[0], shape[1:]) if shape else ()
        bound = math.sqrt(6 / (shp[0] + math.prod(shp[1:]))) if shp else 1.0
        return Tensor.uniform(shp, low=-bound, high=bound, dtype=dtype, device=device)

    @staticmethod
    @_creation
    def kaiming_uniform(*shape: Any, a: float = 0.01, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        shp = shape_args(shape[0], shape[1:]) if shape else ()
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a**2)) / math.sqrt(math.prod(shp[1:]) or 1)
        return Tensor.uniform(shp, low=-bound, high=bound, dtype=dtype, device=device)

    def rand_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Uniform in [0, 1) of self's shape (self's dtype when it is a float, and its device, unless given)."""
        return Tensor.rand(self.shape, dtype=dtype or (self.dtype if self.dtype.is_float else None),
                           device=device or self.device)

    def randn_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return Tensor.randn(self.shape, dtype=dtype or (self.dtype if self.dtype.is_float else None),
                            device=device or self.device)

    @staticmethod
    def randperm(n: int, device: str | None = None, dtype: DTypeLike = dtypes.int32) -> Tensor:
        """A random permutation of 0..n-1 (drawn on the host, as the other random tensors)."""
        return Tensor(Tensor._rng.permutation(n), dtype=dtype, device=device)

    def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
        """Indices drawn from the (1-d, or 2-d per row) weights of self; int32 (tinygrad)."""
        if not 1 <= self.ndim <= 2 or num_samples < 1:
            raise ValueError(f"multinomial needs 1-d or 2-d weights and num_samples >= 1, got shape {self.shape} "
                             f"and num_samples={num_samples}")
        rows, n = (1, self.shape[0]) if self.ndim == 1 else self.shape
        if not replacement and num_samples > n:
            raise ValueError(f"multinomial without replacement cannot draw {num_samples} of {n} categories")
        draws = num_samples if replacement or num_samples == 1 else n
        u = Tensor(Tensor._rng.random((rows, draws)), dtype=dtypes.float32, device=self.device)
        return nn_ops.multinomial(self, u, num_samples, replacement)

    @staticmethod
    def kaiming_normal(*shape: Any, a: float = 0.01, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        shp = shape_args(shape[0], shape[1:]) if shape else ()
        std = math.sqrt(2.0 / (1 + a**2)) / math.sqrt(math.prod(shp[1:]) or 1)
        return Tensor.normal(shp, mean=0.0, std=std, dtype=dtype, device=device)

    # ---- dtypes -----------------------------------------------------------------------------------------------------
    def cast(self, dtype: DTypeLike) -> Tensor:
        d = P.to_dtype(dtype)
        if d is None:
            raise TypeError("cast needs a dtype")
        return self if d is self.dtype else self._new(self.uop.cast(d))

    def bitcast(self, dtype: DTypeLike) -> Tensor:
        """Reinterpret the bits; the element size must not change."""
        d = P.to_dtype(dtype)
        if d is None:
            raise TypeError("bitcast needs a dtype")
        if d.itemsize != self.dtype.itemsize or d.bits != self.dtype.bits:
            raise ValueError(f"bitcast of {_tensor_type(self)} to {d!r} changes the element size "
                             f"({self.dtype.bits} bits vs {d.bits} bits)")
        return self if d is self.dtype else self._new(UOp(C.BITCAST, d, (self.uop,)))

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def half(self) -> Tensor:
        return self.cast(dtypes.float16)

    def double(self) -> Tensor:
        return self.cast(dtypes.float64)

    def bfloat16(self) -> Tensor:
        return self.cast(dtypes.bfloat16)

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def long(self) -> Tensor:
        return self.cast(dtypes.int64)

    def short(self) -> Tensor:
        return self.cast(dtypes.int16)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)

    # ---- broadcasting -----------------------------------------------------------------------------------------------
    def _to_tensor(self, y: Any) -> Tensor | Scalar:
        if isinstance(y, Tensor):
            if y.device != self.device:
                raise ValueError(f"operands are on different devices: {self.device} and {y.device}; use .to()")
            return y
        if P.is_scalar(y):
            return y
        if isinstance(y, np.bool_ | np.integer | np.floating):  # numpy scalars are weak like Python's (torch)
            return y.item()
        if isinstance(y, np.generic | np.ndarray | list | tuple):
            return Tensor(y, device=self.device)
        raise TypeError(f"unsupported operand type for a Tensor op: {type(y).__name__}")

    def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
        if self.shape == shape:
            return self
        if len(shape) < self.ndim:
            raise ShapeError(f"cannot broadcast {self.shape} to {shape}: the target has fewer dims")
        x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if len(shape) != self.ndim else self
        for s, t in zip(x.shape, shape, strict=True):
            if s != t and s != 1:
                raise ShapeError(f"cannot broadcast {self.shape} to {shape}")
        return x if x.shape == shape else x._mv(T.EXPAND, shape)

    def _broadcasted(self, y: Any, reverse: bool = False, dtype: DType | None = None
                     ) -> tuple[Tensor | Scalar, Tensor | Scalar]:
        """Both operands at their common dtype and shape (a Python scalar stays a scalar), in call order."""
        y = self._to_tensor(y)
        if isinstance(y, Tensor):
            d = dtype or P.promote(self.dtype, y.dtype)
            shape = broadcast_shape(self.shape, y.shape)
            a, b = self.cast(d)._broadcast_to(shape), y.cast(d)._broadcast_to(shape)
        else:
            d = dtype or P.promote_scalar(self.dtype, y)
            if type(y) is int and d.is_int and not d.min <= y <= d.max:
                y = P.wrap_int(y, d)  # tinygrad: the scalar becomes a constant of the tensor's dtype (numpy 2 raises)
            a, b = self.cast(d), y
        return (b, a) if reverse else (a, b)

    @staticmethod
    def _first(a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
        return a if isinstance(a, Tensor) else b  # type: ignore[return-value]

    def _binary(self, op: OpDef, y: Any, reverse: bool = False, dtype: DType | None = None,
                out: DType | None = None) -> Tensor:
        a, b = self._broadcasted(y, reverse, dtype)
        if isinstance(a, Tensor):
            return a._op(op, b, dtype=out)
        t = self._first(a, b)
        return t._new(UOp(op, out or t.dtype, (C.const(t.dtype, a), t.uop)))  # type: ignore[arg-type]

    # ---- arithmetic -------------------------------------------------------------------------------------------------
    def add(self, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        t = self._first(a, b)
        if t.dtype.is_bool:
            return self._binary(C.OR, y, reverse)
        return self._binary(C.ADD, y, reverse)

    def sub(self, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        if self._first(a, b).dtype.is_bool:
            raise TypeError("subtraction of bool tensors is not supported; use ^ or logical_not instead")
        return self._binary(C.SUB, y, reverse)

    def mul(self, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        if self._first(a, b).dtype.is_bool:
            return self._binary(C.AND, y, reverse)
        return self._binary(C.MUL, y, reverse)

    def div(self, y: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
        """True division; ints and bools divide in the default float (float32). rounding_mode: trunc|floor."""
        if rounding_mode == "floor":
            return self.floordiv(y, reverse)
        if rounding_mode == "trunc":
            a, b = self._broadcasted(y, reverse)
            t = self._first(a, b)
            if t.dtype.is_int:
                return t._binary(C.IDIV, b, False) if t is a else t._binary(C.IDIV, a, True)
            return (a / b).trunc()  # type: ignore[operator]
        if rounding_mode is not None:
            raise ArgumentError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        a, b = self._broadcasted(y, reverse)
        d = P.float_of(self._first(a, b).dtype)
        return self._binary(C.FDIV, y, reverse, dtype=d)

    @staticmethod
    def _float_divmod(a: Any, b: Any) -> tuple[Tensor, Tensor]:
        """numpy's float floor division and remainder, bit for bit: built, as numpy builds them, on the exact
        remainder `fmod` (core.mod on floats); half floats are computed in float32 and rounded, as numpy does."""
        t = a if isinstance(a, Tensor) else b
        d = t.dtype
        work = d if d.itemsize >= 4 else dtypes.float32
        a, b = (x.cast(work) if isinstance(x, Tensor) else Tensor.full(t.shape, x, dtype=work, device=t.device)
                for x in (a, b))
        zero = Tensor.full(t.shape, 0.0, dtype=work, device=t.device)
        mod = a._op(C.MOD, b)
        div = (a - mod) / b
        fix = (mod != 0) & ((b < 0) ^ (mod < 0))  # the remainder takes the divisor's sign
        mod = fix.where(mod + b, mod)
        div = fix.where(div - 1, div)
        mod = (mod == 0).where((b < 0).where(-zero, zero), mod)
        floor = div.floor()
        floor = ((div - floor) > 0.5).where(floor + 1, floor)
        quotient = a / b
        floor = (div == 0).where(quotient * 0.0, floor)  # a zero quotient keeps the sign of a / b
        floor = (b == 0).where(quotient, floor)
        return floor.cast(d), mod.cast(d)

    def floordiv(self, y: Any, reverse: bool = False) -> Tensor:
        """Python/numpy floor division: ints from C truncation plus a sign fix-up, floats as numpy computes them."""
        a, b = self._broadcasted(y, reverse)
        t = self._first(a, b)
        d = t.dtype
        if d.is_bool:
            return Tensor._int8_pair(a, b, Tensor.floordiv)
        if d.is_float:
            return Tensor._float_divmod(a, b)[0]
        q = t._binary(C.IDIV, b if t is a else a, t is not a)
        if d.is_unsigned:
            return q
        r = t._binary(C.MOD, b if t is a else a, t is not a)
        fix = (r != 0) & ((r < 0) ^ (b < 0))
        return q - fix.cast(d)

    def mod(self, y: Any, reverse: bool = False) -> Tensor:
        """Python/numpy remainder: the result has the sign of the divisor."""
        a, b = self._broadcasted(y, reverse)
        t = self._first(a, b)
        d = t.dtype
        if d.is_bool:
            return Tensor._int8_pair(a, b, Tensor.mod)
        if d.is_float:
            return Tensor._float_divmod(a, b)[1]
        r = t._binary(C.MOD, b if t is a else a, t is not a)
        if d.is_unsigned:
            return r
        fix = (r != 0) & ((r < 0) ^ (b < 0))
        return fix.where(r + b, r)

    @staticmethod
    def _int8_pair(a: Tensor | Scalar, b: Tensor | Scalar, op: Any) -> Tensor:
        """op on bool operands as int8 (numpy's bool // and %); either one may be a Python scalar."""
        a8, b8 = (v.cast(dtypes.int8) if isinstance(v, Tensor) else int(v) for v in (a, b))
        return op(a8, b8) if isinstance(a8, Tensor) else op(b8, a8, True)

    def pow(self, y: Any, reverse: bool = False) -> Tensor:
        """x ** y. Small non-negative integer scalar exponents multiply (exact); integer tensors use square-and-
        multiply over the exponent's bits, so they wrap like numpy (bool ** bool is int8, as numpy); floats use
        exp2(y * log2|x|) with C pow's rules for negative and signed-zero bases, infinities and 1 ** nan, half
        floats computed in float32. An int/bool tensor to a negative Python int raises DTypeError (a RuntimeError, as
        tinygrad and torch); a negative element of an integer exponent tensor truncates 1 / x**|y|."""
        y = self._to_tensor(y)
        if not reverse and type(y) is int and y < 0 and not self.dtype.is_float:
            raise DTypeError(f"{_tensor_type(self)} ** {y}: integers to negative integer powers are not allowed "
                             f"(tinygrad, torch); cast to a float first")
        if not reverse and P.is_scalar(y) and not isinstance(y, bool) and float(y).is_integer() and 0 <= y <= 64 \
                and (y > 0 or not self.dtype.is_float):  # float x**0 goes the general way: x stays in the graph
            n = int(y)
            d = P.promote_scalar(self.dtype, y)
            base, acc = self.cast(d), None
            while True:
                if n & 1:
                    acc = base if acc is None else acc * base
                n >>= 1
                if not n:
                    break
                base = base * base
            return acc if acc is not None else self.cast(d).ones_like()
        a, b = self._broadcasted(y, reverse)
        t = self._first(a, b)
        d = t.dtype
        A = a if isinstance(a, Tensor) else t.full_like(a)
        B = b if isinstance(b, Tensor) else t.full_like(b)
        if d.is_bool:
            A, B, d = A.cast(dtypes.int8), B.cast(dtypes.int8), dtypes.int8
        if not d.is_float:
            return Tensor._ipow(A, B)
        if d in (dtypes.float16, dtypes.bfloat16):
            return Tensor._fpow(A.cast(dtypes.float32), B.cast(dtypes.float32)).cast(d)
        return Tensor._fpow(A, B)

    @staticmethod
    def _ipow(a: Tensor, b: Tensor) -> Tensor:
        """Integer power with wrap-around: square and multiply over every bit of b (b < 0: trunc(1 / a**|b|))."""
        d = a.dtype
        nbits = d.bits - (0 if d.is_unsigned else 1)
        e = b if d.is_unsigned else b.maximum(0)
        acc, base = a.ones_like(), a
        for i in range(nbits):
            acc = ((e >> i) & 1).cast(dtypes.bool).where(acc * base, acc)
            if i + 1 < nbits:
                base = base * base
        if d.is_unsigned:
            return acc
        f64 = dtypes.float64
        neg = Tensor._fpow(a.cast(f64), b.cast(f64)).trunc().cast(d)
        return (b < 0).where(neg, acc)

    @staticmethod
    def _fpow(a: Tensor, b: Tensor) -> Tensor:
        mag = (b * a.abs().log2()).exp2()
        bi = b.trunc()
        is_int = bi == b  # true for ±inf, false for nan
        odd = (bi - (bi * 0.5).trunc() * 2).abs() == 1  # false for ±inf and nan
        negbase = (a < 0) | ((a == 0) & (a.reciprocal() < 0))  # -0.0 counts as negative (its sign can show)
        nonint = ((a == 0) | (a == float("-inf"))).where(mag, float("nan"))  # (-0)**0.5 = 0, (-inf)**0.5 = inf
        signed = negbase.where(is_int.where(odd.where(-mag, mag), nonint), mag)
        one = (b == 0) | (a == 1) | ((a.abs() == 1) & b.isinf())  # x**0 = 1**y = (-1)**±inf = 1, even for nan
        return one.where(1.0, signed)

    def __add__(self, y: Any) -> Tensor:
        return self.add(y)

    def __radd__(self, y: Any) -> Tensor:
        return self.add(y, True)

    def __sub__(self, y: Any) -> Tensor:
        return self.sub(y)

    def __rsub__(self, y: Any) -> Tensor:
        return self.sub(y, True)

    def __mul__(self, y: Any) -> Tensor:
        return self.mul(y)

    def __rmul__(self, y: Any) -> Tensor:
        return self.mul(y, True)

    def __truediv__(self, y: Any) -> Tensor:
        return self.div(y)

    def __rtruediv__(self, y: Any) -> Tensor:
        return self.div(y, True)

    def __floordiv__(self, y: Any) -> Tensor:
        return self.floordiv(y)

    def __rfloordiv__(self, y: Any) -> Tensor:
        return self.floordiv(y, True)

    def __mod__(self, y: Any) -> Tensor:
        return self.mod(y)

    def __rmod__(self, y: Any) -> Tensor:
        return self.mod(y, True)

    def __pow__(self, y: Any) -> Tensor:
        return self.pow(y)

    def __rpow__(self, y: Any) -> Tensor:
        return self.pow(y, True)

    def __matmul__(self, y: Tensor) -> Tensor:
        return self.matmul(y)

    def __rmatmul__(self, y: Any) -> Tensor:
        return Tensor(y, device=self.device).matmul(self)

    def __neg__(self) -> Tensor:
        return self.neg()

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return self.abs()

    def __invert__(self) -> Tensor:
        return self.bitwise_not()

    def neg(self) -> Tensor:
        """-x; for bool the logical not (tinygrad)."""
        return self.logical_not() if self.dtype.is_bool else self._op(C.NEG)

    # ---- comparisons and logic --------------------------------------------------------------------------------------
    def _compare(self, op: OpDef, y: Any, reverse: bool = False) -> Tensor:
        """A comparison; with a Python int outside an int tensor's range the answer is known (numpy 2 defines it)."""
        if type(y) is int and self.dtype.is_int and not self.dtype.min <= y <= self.dtype.max:
            above = y > self.dtype.max  # y is above every element (else below every one)
            value = {C.CMPEQ: False, C.CMPNE: True}.get(op, above != reverse)  # self < y, or y < self when reversed
            return Tensor.full(self.shape, value, dtype=dtypes.bool, device=self.device)
        return self._binary(op, y, reverse, out=dtypes.bool)

    def __lt__(self, y: Any) -> Tensor:
        return self._compare(C.CMPLT, y)

    def __gt__(self, y: Any) -> Tensor:
        return self._compare(C.CMPLT, y, reverse=True)

    def __le__(self, y: Any) -> Tensor:
        return (self < y) | (self == y)

    def __ge__(self, y: Any) -> Tensor:
        return (self > y) | (self == y)

    def __eq__(self, y: Any) -> Tensor:  # type: ignore[override]
        return self._compare(C.CMPEQ, y)

    def __ne__(self, y: Any) -> Tensor:  # type: ignore[override]
        return self._compare(C.CMPNE, y)

    def _bitwise(self, op: OpDef, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        d = self._first(a, b).dtype
        if not (d.is_int or d.is_bool):
            raise TypeError(f"{op.mnemonic} needs int or bool tensors, got {d!r}")
        return self._binary(op, y, reverse)

    def bitwise_and(self, y: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(C.AND, y, reverse)

    def bitwise_or(self, y: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(C.OR, y, reverse)

    def bitwise_xor(self, y: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(C.XOR, y, reverse)

    def __and__(self, y: Any) -> Tensor:
        return self.bitwise_and(y)

    def __rand__(self, y: Any) -> Tensor:
        return self.bitwise_and(y, True)

    def __or__(self, y: Any) -> Tensor:
        return self.bitwise_or(y)

    def __ror__(self, y: Any) -> Tensor:
        return self.bitwise_or(y, True)

    def __xor__(self, y: Any) -> Tensor:
        return self.bitwise_xor(y)

    def __rxor__(self, y: Any) -> Tensor:
        return self.bitwise_xor(y, True)

    def bitwise_not(self) -> Tensor:
        if self.dtype.is_bool:
            return self._op(C.XOR, True)
        if not self.dtype.is_int:
            raise TypeError(f"~ needs an int or bool tensor, got {self.dtype!r}")
        return self._op(C.XOR, -1)

    def logical_not(self) -> Tensor:
        return self.cast(dtypes.bool)._op(C.XOR, True)

    def _shift(self, op: OpDef, y: Any, reverse: bool = False) -> Tensor:
        a, b = self._broadcasted(y, reverse)
        d = self._first(a, b).dtype
        if not d.is_int:
            raise DTypeError(f"shifts need int tensors, got {d!r}")
        if not reverse and isinstance(y, int) and not 0 <= y < d.bits:
            # a shift by a negative amount or by the width or more has no one meaning (C: undefined, numpy: 0)
            raise ValueError(f"shift amount {y} is out of range for {d.name} (0 to {d.bits - 1})")
        return self._binary(op, y, reverse)

    def lshift(self, y: Any) -> Tensor:
        return self._shift(C.SHL, y)

    def rshift(self, y: Any) -> Tensor:
        return self._shift(C.SHR, y)

    def __lshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHL, y)

    def __rshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHR, y)

    def __rlshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHL, y, True)

    def __rrshift__(self, y: Any) -> Tensor:
        return self._shift(C.SHR, y, True)

    def where(self: Tensor, x: Any, y: Any) -> Tensor:
        """self ? x : y, with the three broadcast together; x and y promote like a binary op."""
        cond = self.cast(dtypes.bool)
        xt, yt = cond._to_tensor(x), cond._to_tensor(y)
        if isinstance(xt, Tensor) and isinstance(yt, Tensor):
            d = P.promote(xt.dtype, yt.dtype)
        elif isinstance(xt, Tensor):
            d = P.promote_scalar(xt.dtype, yt)  # type: ignore[arg-type]
        elif isinstance(yt, Tensor):
            d = P.promote_scalar(yt.dtype, xt)  # type: ignore[arg-type]
        else:
            d = P.promote_scalars(xt, yt)  # type: ignore[arg-type]
        shapes = [v.shape for v in (cond, xt, yt) if isinstance(v, Tensor)]
        shape = broadcast_shape(*shapes)
        for v in (xt, yt):
            P.check_fits(v, d)
        us = tuple(v.cast(d)._broadcast_to(shape).uop if isinstance(v, Tensor) else C.const(d, v) for v in (xt, yt))
        return self._new(UOp(C.WHERE, d, (cond._broadcast_to(shape).uop, *us)))

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        return mask.where(value, self)

    def maximum(self, y: Any) -> Tensor:
        a, b = self._broadcasted(y)
        if self._first(a, b).dtype.is_bool:
            return a | b  # type: ignore[operator]
        return self._binary(C.MAX, y)

    def minimum(self, y: Any) -> Tensor:
        a, b = self._broadcasted(y)
        t = self._first(a, b)
        if t.dtype.is_bool:
            return a & b  # type: ignore[operator]
        if t.dtype.is_float:
            return -((-a).maximum(-b))  # type: ignore[operator]
        return (a < b).where(a, b) if isinstance(a, Tensor) else (b > a).where(a, b)  # type: ignore[operator]

    def clip(self, min_: Any = None, max_: Any = None) -> Tensor:
        """numpy clip: minimum(maximum(x, min_), max_). On floats it selects the bound where x is at or past it, so the
        gradient is 0 there (torch's) and NaN stays NaN."""
        if min_ is None and max_ is None:
            raise ArgumentError("clip needs min_ or max_")
        if self.dtype.is_float and not isinstance(min_, Tensor) and not isinstance(max_, Tensor):
            x = self if min_ is None else (self <= min_).where(min_, self)
            return x if max_ is None else (x >= max_).where(max_, x)
        x = self if min_ is None else self.maximum(min_)
        return x if max_ is None else x.minimum(max_)

    clamp = clip

    # ---- unary math -------------------------------------------------------------------------------------------------
    def _float(self) -> Tensor:
        return self.cast(P.float_of(self.dtype))

    def exp2(self) -> Tensor:
        return self._float()._op(C.EXP2)

    def log2(self) -> Tensor:
        return self._float()._op(C.LOG2)

    def exp(self) -> Tensor:
        return (self._float() * LOG2_E).exp2()

    def log(self) -> Tensor:
        return self.log2() * LN_2

    def sqrt(self) -> Tensor:
        return self._float()._op(C.SQRT)

    def rsqrt(self) -> Tensor:
        return self.sqrt().reciprocal()

    def reciprocal(self) -> Tensor:
        return self._float()._op(C.RECIP)

    def sin(self) -> Tensor:
        return self._float()._op(C.SIN)

    def cos(self) -> Tensor:
        return math_ops.cos(self._float())

    def tan(self) -> Tensor:
        return self.sin() / self.cos()

    def square(self) -> Tensor:
        return self * self

    def trunc(self) -> Tensor:
        return self._op(C.TRUNC) if self.dtype.is_float else self

    def floor(self) -> Tensor:
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return (t > self).where(t - 1, t)

    def ceil(self) -> Tensor:
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return (t < self).where(t + 1, t)  # not t + 0.0, which would lose the sign of ceil(-0.3) = -0.0

    def round(self) -> Tensor:
        """Round half to even (numpy)."""
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        frac = self - t
        away = t + self.sign()
        odd = (t - (t * 0.5).trunc() * 2) != 0
        half = frac.abs() == 0.5
        return (frac.abs() > 0.5).where(away, (half & odd).where(away, t))

    def abs(self) -> Tensor:
        """|x|; on floats the sign bit is cleared, as numpy (abs(-0.0) is +0.0, a NaN keeps its payload)."""
        d = self.dtype
        if d.is_bool or d.is_unsigned:
            return self
        if d.is_float:
            bits = _UINT_OF_SIZE[d.itemsize]
            return (self.bitcast(bits) & ((1 << (d.bits - 1)) - 1)).bitcast(d)
        return (self < 0).where(-self, self)

    def sign(self) -> Tensor:
        d = self.dtype
        if d.is_bool:
            return self
        pos = (self > 0).cast(d)
        if d.is_unsigned:
            return pos
        if d.is_float:
            return (self > 0).where(1.0, (self < 0).where(-1.0, (self == 0).where(0.0, self)))  # ±0 -> +0, nan
        return pos - (self < 0).cast(d)

    def isnan(self) -> Tensor:
        return self != self

    def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
        pos = self == float("inf") if detect_positive and self.dtype.is_float else self.zeros_like(dtypes.bool)
        neg = self == float("-inf") if detect_negative and self.dtype.is_float else self.zeros_like(dtypes.bool)
        return pos | neg

    def isfinite(self) -> Tensor:
        return (self.isinf() | self.isnan()).logical_not()

    def lerp(self, end: Any, weight: Any) -> Tensor:
        return self + (end - self) * weight

    # inverse / hyperbolic trigonometry and friends (decompositions in math_ops)
    def asin(self) -> Tensor:
        return math_ops.asin(self)

    def acos(self) -> Tensor:
        return math_ops.acos(self)

    def atan(self) -> Tensor:
        return math_ops.atan(self)

    def sinh(self) -> Tensor:
        return math_ops.sinh(self)

    def cosh(self) -> Tensor:
        return math_ops.cosh(self)

    def asinh(self) -> Tensor:
        return math_ops.asinh(self)

    def acosh(self) -> Tensor:
        return math_ops.acosh(self)

    def atanh(self) -> Tensor:
        return math_ops.atanh(self)

    def log10(self) -> Tensor:
        return math_ops.log10(self)

    def _broadcast_pair(self, y: Any) -> tuple[Tensor, Tensor]:
        a, b = self._broadcasted(y)
        t = self._first(a, b)
        return tuple(v if isinstance(v, Tensor) else t.full_like(v) for v in (a, b))  # type: ignore[return-value]

    def logaddexp(self, other: Any) -> Tensor:
        return math_ops.logaddexp(*self._broadcast_pair(other))

    def copysign(self, other: Any) -> Tensor:
        """|self| with the sign (bit) of other, in a float dtype (torch)."""
        return math_ops.copysign(*self._broadcast_pair(other))

    def fmod(self, x: Any) -> Tensor:
        """C remainder (sign of the dividend): core.mod, which is C's % on ints and fmod on floats."""
        a, b = self._broadcasted(x)
        t = self._first(a, b)
        if t.dtype.is_bool:
            return Tensor._int8_pair(a, b, Tensor.fmod)
        if t.dtype in (dtypes.float16, dtypes.bfloat16):
            return Tensor.fmod(*(v.float() if isinstance(v, Tensor) else v for v in (a, b))).cast(t.dtype)
        return self._binary(C.MOD, x)

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        return math_ops.isclose(*self._broadcast_pair(other), rtol, atol, equal_nan)

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        return self.isclose(other, rtol, atol, equal_nan).all()

    # ---- activations ------------------------------------------------------------------------------------------------
    def relu(self) -> Tensor:
        """max(x, 0); on floats a select, so the gradient at 0 is 0 (torch, tinygrad) and NaN stays NaN."""
        return (self <= 0).where(0, self) if self.dtype.is_float else self.maximum(0)

    def relu6(self) -> Tensor:
        return self.relu().minimum(6)

    def leaky_relu(self, neg_slope: float = 0.01) -> Tensor:
        return (self < 0).where(self * neg_slope, self)

    def sigmoid(self) -> Tensor:
        return (1 + (-self._float()).exp()).reciprocal()

    def tanh(self) -> Tensor:
        return 2.0 * (2.0 * self._float()).sigmoid() - 1.0

    def gelu(self, approximate: str = "tanh") -> Tensor:
        """approximate="tanh" (tinygrad's default) or "none": x * Phi(x) with erf."""
        x = self._float()
        if approximate == "none":
            return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
        if approximate != "tanh":
            raise ValueError(f"gelu approximate must be 'tanh' or 'none', got {approximate!r}")
        return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())

    def quick_gelu(self) -> Tensor:
        return self * (self * 1.702).sigmoid()

    def silu(self) -> Tensor:
        return self * self.sigmoid()

    swish = silu

    def softplus(self, beta: float = 1.0) -> Tensor:
        """log(1 + exp(beta x)) / beta, in the overflow-free form max(z, 0) + log(1 + exp(-|z|))."""
        z = self._float() * beta
        return (z.relu() + (1 + (-z.abs()).exp()).log()) * (1.0 / beta)

    def mish(self) -> Tensor:
        return self * self.softplus().tanh()

    def elu(self, alpha: float = 1.0) -> Tensor:
        x = self._float()
        return (x > 0).where(x, alpha * (x.exp() - 1))

    def celu(self, alpha: float = 1.0) -> Tensor:
        x = self._float()
        return x.maximum(0) + (alpha * ((x / alpha).exp() - 1)).minimum(0)

    def hardswish(self) -> Tensor:
        return self * (self + 3).relu6() * (1 / 6)

    def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
        return (alpha * self + beta).relu().minimum(1)

    def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
        return self.clip(min_val, max_val)

    def erf(self) -> Tensor:
        """Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7)."""
        x = self._float()
        t = 1.0 / (1.0 + 0.3275911 * x.abs())
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        return x.sign() * (1.0 - poly * (-(x * x)).exp())

    def softsign(self) -> Tensor:
        return math_ops.softsign(self)

    def logsigmoid(self) -> Tensor:
        return math_ops.logsigmoid(self)

    def selu(self, alpha: float = math_ops.SELU_ALPHA, gamma: float = math_ops.SELU_SCALE) -> Tensor:
        """Scaled ELU with torch's constants (tinygrad rounds them to 1.67326 and 1.0507)."""
        return math_ops.selu(self, alpha, gamma)

    # ---- movement ---------------------------------------------------------------------------------------------------
    def reshape(self, shape: Any, *args: int) -> Tensor:
        """New shape with the same elements; one -1 is inferred, None keeps that dim."""
        new = list(shape_args(shape, args))
        new = [self.shape[i] if s is None else s for i, s in enumerate(new)]
        if any(V.is_sym(s) for s in new) or any(V.is_sym(s) for s in self.shape):
            return self._reshape_symbolic(new)
        for s in new:
            if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < -1:
                raise ShapeError(f"cannot reshape {self.shape} to {tuple(new)}: dims must be ints >= -1")
        if new.count(-1) > 1:
            raise ShapeError(f"cannot reshape {self.shape} to {tuple(new)}: only one dim can be -1")
        if -1 in new:
            known = math.prod(s for s in new if s != -1)
            if known == 0 or self.numel() % known:
                raise ShapeError(f"cannot reshape {self.shape} ({self.numel()} elements) to {tuple(new)}")
            new[new.index(-1)] = self.numel() // known
        shp = tuple(int(s) for s in new)
        if math.prod(shp) != self.numel():
            raise ShapeError(f"cannot reshape {self.shape} ({self.numel()} elements) to {shp} "
                             f"({math.prod(shp)} elements)")
        return self if shp == self.shape else self._mv(T.RESHAPE, shp)

    def _reshape_symbolic(self, new: list) -> Tensor:
        """reshape where a dim is symbolic: the element counts must be equal for every value of the variables
        (so a static shape cannot become a symbolic one, as in tinygrad)."""
        new = [s if V.is_sym(s) or s != -1 else -1 for s in new]
        if new.count(-1) > 1:
            raise ShapeError(f"reshape: cannot reshape {V.fmt_dims(self.shape)} to {V.fmt_dims(new)}: only one dim "
                             f"can be -1")
        for s in new:
            if not V.is_sym(s) and (isinstance(s, bool) or not isinstance(s, int | np.integer) or s < -1):
                raise ShapeError(f"reshape: cannot reshape {V.fmt_dims(self.shape)} to {V.fmt_dims(new)}: dims must "
                                 f"be ints >= -1 or Variables")
        n = self.numel()
        if -1 in new:
            known = sprod(V.as_dim(s, "reshape") for s in new if V.is_sym(s) or s != -1)
            q = sfloordiv(n, known) if not V.is_sym(known) and known else None
            if q is None or not seq(smul(q, known), n):
                raise ShapeError(f"reshape: cannot infer the -1 of {V.fmt_dims(new)} from "
                                 f"{V.fmt_dims(self.shape)} ({render(n)} elements)")
            new[new.index(-1)] = q
        shp = V.dims(new, "reshape")
        if not seq(sprod(shp), n):
            raise ShapeError(f"reshape: cannot reshape {V.fmt_dims(self.shape)} ({render(n)} elements) to "
                             f"{V.fmt_dims(shp)} ({render(sprod(shp))} elements)")
        return self if shp == self.shape else self._mv(T.RESHAPE, shp)

    def view(self, shape: Any, *args: int) -> Tensor:
        return self.reshape(shape, *args)

    def permute(self, order: Any, *args: int) -> Tensor:
        perm = tuple(norm_axis(a, self.ndim, self.shape) for a in shape_args(order, args))
        if sorted(perm) != list(range(self.ndim)):
            raise ShapeError(f"{shape_args(order, args)} is not a permutation of the axes of shape {self.shape}")
        return self if perm == tuple(range(self.ndim)) else self._mv(T.PERMUTE, perm)

    def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
        """Swap two axes (defaults as tinygrad: 1 and 0)."""
        order = list(range(self.ndim))
        a, b = norm_axis(dim0, self.ndim, self.shape), norm_axis(dim1, self.ndim, self.shape)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> Tensor:  # noqa: N802 - tinygrad's name
        """transpose(1, 0), as tinygrad (numpy's .T reverses all axes; the two agree for 2-d)."""
        return self.transpose()

    def expand(self, shape: Any, *args: int) -> Tensor:
        """Broadcast to a shape; -1 keeps a dim; new leading dims may be added."""
        new = shape_args(shape, args)
        if len(new) < self.ndim:
            raise ShapeError(f"cannot expand {self.shape} to {tuple(new)}: the target has fewer dims")
        lead = len(new) - self.ndim
        full = tuple(self.shape[i - lead] if not V.is_sym(s) and s == -1 and i >= lead else s
                     for i, s in enumerate(new))
        if any(V.is_sym(s) for s in full):
            full = V.dims(full, "expand")
            if any(not V.is_sym(s) and s < 0 for s in full):
                raise ValueError(f"expand: shape {V.fmt_dims(full)} must have non-negative dims")
        else:
            check_shape(full, "expand shape")
        for i, s in enumerate(self.shape):
            if s != full[i + lead] and s != 1:
                raise ShapeError(f"cannot expand {V.fmt_dims(self.shape)} to {V.fmt_dims(full)}: dim {i} has size "
                                 f"{render(s)}, not 1")
        return self._broadcast_to(full)

    def broadcast_to(self, shape: Any) -> Tensor:
        return self.expand(shape)

    def pad(self, padding: Sequence[Any], mode: str = "constant", value: Scalar = 0.0) -> Tensor:
        """Pad with a constant (or, with mode "reflect" / "replicate" / "circular", torch's mirrored, edge or
        wrapped values: shape_ops.pad_mode). padding: one (before, after) pair (or None) per dim, or a flat
        torch-style (left, right, top, bottom, ...) tuple starting at the last dim. Negative amounts crop."""
        if mode not in ("constant", "reflect", "replicate", "circular"):
            raise NotImplementedError(f"pad mode {mode!r} is not supported (constant, reflect, replicate, circular)")
        if not isinstance(padding, Sequence):
            raise TypeError(f"padding must be a sequence, got {type(padding).__name__}")
        if all(isinstance(p, int | np.integer | UOp) for p in padding):
            if len(padding) % 2 or len(padding) > 2 * self.ndim:
                raise ValueError(f"flat padding {tuple(padding)} needs an even length <= {2 * self.ndim} "
                                 f"for shape {self.shape}")
            pairs = [(0, 0)] * self.ndim
            for i in range(len(padding) // 2):
                pairs[self.ndim - 1 - i] = (V.as_dim(padding[2 * i], "pad"), V.as_dim(padding[2 * i + 1], "pad"))
        else:
            if len(padding) != self.ndim:
                raise ValueError(f"padding {tuple(padding)} needs {self.ndim} (before, after) pairs for shape "
                                 f"{self.shape}")
            pairs = [(0, 0) if p is None else (V.as_dim(p[0], "pad"), V.as_dim(p[1], "pad")) for p in padding]
        if mode != "constant":
            return shape_ops.pad_mode(self, pairs, mode)
        for v in (v for pr in pairs for v in pr if V.is_sym(v)):
            val = V.value_of(v)
            if val is not None and val < 0:
                raise ValueError(f"pad: amount {render(v)} is {val} at its bound value; a symbolic amount must not be "
                                 f"negative (crop with shrink)")
        x = self
        if any(not V.is_sym(v) and v < 0 for pr in pairs for v in pr):
            def crop(v: int | UOp) -> int:
                return 0 if V.is_sym(v) else max(0, -v)

            bounds = tuple((crop(b), ssub(s, crop(a))) for (b, a), s in zip(pairs, self.shape, strict=True))
            if any(not V.is_sym(lo) and not V.is_sym(hi) and lo > hi for lo, hi in bounds):
                raise ValueError(f"padding {tuple(pairs)} crops more than shape {self.shape} has")
            x = x.shrink(bounds)
            pairs = [(b if V.is_sym(b) else max(0, b), a if V.is_sym(a) else max(0, a)) for b, a in pairs]
        if all(not V.is_sym(b) and not V.is_sym(a) and b == 0 and a == 0 for b, a in pairs):
            return x
        pads = tuple(pairs)
        out = x._mv(T.PAD, pads)
        if value == 0 and math.copysign(1.0, value) > 0:  # -0.0 == 0, but pads with its own sign
            return out
        mask = Tensor.full(x.shape, True, dtypes.bool, self.device)._mv(T.PAD, pads)
        return out._new(UOp(C.WHERE, out.dtype, (mask.uop, out.uop, C.const(out.dtype, value))))

    def shrink(self, arg: Sequence[tuple[int, int] | None]) -> Tensor:
        """Keep [start, end) on each dim (None keeps the dim)."""
        if len(arg) != self.ndim:
            raise ValueError(f"shrink {tuple(arg)} needs one (start, end) per dim of shape {self.shape}")
        bounds = tuple((0, s) if a is None else (V.as_dim(a[0], "shrink"), V.as_dim(a[1], "shrink"))
                       for a, s in zip(arg, self.shape, strict=True))
        if any(V.is_sym(v) for v in (*self.shape, *(v for b in bounds for v in b))):
            self._check_symbolic_shrink(bounds)
            return self if all(b == (0, s) for b, s in zip(bounds, self.shape, strict=True)) else \
                self._mv(T.SHRINK, bounds)
        for (lo, hi), s in zip(bounds, self.shape, strict=True):
            if not 0 <= lo <= hi <= s:
                raise ValueError(f"shrink {bounds} is out of bounds for shape {self.shape}")
        if all(b == (0, s) for b, s in zip(bounds, self.shape, strict=True)):
            return self
        return self._mv(T.SHRINK, bounds)

    def _check_symbolic_shrink(self, bounds: tuple) -> None:
        """0 <= start <= end <= size on each dim, at the bound values where every variable has one."""
        for i, ((lo, hi), s) in enumerate(zip(bounds, self.shape, strict=True)):
            vals = [V.value_of(v) for v in (lo, hi, s)]
            if None not in vals and not 0 <= vals[0] <= vals[1] <= vals[2]:
                raise ValueError(f"shrink ({', '.join(V.fmt_dims(b) for b in bounds)}) is out of bounds for "
                                 f"shape {V.fmt_dims(self.shape)}: dim {i} needs 0 <= {render(lo)} <= {render(hi)} <= "
                                 f"{render(s)}, which is 0 <= {vals[0]} <= {vals[1]} <= {vals[2]} at the bound values")

    def flip(self, axis: Any, *args: int) -> Tensor:
        axes = tuple(norm_axis(a, self.ndim, self.shape) for a in shape_args(axis, args))
        if len(set(axes)) != len(axes):
            raise ShapeError(f"flip axes {axes} repeat an axis")
        return self._mv(T.FLIP, axes) if axes else self

    def squeeze(self, dim: int | None = None) -> Tensor:
        """Drop size-1 dims (all, or just `dim` when it has size 1)."""
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        d = norm_axis(dim, self.ndim, self.shape)  # a 0-d tensor takes 0 and -1, else AxisError (tinygrad)
        if self.ndim == 0:
            return self
        return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])

    def unsqueeze(self, dim: int) -> Tensor:
        d = norm_axis(dim, self.ndim + 1, self.shape)
        return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        s, e = norm_axis(start_dim, self.ndim, self.shape), norm_axis(end_dim, self.ndim, self.shape)
        if s > e:
            raise ValueError(f"flatten start_dim {start_dim} comes after end_dim {end_dim} for shape {self.shape}")
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        d = norm_axis(dim, self.ndim, self.shape)
        return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

    def repeat(self, repeats: Any, *args: int) -> Tensor:
        """Tile the tensor (torch's repeat / numpy's tile): repeats has at least ndim entries."""
        reps = shape_args(repeats, args)
        if len(reps) < self.ndim:
            raise ValueError(f"repeat {reps} needs at least {self.ndim} entries for shape {self.shape}")
        check_shape(reps, "repeats")
        base = self.reshape((1,) * (len(reps) - self.ndim) + self.shape)
        inter = tuple(v for s in base.shape for v in (1, s))
        target = tuple(v for r, s in zip(reps, base.shape, strict=True) for v in (r, s))
        return base.reshape(inter).expand(target).reshape(tuple(r * s for r, s in zip(reps, base.shape, strict=True)))

    def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
        """Join along an existing dim: each piece padded into place and selected by a padded mask (a `where`, so
        every value, -0.0 and NaN payloads included, arrives bit for bit). `Tensor.cat((a, b))` works too."""
        ts = tensor_args(self, args, "cat")
        self = ts[0]
        for t in ts:
            if not isinstance(t, Tensor):
                raise TypeError(f"cat takes Tensors, got {type(t).__name__}")
            if t.ndim != self.ndim:
                raise ShapeError(f"cat needs tensors of one rank, got shapes {', '.join(str(x.shape) for x in ts)}")
        if self.ndim == 0:
            raise AxisError("cannot cat 0-d tensors (they have no dim to join along); use stack")
        d = norm_axis(dim, self.ndim, self.shape)
        for t in ts:
            if t.shape[:d] + t.shape[d + 1:] != self.shape[:d] + self.shape[d + 1:]:
                raise ShapeError(f"cat along dim {d} needs equal other dims, got shapes "
                                 f"{', '.join(str(x.shape) for x in ts)}")
        dt = P.promote(*(t.dtype for t in ts))
        total = sum(t.shape[d] for t in ts)
        out: Tensor | None = None
        off = 0
        for t in ts:
            pads = [(0, 0)] * self.ndim
            pads[d] = (off, total - off - t.shape[d])
            off += t.shape[d]
            p = t.cast(dt).pad(pads)
            if out is None:
                out = p
            else:
                inside = Tensor.full(t.shape, True, dtype=dtypes.bool, device=self.device).pad(pads)
                out = inside.where(p, out)
        return out  # type: ignore[return-value]

    def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
        """Join along a new dim; `Tensor.stack(a, b)`, `a.stack(b)` and `Tensor.stack((a, b))` (tinygrad's forms)."""
        ts = tensor_args(self, args, "stack")
        self = ts[0]
        if not isinstance(self, Tensor):
            raise TypeError(f"stack takes Tensors, got {type(self).__name__}")
        for t in ts:
            if t.shape != self.shape:
                raise ShapeError(f"stack needs equal shapes, got {', '.join(str(x.shape) for x in ts)}")
        d = norm_axis(dim, self.ndim + 1, self.shape)
        return ts[0].unsqueeze(d).cat(*(t.unsqueeze(d) for t in ts[1:]), dim=d)

    def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces of `sizes` along dim (an int: equal pieces, the last may be smaller)."""
        d = norm_axis(dim, self.ndim, self.shape)
        n = self.shape[d]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise ValueError(f"split size must be positive, got {sizes}")
            sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
        if sum(sizes) != n:
            raise ValueError(f"split sizes {tuple(sizes)} do not add up to dim {d} of shape {self.shape}")
        out, off = [], 0
        for s in sizes:
            bounds = [None] * self.ndim
            bounds[d] = (off, off + s)  # type: ignore[call-overload]
            out.append(self.shrink(bounds))
            off += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        if chunks <= 0:
            raise ValueError(f"chunk count must be positive, got {chunks}")
        d = norm_axis(dim, self.ndim, self.shape)
        return self.split(max(1, math.ceil(self.shape[d] / chunks)), d)

    def tril(self, diagonal: int = 0) -> Tensor:
        return self._triangle(diagonal, lower=True)

    def triu(self, diagonal: int = 0) -> Tensor:
        return self._triangle(diagonal, lower=False)

    # ---- shape ops of issue 12 (shape_ops) --------------------------------------------------------------------------
    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
        return shape_ops.roll(self, shifts, dims)

    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
        return shape_ops.repeat_interleave(self, repeats, dim)

    def unfold(self, dim: int, size: int, step: int) -> Tensor:
        return shape_ops.unfold(self, dim, size, step)

    def diag(self) -> Tensor:
        return shape_ops.diag(self)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        return shape_ops.diagonal(self, offset, dim1, dim2)

    def meshgrid(self, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
        return shape_ops.meshgrid((self, *args), indexing)

    @staticmethod
    def einsum(formula: str, *operands: Tensor | Sequence[Tensor], dtype: DTypeLike = None) -> Tensor:
        """Einstein summation with torch's rules (shape_ops.einsum); operands as arguments or one list."""
        ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], Sequence) else list(operands)
        if not all(isinstance(t, Tensor) for t in ops):
            raise TypeError(f"einsum operands must be Tensors, got {[type(t).__name__ for t in ops]}")
        return shape_ops.einsum(formula, ops, P.to_dtype(dtype))

    def _triangle(self, diagonal: int, lower: bool) -> Tensor:
        if self.ndim < 2:
            raise ValueError(f"tril/triu need at least 2 dims, got shape {self.shape}")
        r, c = self.shape[-2:]
        rows = Tensor.arange(r, device=self.device).reshape(r, 1)
        cols = Tensor.arange(c, device=self.device).reshape(1, c)
        keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
        return keep.where(self, self.zeros_like())

    def __getitem__(self, index: Any) -> Tensor:
        return indexing.getitem(self, index)

    # ---- reductions -------------------------------------------------------------------------------------------------
    def _axes(self, axis: Any) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(self.ndim))
        axes = tuple(norm_axis(a, self.ndim, self.shape) for a in (axis if isinstance(axis, Sequence) else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError(f"axis {axis} repeats an axis of shape {self.shape}")
        return tuple(sorted(axes)) if self.ndim else ()

    def _reduce(self, op: str, axis: Any = None, keepdim: bool = False) -> Tensor:
        """One tensor.reduce in the tensor's dtype (the op keeps reduced dims as 1; drop them unless keepdim)."""
        axes = self._axes(axis)
        out = self._mv(T.REDUCE, (op, axes)) if axes else self
        if keepdim:
            return out
        return out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def sum(self, axis: Any = None, keepdim: bool = False, dtype: DTypeLike = None) -> Tensor:
        """Sum; bool/int accumulate in int64 (uint in uint64), half floats in float32 (see dtype_promotion)."""
        acc = P.to_dtype(dtype) or P.sum_acc(self.dtype)
        out = self.cast(acc)._reduce("add", axis, keepdim)
        return out if dtype is not None else out.cast(P.sum_result(self.dtype))

    def prod(self, axis: Any = None, keepdim: bool = False, dtype: DTypeLike = None) -> Tensor:
        acc = P.to_dtype(dtype) or P.sum_acc(self.dtype)
        out = self.cast(acc)._reduce("mul", axis, keepdim)
        return out if dtype is not None else out.cast(P.sum_result(self.dtype))

    def _check_nonempty(self, axis: Any, what: str) -> None:
        if any(self.shape[a] == 0 for a in self._axes(axis)):
            raise ValueError(f"{what} of an empty axis of shape {self.shape} has no identity")

    def max(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        self._check_nonempty(axis, "max")
        return self._reduce("max", axis, keepdim)

    def min(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        self._check_nonempty(axis, "min")
        return self._reduce("min", axis, keepdim)

    def any(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return (self if self.dtype.is_bool else self != 0)._reduce("max", axis, keepdim)

    def all(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        return (self if self.dtype.is_bool else self != 0)._reduce("min", axis, keepdim)

    def mean(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        """Mean in the default float for ints (numpy gives float64); half floats keep their dtype."""
        x = self._float()
        n = sprod(self.shape[a] for a in self._axes(axis))
        return x.sum(axis, keepdim)._div_count(n)

    def var(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """Variance with `correction` (Bessel's, 1, by default as tinygrad/torch; numpy's ddof=0 is correction=0)."""
        x = self._float()
        d = x - x.mean(axis, keepdim=True)
        n = sprod(self.shape[a] for a in self._axes(axis))
        s = (d * d).sum(axis, keepdim)
        return s._div_count(ssub(n, correction).maximum(0) if V.is_sym(n) else max(0, n - correction))

    def _div_count(self, n: int | UOp) -> Tensor:
        """self / n for an element count; a symbolic count is a shapeless index value cast to self's dtype."""
        if not V.is_sym(n):
            return self / float(n)
        return self._new(UOp(C.FDIV, self.dtype, (self.uop, UOp(C.CAST, self.dtype, (n,)))))

    def std(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return self.var(axis, keepdim, correction).sqrt()

    def var_mean(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    def std_mean(self, axis: Any = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    def _arg_extreme(self, op: str, axis: int | None, keepdim: bool) -> Tensor:
        if axis is None:
            out = self.flatten()._arg_extreme(op, 0, False)
            return out.reshape((1,) * self.ndim) if keepdim else out
        a = norm_axis(axis, self.ndim, self.shape)
        if self.ndim == 0:  # axis 0 / -1 of a 0-d tensor: its one element
            return Tensor.full((), 0, P.DEFAULT_INT, self.device)
        n = self.shape[a]
        if n == 0:
            raise ValueError(f"arg{op} of an empty axis of shape {self.shape}")
        m = self._reduce(op, a, keepdim=True)
        hit = self == m
        if self.dtype.is_float:
            hit = hit | self.isnan()
        idx = Tensor.arange(n, 0, -1, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
        first = hit.where(idx, 0)._reduce("max", a, keepdim)
        return (n - first).cast(P.DEFAULT_INT)

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum (int32, tinygrad's dtype; numpy returns int64)."""
        return self._arg_extreme("max", axis, keepdim)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        return self._arg_extreme("min", axis, keepdim)

    def _shift_max(self, axis: Any, finite: bool = True) -> Tensor:
        """The max over axis (keepdim) that stabilizes an exp sum: 0 for an empty axis (and, if finite, where the
        max is infinite). Detached: the result does not depend on it, and its gradient would only add rounding noise."""
        if any(self.shape[a] == 0 for a in self._axes(axis)):
            return self._reduce("add", axis, keepdim=True).zeros_like()
        m = self.max(axis, keepdim=True).detach()
        return m.isinf().where(0.0, m) if finite else m

    def logsumexp(self, axis: Any = None, keepdim: bool = False) -> Tensor:
        """log(sum(exp(x))) over axis; an empty axis gives -inf."""
        x = self._float()
        m = x._shift_max(axis)
        s = (x - m).exp().sum(axis, keepdim=True).log() + m
        return s if keepdim else s.reshape(tuple(d for i, d in enumerate(x.shape) if i not in x._axes(axis)))

    def softmax(self, axis: int = -1) -> Tensor:
        x = self._float()
        e = (x - x._shift_max(axis, finite=False)).exp()
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """(x - max) - log(sum(exp(x - max))): x - logsumexp would round the large sum first."""
        x = self._float()
        y = x - x._shift_max(axis)
        return y - y.exp().sum(axis, keepdim=True).log()

    def _cumulative(self, axis: int, fill: Scalar, combine: str) -> Tensor:
        a = norm_axis(axis, self.ndim, self.shape)
        if self.ndim == 0:  # one element: itself, in the accumulation dtype
            return self.sum() if combine == "add" else self.prod()
        x = self.transpose(a, -1)
        n = x.shape[-1]
        rows = Tensor.arange(n, device=self.device).reshape(n, 1)
        cols = Tensor.arange(n, device=self.device).reshape(1, n)
        tri = x.unsqueeze(-2).expand(x.shape[:-1] + (n, n))
        upto = cols <= rows
        vals = upto.where(tri, fill)
        out = vals.sum(-1) if combine == "add" else vals.prod(-1)
        if combine == "add" and x.dtype.is_float:
            # a running sum is -0.0 exactly while every element so far is -0.0 (numpy's add.accumulate); the
            # masked sum starts from +0.0 and would say +0.0
            negzero = (tri == 0) & (tri.reciprocal() < 0)
            out = upto.where(negzero, True).all(-1).where(-0.0, out)
        return out.transpose(a, -1)

    def cumsum(self, axis: int = 0) -> Tensor:
        """Running sum along an axis (accumulating like sum); built as a masked triangle sum."""
        return self._cumulative(axis, 0, "add")

    def cumprod(self, axis: int = 0) -> Tensor:
        return self._cumulative(axis, 1, "mul")

    # softmin, running extremes, sorting (decompositions in selection)
    def softmin(self, axis: int = -1, dtype: DTypeLike = None) -> Tensor:
        x = self.cast(dtype) if dtype is not None else self
        return (-x._float()).softmax(axis)

    def cummax(self, axis: int = 0) -> tuple[Tensor, Tensor]:
        """(running max, int32 index of the last position reaching it) along axis; NaN propagates (torch)."""
        return selection.cumulative_extreme(self, axis, True)

    def cummin(self, axis: int = 0) -> tuple[Tensor, Tensor]:
        return selection.cumulative_extreme(self, axis, False)

    def logcumsumexp(self, axis: int = 0) -> Tensor:
        return selection.logcumsumexp(self, axis)

    def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        """(values, int32 indices) along dim; stable (ties keep input order), NaN sorts as the largest value."""
        return selection.sort(self, dim, descending)

    def argsort(self, dim: int = -1, descending: bool = False) -> Tensor:
        return selection.sort(self, dim, descending)[1]

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
        """The k largest (smallest) along dim as (values, int32 indices), always in sorted order, ties by index."""
        return selection.topk(self, k, dim, largest)

    # ---- linear algebra and nn (decompositions live in nn_ops) ------------------------------------------------------
    def dot(self, w: Tensor) -> Tensor:
        return self.matmul(w)

    def matmul(self, w: Tensor, reverse: bool = False) -> Tensor:
        if not isinstance(w, Tensor):
            w = Tensor(w, device=self.device)
        return nn_ops.matmul(w, self) if reverse else nn_ops.matmul(self, w)

    def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """x @ weight + bias, weight of shape (in, out) as tinygrad (a 1-d weight scales elementwise)."""
        x = self * weight if weight.ndim == 1 else self.dot(weight)
        return x + bias if bias is not None else x

    def sequential(self, layers: Sequence[Any]) -> Tensor:
        x = self
        for f in layers:
            x = f(x)
        return x

    def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
               dilation: Any = 1, padding: Any = 0) -> Tensor:
        return nn_ops.conv2d(self, weight, bias, groups, stride, dilation, padding)

    def max_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        return nn_ops.max_pool(self, kernel_size, stride, dilation, padding, ceil_mode, return_indices)

    def avg_pool2d(self, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1, padding: Any = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
        return nn_ops.avg_pool(self, kernel_size, stride, dilation, padding, count_include_pad, ceil_mode)

    # ---- nn ops of issue 12 (nn_ops) --------------------------------------------------------------------------------
    def max_unpool2d(self, indices: Tensor, kernel_size: Any = (2, 2), stride: Any = None, dilation: Any = 1,
                     padding: Any = 0, output_size: Any = None) -> Tensor:
        return nn_ops.max_unpool(self, indices, kernel_size, stride, dilation, padding, output_size)

    def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: Any = 1,
                         dilation: Any = 1, padding: Any = 0, output_padding: Any = 0) -> Tensor:
        return nn_ops.conv_transpose(self, weight, bias, groups, stride, dilation, padding, output_padding)

    def interpolate(self, size: Any, mode: str = "linear", align_corners: bool = False) -> Tensor:
        return nn_ops.interpolate(self, size, mode, align_corners)

    def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None,  # noqa: N803
                 reduction: str = "mean") -> Tensor:
        return nn_ops.nll_loss(self, Y, weight, ignore_index, reduction)

    def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
        return nn_ops.normalize(self, p, dim, eps)

    def gather(self, dim: int, index: Tensor) -> Tensor:
        if not isinstance(index, Tensor):
            index = Tensor(index, device=self.device)
        return nn_ops.gather(self, dim, index)

    def one_hot(self, num_classes: int) -> Tensor:
        return nn_ops.one_hot(self, num_classes)

    # scatter and data-dependent selection (decompositions in scatter / selection)
    def scatter(self, dim: int, index: Tensor, src: Tensor | Scalar, reduce: str | None = None) -> Tensor:
        """out[..., index[p], ...] = src[p] along dim (the last write wins); reduce="add"|"multiply" with a
        scalar src (a tensor src with reduce: scatter_reduce, as tinygrad)."""
        if reduce not in (None, "add", "multiply"):
            raise TypeError(f"scatter: reduce={reduce!r} must be None, 'add' or 'multiply'")
        index = index if isinstance(index, Tensor) else Tensor(index, device=self.device)
        if P.is_scalar(src):
            src = Tensor.full(index.shape, src, dtype=self.dtype, device=self.device)
        elif reduce is not None:
            raise TypeError("scatter with reduce takes a scalar src; use scatter_reduce for a tensor src")
        elif not isinstance(src, Tensor):
            src = Tensor(src, dtype=self.dtype, device=self.device)
        if reduce is not None:
            return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")  # type: ignore[arg-type]
        return scatter.scatter(self, dim, index, src)  # type: ignore[arg-type]

    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
        """reduce (sum, prod, mean, amax, amin) of src into self along dim; include_self=False leaves self out
        wherever an index lands (int mean rounds down, as torch)."""
        index = index if isinstance(index, Tensor) else Tensor(index, device=self.device)
        src = src if isinstance(src, Tensor) else Tensor(src, dtype=self.dtype, device=self.device)
        return scatter.scatter_reduce(self, dim, index, src, reduce, include_self)

    def masked_select(self, mask: Tensor, size: int | None = None, fill_value: Scalar = 0) -> Tensor:
        """1-d tensor of the elements where mask is set; without size the count is realized first (see selection)."""
        mask = mask if isinstance(mask, Tensor) else Tensor(mask, device=self.device)
        return selection.masked_select(self, mask, size, fill_value)

    def nonzero(self, size: int | None = None, fill_value: Scalar = 0) -> Tensor:
        """(count, ndim) int32 coordinates of nonzero elements; without size the count is realized first."""
        return selection.nonzero(self, size, fill_value)

    def layernorm(self, axis: Any = -1, eps: float = 1e-5) -> Tensor:
        """(x - mean) / sqrt(var + eps) over axis (biased variance), no affine part (tinygrad)."""
        x = self._float()
        y = x - x.mean(axis, keepdim=True)
        return y * ((y * y).mean(axis, keepdim=True) + eps).rsqrt()

    def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                  axis: int | tuple[int, ...] = 1) -> Tensor:
        """Inference batchnorm: (x - mean) * weight * invstd + bias, the 1-d parameters along `axis`."""
        return nn_ops.batchnorm(self, weight, bias, mean, invstd, axis)

    def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                     dropout_p: float = 0.0, is_causal: bool = False,
                                     enable_gqa: bool = False) -> Tensor:
        return nn_ops.scaled_dot_product_attention(self, key, value, attn_mask, dropout_p, is_causal, enable_gqa)

    def cross_entropy(self, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:  # noqa: N803
        return nn_ops.cross_entropy(self, Y, reduction, label_smoothing)

    def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1,  # noqa: N803
                                        label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
        return nn_ops.sparse_categorical_crossentropy(self, Y, ignore_index, label_smoothing, reduction)

    def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:  # noqa: N803
        return nn_ops.reduce_loss(-(Y * self.log() + (1 - Y) * (1 - self).log()), reduction)

    def binary_crossentropy_logits(self, Y: Tensor, reduction: str = "mean",  # noqa: N803
                                   pos_weight: Tensor | None = None) -> Tensor:
        return nn_ops.binary_crossentropy_logits(self, Y, reduction, pos_weight)

    def dropout(self, p: float = 0.5) -> Tensor:
        """Identity unless Tensor.training (then a host-drawn keep mask, scaled by 1/(1-p))."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
        if not Tensor.training or p == 0:
            return self
        keep = Tensor.rand(*self.shape, device=self.device) >= p  # a random buffer: a TinyJit replay draws it again
        return keep.where(self, 0) * (1 / (1 - p))


def no_grad() -> Tensor.test:
    """`with uopir.no_grad():` (torch's spelling of `with Tensor.test():`): what is built inside has no gradient."""
    return Tensor.test()


G.FLOAT_POW[:] = [lambda a, b: Tensor._fpow(Tensor(a), Tensor(b)).uop]  # the pow gradient rule's a ** (b - 1)

__all__ = ["Tensor", "broadcast_shape", "ShapeError", "no_grad"]
