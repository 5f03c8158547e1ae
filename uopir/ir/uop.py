"""UOp: the immutable, hash-consed node of every graph at every level.

Building an equal UOp twice returns the same object, so `is` is equality, CSE is free and rewrite memos are dicts.
Nodes nobody references are freed (the cache holds weak references). Construction is thread-safe: threads that
build equal UOps at the same time get the same object (see `UOp.__new__`).
"""
from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef, get_op
from uopir.ir.roles import role_op


class _FloatKey(tuple):
    """Key of a float arg: bit-exact, so 0.0 and -0.0 stay apart and nan hash-conses."""


def _argkey(a: Any) -> Any:
    t = type(a)
    if t is float:
        return _FloatKey((a.hex(),))
    if t is bool:
        return (bool, a)
    if t is tuple:  # rebuilt only where a float or bool is inside: a nested tuple of ints is its own key
        for x in a:
            tx = type(x)
            if tx is float or tx is bool or (tx is tuple and _argkey(x) is not x):
                return tuple(_argkey(x) for x in a)
    return a


_KEYED_ARGS = frozenset((float, bool, tuple))
# `UOp._shape` before the shape is computed (a slot left unset made every first `.shape` of a node raise and catch
# an AttributeError: ~1 us, on every new tensor-level node)
_UNSET: Any = object()
_ucache: dict[tuple, _CacheRef] = {}

try:
    from _weakref import _remove_dead_weakref  # CPython: atomically delete d[key] if it is a dead weak reference
except ImportError:  # pragma: no cover - other interpreters
    _remove_lock = threading.Lock()

    def _remove_dead_weakref(d: dict, key: Any) -> None:
        with _remove_lock:
            r = d.get(key)
            if r is not None and r() is None:
                del d[key]


def live_nodes() -> int:
    """How many hash-consed nodes are alive now (the table's size: an entry goes when its node is freed). Memory
    checks compare it before and after a loop: what nothing references must not stay."""
    return len(_ucache)


class _CacheRef(weakref.ref):
    """The cache's weak reference to a UOp; it knows its key, so the UOp's death removes its own entry only."""

    __slots__ = ("key",)


def _drop(r: _CacheRef) -> None:
    # runs once the UOp is gone (its weak references already read None, so no thread can revive it); deletes the
    # entry only while it is still a dead reference: a newer UOp stored under the same key meanwhile stays
    _remove_dead_weakref(_ucache, r.key)


