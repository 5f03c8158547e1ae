"""The lazy Tensor: a tinygrad-style frontend that builds tensor-dialect IR and runs nothing until asked.

This module holds the class and its core: construction, the lazy UOp (`_new`, `_op`, `_mv`), operands brought to a
common shape and dtype (`_broadcasted`), shape/dtype/device properties, devices and autograd. Every other method lives
in its op family, a mixin class `Tensor` inherits (as tinygrad's `mixin/`), each defined once:

| family | module |
|---|---|
| creation (full, arange, eye, rand*, ...) | creation.py |
| dtype casts | casts.py |
| arithmetic, comparisons, bit ops, where, operator dunders | elementwise.py |
| unary math (exp, sin, cos, asin, ...), isclose | math_ops.py |
| activations | activations.py |
| movement (reshape, pad in every mode, cat, ...) | movement.py |
| shape ops (roll, unfold, diagonal, einsum, ...) | shape_ops.py |
| reductions, softmax, cumulative sums | reduction.py |
| indexing, gather, one_hot | indexing.py |
| sort, topk, cummax, masked_select, nonzero | selection.py |
| scatter, scatter_reduce | scatter.py |
| matmul, conv, pooling, attention, norms, losses | nn_ops.py |
| realize, assign, schedule, numpy/item | realization.py |

Every method returns a new Tensor whose `.uop` is a tensor-dialect graph (buffers, movement ops, core ALU ops,
tensor.reduce). `.realize()` / `.numpy()` / `.tolist()` / `.item()` evaluate that graph on the tensor's device,
store the result in a fresh buffer and make the tensor point at it, so a second realize costs nothing.

Semantics follow tinygrad's names and numpy's numbers: numpy broadcasting (made explicit in the IR with
tensor.reshape + tensor.expand), numpy dtype promotion with weak Python scalars (see dtype_promotion.py),
Python floor semantics for `//` and `%`. High-level ops decompose into the dialect's primitives; nothing here adds
an opaque op. Bad use (shapes, axes, dtypes) raises ValueError/TypeError where the call is made, not at realize.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import ContextDecorator
from typing import Any, ClassVar

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import device as D
from uopir.frontend import dtype_promotion as P
from uopir.frontend import gradient as G
from uopir.frontend import variable as V
from uopir.frontend.activations import Activations
from uopir.frontend.casts import Casts
from uopir.frontend.creation import Creation
from uopir.frontend.elementwise import Elementwise
from uopir.frontend.indexing import Indexing
from uopir.frontend.math_ops import MathOps
from uopir.frontend.movement import Movement
from uopir.frontend.nn_ops import NNOps
from uopir.frontend.realization import LAZY, Realization
from uopir.frontend.reduction import Reduction
from uopir.frontend.scatter import Scatter
from uopir.frontend.selection import Selection
from uopir.frontend.shape_ops import ShapeOps
from uopir.frontend.shapes import broadcast_shape, norm_axis
from uopir.ir.diagnostics import ShapeError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef
from uopir.ir.symbolic import sprod
from uopir.ir.uop import UOp

Scalar = bool | int | float
Operand = "Tensor | Scalar"
DTypeLike = DType | str | np.dtype | type | None


def _tensor_type(t: Tensor) -> str:
    return T.tensor_type(t.shape, t.dtype)


_SYM_MOVEMENT = (T.RESHAPE, T.EXPAND, T.PAD, T.SHRINK)  # the movement ops that take symbolic dims


# ---- the Tensor -----------------------------------------------------------------------------------------------------
# The shapeless consts of the Python scalars ops were last applied with, by (dtype, value, type): `x + 1.0` in a loop
# finds its const here instead of normalizing the value and hash-consing a new node each time (~1.5 us of an eager
# op). Equal values of one type normalize to the same const of a dtype, except the float zeros (0.0 == -0.0, two
# consts) and NaN (never equal): those are not kept (the type in the key keeps -0.0 from finding an int 0's entry).
# Emptied past _SCALAR_CONSTS_MAX entries; the nodes it holds are a few bytes each.
_SCALAR_CONSTS: dict[tuple[DType, Any, type], UOp] = {}
_SCALAR_CONSTS_MAX = 256


def scalar_const(dtype: DType, value: Scalar) -> UOp:
    """The shapeless core.const of `value` as `dtype` (C.const, remembered for the next op with the same scalar)."""
    t = type(value)
    if t is not float and t is not int and t is not bool:  # (a numpy scalar, say: not kept)
        return C.const(dtype, value)
    key = (dtype, value, t)
    u = _SCALAR_CONSTS.get(key)
    if u is not None:
        return u
    u = C.const(dtype, value)
    if t is not float or (value and value == value):  # a float neither zero nor NaN
        if len(_SCALAR_CONSTS) >= _SCALAR_CONSTS_MAX:
            _SCALAR_CONSTS.clear()
        _SCALAR_CONSTS[key] = u
    return u


class Tensor(Creation, Casts, Elementwise, MathOps, Activations, Movement, ShapeOps, Reduction, Indexing, Selection,
             Scatter, NNOps, Realization):
    """A lazy n-d array. `.uop` is its tensor-dialect graph; `.device` the device it lives on."""

    __slots__ = ("uop", "device", "grad", "_requires_grad", "_graph", "__weakref__")
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
            LAZY[id(self)] = self
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
        if u.dtype.kind == "float":  # (is_float, without its property call: every eager op passes here)
            G.live(t, True)
        LAZY[id(t)] = t
        return t

    @staticmethod
    def _of_buffer(u: UOp, device: str) -> Tensor:
        """A Tensor of a `tensor.buffer` op (what `Tensor(u, device=device)` makes, without its argument parsing:
        a JIT replay wraps its results)."""
        t = object.__new__(Tensor)
        t.uop, t.device = u, device
        t.grad, t._requires_grad = None, None
        if u.dtype.is_float:
            G.live(t, True)
        return t

    def _op(self, op: OpDef, *srcs: Tensor | Scalar, dtype: DType | None = None, arg: Any = None) -> Tensor:
        """Apply one op; the operands already agree on shape and dtype, Python scalars become shapeless consts."""
        u = self.uop
        cd = u.dtype
        us = (u, *[s.uop if isinstance(s, Tensor) else scalar_const(cd, s) for s in srcs])
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
        grads = G.compute_gradient(self._differentiable(), root, [t.uop for t in targets])
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
        grads = G.compute_gradient(self._differentiable(), root, [t.uop for t in params])
        if not grads:
            raise ValueError(f"backward: no tensor with requires_grad True or None is in the graph of this tensor"
                             f"{self._realized_hint()}")
        for t in params:
            g = grads.get(t.uop)
            if g is not None:
                t.grad = t._new(g) if t.grad is None else t.grad + t._new(g)
        return self

    def _differentiable(self) -> UOp:
        """The graph to differentiate: this tensor's, or, once it is realized, the graph it was computed from (kept by
        realize while a tensor with requires_grad=True is alive, so `loss.item(); loss.backward()` works as in torch
        and tinygrad)."""
        kept = getattr(self, "_graph", None)
        return kept[1] if kept is not None and kept[0] is self.uop else self.uop

    def _realized_hint(self) -> str:
        return " (it is realized, so its graph is gone: differentiate before realizing it)" \
            if self._differentiable().op is T.BUFFER else ""

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
        ty = type(y)
        if ty is float or ty is int or ty is bool:  # a weak Python scalar (`x + 1.0`: the eager path, kept short)
            sd = self.uop.dtype
            d = dtype or P.promote_scalar(sd, y)
            if ty is int and d.is_int and not d.min <= y <= d.max:
                y = P.wrap_int(y, d)  # tinygrad: the scalar becomes a constant of the tensor's dtype (numpy 2 raises)
            a = self if d is sd else self.cast(d)
            return (y, a) if reverse else (a, y)
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
        return self._apply(op, *self._broadcasted(y, reverse, dtype), out=out)

    @staticmethod
    def _apply(op: OpDef, a: Tensor | Scalar, b: Tensor | Scalar, out: DType | None = None) -> Tensor:
        """op(a, b) on a pair `_broadcasted` gave (for a caller that already looked at the pair: not built twice)."""
        if isinstance(a, Tensor):
            return a._op(op, b, dtype=out)
        t: Tensor = b  # type: ignore[assignment]
        return t._new(UOp(op, out or t.dtype, (scalar_const(t.dtype, a), t.uop)))

    def _broadcast_pair(self, y: Any) -> tuple[Tensor, Tensor]:
        a, b = self._broadcasted(y)
        t = self._first(a, b)
        return tuple(v if isinstance(v, Tensor) else t.full_like(v) for v in (a, b))  # type: ignore[return-value]


def no_grad() -> Tensor.test:
    """`with uopir.no_grad():` (torch's spelling of `with Tensor.test():`): what is built inside has no gradient."""
    return Tensor.test()


G.FLOAT_POW[:] = [lambda a, b: Tensor._fpow(Tensor(a), Tensor(b)).uop]  # the pow gradient rule's a ** (b - 1)

__all__ = ["Tensor", "broadcast_shape", "ShapeError", "no_grad"]