class UOp:
    __slots__ = ("op", "dtype", "src", "arg", "tag", "_shape", "__weakref__")
    op: OpDef
    dtype: DType
    src: tuple[UOp, ...]
    arg: Any
    tag: Any

    def __new__(cls, op: OpDef, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None,
                tag: Any = None) -> UOp:
        key = (op, dtype, src, arg if type(arg) not in _KEYED_ARGS else _argkey(arg),
               tag if type(tag) not in _KEYED_ARGS else _argkey(tag))
        ref = _ucache.get(key)
        if ref is not None and (u := ref()) is not None:
            return u
        u = object.__new__(cls)
        u.op = op
        u.dtype = dtype
        u.src = src
        u.arg = arg
        u.tag = tag
        u._shape = _UNSET
        r = _CacheRef(u, _drop)
        r.key = key
        # Publish with one atomic dict operation: of threads racing to build equal UOps, the first setdefault wins
        # and the others return its object (theirs is dropped, and its callback leaves the live entry alone).
        while (ref := _ucache.setdefault(key, r)) is not r:
            if (w := ref()) is not None:
                return w
            _remove_dead_weakref(_ucache, key)  # an entry whose UOp died and whose callback has not run yet
        return u

    def __reduce__(self):
        return (UOp, (self.op, self.dtype, self.src, self.arg, self.tag))

    def __copy__(self) -> UOp:
        return self

    def __deepcopy__(self, memo: dict) -> UOp:
        return self

    def __repr__(self) -> str:
        parts = [self.op.name, str(self.dtype)]
        if self.src:
            parts.append(f"src=({len(self.src)})")
        if self.arg is not None:
            parts.append(f"arg={self.arg!r}" if not isinstance(self.arg, UOp) else "arg=<region>")
        if self.tag is not None:
            parts.append(f"tag={self.tag!r}")
        return f"UOp({', '.join(parts)})"

    # --- graph ---------------------------------------------------------------------------------------------------
    def toposort(self, gate: Callable[[UOp], bool] | None = None) -> dict[UOp, None]:
        """Every node reachable from self, sources before users (an ordered dict used as a set).

        `gate(u)` False stops the walk below u (u itself is still included)."""
        out: dict[UOp, None] = {}
        stack: list[tuple[UOp, bool]] = [(self, False)]
        while stack:
            u, expanded = stack.pop()
            if u in out:
                continue
            if expanded:
                out[u] = None
                continue
            stack.append((u, True))
            if gate is None or gate(u):
                for s in reversed(u.src):
                    if s not in out:
                        stack.append((s, False))
        return out

    def replace(self, **kwargs: Any) -> UOp:
        """A copy with some of op, dtype, src, arg, tag changed."""
        return UOp(kwargs.get("op", self.op), kwargs.get("dtype", self.dtype), kwargs.get("src", self.src),
                   kwargs.get("arg", self.arg), kwargs.get("tag", self.tag))

    def substitute(self, mapping: Mapping[UOp, UOp]) -> UOp:
        """Replace nodes by the mapping and rebuild everything above them."""
        new: dict[UOp, UOp] = {}
        for u in self.toposort():
            if u in mapping:
                new[u] = mapping[u]
                continue
            src = tuple(new[s] for s in u.src)
            new[u] = u if src == u.src else u.replace(src=src)
        return new[self]

    @property
    def attrs(self) -> Any:
        """The op's attributes by name, read from `arg` on each access: `r.attrs.axis` (uopir.ir.ops.AttrsView)."""
        return self.op.attrs_view(self)

    @property
    def operands(self) -> Any:
        """The operands by the names the op declares: `ld.operands.ptr`, `red.operands.ranges` (a variadic rest)."""
        return self.op.operands_view(self)

    @property
    def shape(self) -> tuple[int, ...] | None:
        """The tensor shape this value has (None for a scalar or kernel-level value). Raises ShapeError."""
        s = self._shape
        return self._infer_shape() if s is _UNSET else s

    def _infer_shape(self) -> tuple[int, ...] | None:
        """Compute and cache the shapes of self and of its sources that lack one, sources first and without
        recursion (an op's shape rule reads its sources' `.shape`, which are then cached: a 10^5-deep chain of
        tensor ops needs no deep Python stack). A failing rule raises and caches nothing for that node."""
        fn = self.op.shape
        if fn is None:
            self._shape = None
            return None
        src = self.src
        if type(src) is tuple:
            for s in src:
                if isinstance(s, UOp) and s._shape is _UNSET and s.op.shape is not None:
                    break
            else:  # the usual case (sources built and checked first): no walk
                r = fn(self)
                self._shape = r
                return r
        pending: set[UOp] = set()  # expanded, shape not yet computed: meeting one again from below is a cycle
        stack: list[tuple[UOp, bool]] = [(self, False)]
        while stack:
            u, ready = stack.pop()
            if ready:
                pending.discard(u)
                if u._shape is _UNSET:
                    f = u.op.shape
                    u._shape = f(u) if f is not None else None
                continue
            if u._shape is not _UNSET:
                continue
            if u in pending:
                raise ValueError(f"{u.op.name} is part of a cycle (a node is its own operand)")
            pending.add(u)
            stack.append((u, True))
            for s in reversed(u.src) if type(u.src) is tuple else ():
                if isinstance(s, UOp) and s._shape is _UNSET and getattr(s.op, "shape", None) is not None:
                    stack.append((s, False))
        return self._shape

    # --- construction helpers ----------------------------------------------------------------------------------
    @staticmethod
    def const(dtype: DType, value: Any) -> UOp:
        return UOp(role_op("const"), dtype, (), normalize_const(dtype, value))

    @staticmethod
    def sink(*srcs: UOp) -> UOp:
        return UOp(role_op("sink"), dtypes.void, srcs)

    def alu(self, opname: str, *srcs: UOp | int | float | bool, dtype: DType | None = None) -> UOp:
        """Apply an ALU op by its registered name (`"core.add"`); Python numbers become consts of self's dtype."""
        return self._apply(_op(opname), srcs, dtype)

    def _core(self, key: str, *srcs: UOp | int | float | bool, dtype: DType | None = None) -> UOp:
        return self._apply(role_op(key), srcs, dtype)

    def _apply(self, op: OpDef, srcs: tuple[UOp | int | float | bool, ...], dtype: DType | None) -> UOp:
        ops = (self,) + tuple(s if isinstance(s, UOp) else self._scalar(s) for s in srcs)
        return UOp(op, dtype if dtype is not None else self.dtype, ops)

    def _scalar(self, v: int | float | bool) -> UOp:
        d = self.dtype.scalar if not self.dtype.is_ptr else dtypes.index
        return UOp.const(d, v)

    def cast(self, dtype: DType) -> UOp:
        return self if dtype is self.dtype else UOp(role_op("cast"), dtype, (self,))

    def __add__(self, x: UOp | int | float) -> UOp:
        return self._core("add", x)

    def __radd__(self, x: int | float) -> UOp:
        return self._scalar(x)._core("add", self)

    def __sub__(self, x: UOp | int | float) -> UOp:
        return self._core("sub", x)

    def __rsub__(self, x: int | float) -> UOp:
        return self._scalar(x)._core("sub", self)

    def __mul__(self, x: UOp | int | float) -> UOp:
        return self._core("mul", x)

    def __rmul__(self, x: int | float) -> UOp:
        return self._scalar(x)._core("mul", self)

    def __floordiv__(self, x: UOp | int) -> UOp:
        return self._core("idiv", x)

    def __rfloordiv__(self, x: int) -> UOp:
        return self._scalar(x)._core("idiv", self)

    def __truediv__(self, x: UOp | float) -> UOp:
        return self._core("fdiv", x)

    def __mod__(self, x: UOp | int) -> UOp:
        return self._core("mod", x)

    def __neg__(self) -> UOp:
        return self._core("neg")

    def __and__(self, x: UOp | int | bool) -> UOp:
        return self._core("and", x)

    def __or__(self, x: UOp | int | bool) -> UOp:
        return self._core("or", x)

    def __xor__(self, x: UOp | int | bool) -> UOp:
        return self._core("xor", x)

    def __lshift__(self, x: UOp | int) -> UOp:
        return self._core("shl", x)

    def __rshift__(self, x: UOp | int) -> UOp:
        return self._core("shr", x)

    def lt(self, x: UOp | int | float) -> UOp:
        return self._core("lt", x, dtype=dtypes.bool.vec(self.dtype.count))

    def ne(self, x: UOp | int | float) -> UOp:
        return self._core("ne", x, dtype=dtypes.bool.vec(self.dtype.count))

    def eq(self, x: UOp | int | float) -> UOp:
        return self._core("eq", x, dtype=dtypes.bool.vec(self.dtype.count))

    def maximum(self, x: UOp | int | float) -> UOp:
        return self._core("max", x)

    def where(self, a: UOp | int | float, b: UOp | int | float) -> UOp:
        ref = a if isinstance(a, UOp) else b
        assert isinstance(ref, UOp), "where needs at least one UOp branch"
        a_ = a if isinstance(a, UOp) else ref._scalar(a)
        b_ = b if isinstance(b, UOp) else ref._scalar(b)
        return UOp(role_op("where"), a_.dtype, (self, a_, b_))

    # --- symbolic variables (tinygrad's names; the ops are tensor.var and tensor.bind) --------------------------------
    def bind(self, value: int) -> UOp:
        """This tensor.var bound to `value` (a tensor.bind): usable as a dimension that has a value now, while the
        compiled kernels keep the variable (so one kernel serves every value)."""
        var = role_op("var")
        if self.op is not var:
            raise TypeError(f"bind needs a variable ({var.name}), got {self.op.name}")
        if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
            raise TypeError(f"variable {self.attrs.name!r} binds to an int, got {type(value).__name__}")
        v = int(value.__index__())
        name, lo, hi = self.arg
        if not lo <= v <= hi:
            raise ValueError(f"cannot bind variable {name!r} to {v}: outside its range [{lo}, {hi}]")
        return UOp(role_op("bind"), self.dtype, (self, UOp.const(self.dtype, v)))

    def unbind(self) -> tuple[UOp, int]:
        """(variable, value) of a tensor.bind."""
        bind = role_op("bind")
        if self.op is not bind:
            raise TypeError(f"unbind needs a bound variable ({bind.name}), got {self.op.name}")
        return self.operands.var, self.operands.value.arg

    def variables(self) -> list[UOp]:
        """The variables (tensor.var, kernel.var) of this graph, bound or not, sorted by name (regions not entered)."""
        kinds = (role_op("var"), role_op("kernel_var"))
        return sorted((u for u in self.toposort() if u.op in kinds), key=lambda u: (u.arg, u.op.name))

    def unbind_all(self) -> tuple[UOp, dict[UOp, int]]:
        """(this graph with every tensor.bind replaced by its variable, {variable: value}); ValueError when one
        variable is bound to two values."""
        bind = role_op("bind")
        vals: dict[UOp, int] = {}
        mapping: dict[UOp, UOp] = {}
        for u in self.toposort():
            if u.op is bind:
                var, v = u.operands.var, u.operands.value.arg
                if vals.setdefault(var, v) != v:
                    raise ValueError(f"variable {var.attrs.name!r} is bound to two values: {vals[var]} and {v}")
                mapping[u] = var
        return (self.substitute(mapping) if mapping else self), vals


def normalize_const(dtype: DType, value: Any) -> Any:
    """The canonical Python value of a const of `dtype`: float for floats, int (wrapped) for ints, bool for bool.

    A vector dtype takes one value per lane as a tuple (a single value is splat)."""
    if dtype.count > 1:
        if type(value) in (tuple, list):
            if len(value) != dtype.count:
                raise ValueError(f"a const of {dtype} needs {dtype.count} values, got {len(value)}")
            return tuple(normalize_const(dtype.scalar, v) for v in value)
        return (normalize_const(dtype.scalar, value),) * dtype.count
    if type(value) in (tuple, list):
        raise ValueError(f"a const of {dtype} takes one value, got a list")
    if dtype.is_float:
        return float(value)
    if dtype.is_bool:
        return bool(value)
    if dtype.is_int:
        if type(value) is float:
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(f"cannot make a {dtype} const from {value}")
            value = int(value)
        v = int(value)
        if dtype.kind == "uint":
            return v & ((1 << dtype.bits) - 1)
        v &= (1 << dtype.bits) - 1
        return v - (1 << dtype.bits) if v >> (dtype.bits - 1) else v
    return value


_OPS: dict[str, OpDef] = {}


def _op(name: str) -> OpDef:
    if (o := _OPS.get(name)) is None:
        o = _OPS[name] = get_op(name)
    return o


_gc_lock = threading.Lock()
_gc_pauses = 0  # gc_paused blocks open in any thread
_gc_was_on = False  # the collector's state when the first of them opened


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic GC while building or walking big graphs: UOps never form cycles, and each allocation
    burst would make the collector rescan the whole graph (30-50% of parse, print and rewrite time at 100k nodes).
    Nests, also across threads (the collector is process-wide: it comes back on when the last block closes, and
    only if it was on when the first opened)."""
    global _gc_pauses, _gc_was_on
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_on = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_on:
                gc.enable()
