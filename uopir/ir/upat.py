"""The pattern language: UPat, a pattern over one UOp and its sources, with operator sugar for core ALU patterns.

Patterns are plain data written at module level. `UPat.match` is the reference interpreter of a pattern; the
matcher compiler (uopir.ir.pattern_compiler) turns lists of patterns into generated Python and must agree with it.

Operator sugar builds patterns for core ops: `UPat.var("x") + 0`, `UPat.cvar("c") * UPat.var("x")`, `-x`, `x // y`,
`x % c`, `x < y`, `x.ne(y)`, `x.eq(y)`, `x.maximum(y)`, `x & y`, `x | y`, `x ^ y`, `x << y`, `x >> y`,
`c.where(a, b)`, `x.cast(dtype)`. The ops are found by role (uopir.ir.roles: the core dialect registers which of
its ops adds, compares, ...), so the core names no dialect's op. A Python number in an operand position is a const
pattern matched by value (see `UPat.value`): `x + 0` matches `x + 0`, `x + 0.0` and a splat vector zero, of any
dtype, but not `x + -0.0`.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from typing import Any

from uopir.ir.dtype import DType
from uopir.ir.ops import OpDef, Trait, get_op
from uopir.ir.roles import role_op
from uopir.ir.uop import UOp, _argkey, normalize_const

__all__ = ["UPat", "is_float", "is_int", "is_bool", "is_ptr", "is_vector", "OpSpec", "DTypeSpec"]


class _AnyArg:
    def __repr__(self) -> str:
        return "<any>"


_ANY: Any = _AnyArg()

OpSpec = OpDef | str
DTypeSpec = DType | tuple[DType, ...] | Callable[[DType], bool] | None


# ---- dtype predicates (pass as `dtype=`) -----------------------------------------------------------------------------
def is_float(d: DType) -> bool:
    """Floats, scalar or vector."""
    return d.kind == "float"


def is_int(d: DType) -> bool:
    """Integers of any signedness, and index; scalar or vector."""
    return d.kind in ("int", "uint", "index")


def is_bool(d: DType) -> bool:
    return d.kind == "bool"


def is_ptr(d: DType) -> bool:
    return d.kind == "ptr"


def is_vector(d: DType) -> bool:
    return d.count > 1


class _CommCache(dict):
    """OpDef -> is it commutative; Flag arithmetic is slow, so generated code asks this dict."""

    def __missing__(self, op: OpDef) -> bool:
        v = self[op] = op.has(Trait.COMMUTATIVE)
        return v


_IS_COMM = _CommCache()


def _op_spec(op: Any) -> tuple[OpSpec, ...] | None:
    """Normalize UPat's op argument: None, one op (OpDef or name), or any iterable of them (tuple, frozenset...)."""
    if op is None:
        return None
    if isinstance(op, (OpDef, str)):
        return (op,)
    try:
        ops = tuple(op)
    except TypeError:
        raise TypeError(f"UPat op must be an OpDef, an op name or an iterable of them, got {type(op).__name__}") \
            from None
    for o in ops:
        if not isinstance(o, (OpDef, str)):
            raise TypeError(f"UPat op group holds {type(o).__name__} {o!r}; expected OpDefs or op names")
    if not ops:
        raise ValueError("UPat op group is empty (it would match nothing); use op=None for any op")
    if not isinstance(op, (tuple, list)):  # unordered group: a stable order for repr
        ops = tuple(sorted(ops, key=lambda o: o if isinstance(o, str) else o.name))
    return ops


class UPat:
    """A pattern over one UOp and (optionally) its sources.

    op: an OpDef, an op name (resolved when the matcher is compiled), a group of them (a tuple, frozenset or any
        iterable, e.g. a dialect's op group such as `core.ALU_OPS`), or None for any op.
    dtype: a DType, a tuple of DTypes, a predicate on the dtype (`is_float`), or None.
    src: None (any sources), a tuple of UPats matched in order (both orders for a commutative op with two sources),
         or one UPat that every source must match.
    arg: the exact arg (floats compare bit-exactly, so 0.0 is not -0.0) or a predicate on it; any when omitted.
    name: capture the node under this name; a name used twice must bind the same UOp.
    allow_any_len: with a tuple src, the node may have more sources than patterns (the prefix is matched).
    check: a predicate on the whole UOp, tried after everything else about this node matched.
    """

    __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len", "check", "alts", "_opset", "location")

    def __init__(self, op: OpSpec | Iterable[OpSpec] | None = None, dtype: DTypeSpec = None,
                 src: UPat | tuple[UPat, ...] | None = None, arg: Any = _ANY, name: str | None = None,
                 allow_any_len: bool = False, check: Callable[[UOp], bool] | None = None):
        self.op: tuple[OpSpec, ...] | None = _op_spec(op)
        if isinstance(dtype, list):
            dtype = tuple(dtype)
        self.dtype = dtype
        if isinstance(src, list):
            raise TypeError("UPat src must be a tuple (ordered) or a single UPat; commutative ops already match "
                            "both orders")
        if src is not None and not isinstance(src, (tuple, UPat)):
            raise TypeError(f"UPat src must be a tuple of UPats or a UPat, got {type(src).__name__}")
        if isinstance(src, tuple) and not all(isinstance(s, UPat) for s in src):
            raise TypeError("every element of a UPat src tuple must be a UPat")
        self.src = src
        self.arg = arg
        if name is not None and not name.isidentifier():
            raise ValueError(f"UPat name {name!r} must be a Python identifier (it becomes a keyword argument)")
        self.name = name
        self.allow_any_len = allow_any_len
        self.check = check
        self.alts: tuple[UPat, ...] | None = None
        self._opset: frozenset[OpDef] | None = None
        self.location: tuple[str, int] = _made_at()

    # --- convenience constructors --------------------------------------------------------------------------------
    @staticmethod
    def var(name: str | None = None, dtype: DTypeSpec = None) -> UPat:
        """Any UOp (of the given dtype), captured as `name`."""
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str | None = None, dtype: DTypeSpec = None) -> UPat:
        """A core.const, captured as `name`."""
        return UPat(role_op("const"), dtype=dtype, name=name)

    @staticmethod
    def const(dtype: DTypeSpec, value: Any, name: str | None = None) -> UPat:
        """A core.const with this value. With one DType the value is normalized like UOp.const (exact match, so
        0.0 is not -0.0); otherwise (None or a tuple of dtypes) the const is matched by value as `UPat.value` does."""
        if isinstance(dtype, DType):
            return UPat(role_op("const"), dtype=dtype, arg=normalize_const(dtype, value), name=name)
        return UPat(role_op("const"), dtype=dtype, arg=ValueArg(value), name=name)

    @staticmethod
    def value(value: int | float | bool, dtype: DTypeSpec = None, name: str | None = None) -> UPat:
        """A core.const of any dtype (or of `dtype`) whose value equals `value`; what a number in sugar means.

        The rule: numbers compare as Python numbers (so 0 matches int 0, float 0.0 and bool False; 1 matches True),
        except that the sign of a float zero must agree: 0, 0.0 and False mean +0.0, so `x + 0` does not match
        `x + -0.0` (and `x + -0.0`, which is x for every float, matches only -0.0 and the integer 0). A NaN value
        matches any NaN const. A vector const matches when every lane matches (a splat)."""
        return UPat(role_op("const"), dtype=dtype, arg=ValueArg(value), name=name)

    @staticmethod
    def any(*pats: UPat, name: str | None = None) -> UPat:
        """Matches when one of `pats` matches (tried in order; each alternative's captures are its own)."""
        p = UPat(name=name)
        p.alts = tuple(pats)
        return p

    def named(self, name: str) -> UPat:
        """This pattern, capturing the node as `name` (handy after sugar: `(x + 0).named("n")`)."""
        p = UPat(self.op, self.dtype, self.src, self.arg, name, self.allow_any_len, self.check)
        p.alts = self.alts
        p.location = self.location
        return p

    # --- operator sugar: patterns for core ops (numbers become UPat.value consts) ----------------------------------
    def alu(self, key: str, *srcs: UPat | int | float | bool, dtype: DTypeSpec = None) -> UPat:
        """The pattern `<op>(self, *srcs)` for the op of an operator role of uopir.ir.roles ("add", "lt", ...)."""
        return UPat(role_op(key), dtype=dtype, src=(self, *(_operand(s) for s in srcs)))

    def __add__(self, x: Any) -> UPat:
        return _binary("add", self, x)

    def __radd__(self, x: Any) -> UPat:
        return _binary("add", x, self)

    def __sub__(self, x: Any) -> UPat:
        return _binary("sub", self, x)

    def __rsub__(self, x: Any) -> UPat:
        return _binary("sub", x, self)

    def __mul__(self, x: Any) -> UPat:
        return _binary("mul", self, x)

    def __rmul__(self, x: Any) -> UPat:
        return _binary("mul", x, self)

    def __truediv__(self, x: Any) -> UPat:
        return _binary("fdiv", self, x)

    def __rtruediv__(self, x: Any) -> UPat:
        return _binary("fdiv", x, self)

    def __floordiv__(self, x: Any) -> UPat:
        return _binary("idiv", self, x)

    def __rfloordiv__(self, x: Any) -> UPat:
        return _binary("idiv", x, self)

    def __mod__(self, x: Any) -> UPat:
        return _binary("mod", self, x)

    def __rmod__(self, x: Any) -> UPat:
        return _binary("mod", x, self)

    def __and__(self, x: Any) -> UPat:
        return _binary("and", self, x)

    def __rand__(self, x: Any) -> UPat:
        return _binary("and", x, self)

    def __or__(self, x: Any) -> UPat:
        return _binary("or", self, x)

    def __ror__(self, x: Any) -> UPat:
        return _binary("or", x, self)

    def __xor__(self, x: Any) -> UPat:
        return _binary("xor", self, x)

    def __rxor__(self, x: Any) -> UPat:
        return _binary("xor", x, self)

    def __lshift__(self, x: Any) -> UPat:
        return _binary("shl", self, x)

    def __rlshift__(self, x: Any) -> UPat:
        return _binary("shl", x, self)

    def __rshift__(self, x: Any) -> UPat:
        return _binary("shr", self, x)

    def __rrshift__(self, x: Any) -> UPat:
        return _binary("shr", x, self)

    def __lt__(self, x: Any) -> UPat:
        return _binary("lt", self, x)

    def __gt__(self, x: Any) -> UPat:  # x > y is y < x (there is no core.cmpgt)
        return _binary("lt", x, self)

    def __neg__(self) -> UPat:
        return UPat(role_op("neg"), src=(self,))

    def lt(self, x: UPat | int | float | bool) -> UPat:
        return _binary("lt", self, x)

    def ne(self, x: UPat | int | float | bool) -> UPat:
        """core.cmpne (`!=` is left to Python: UPats compare by identity)."""
        return _binary("ne", self, x)

    def eq(self, x: UPat | int | float | bool) -> UPat:
        """core.cmpeq (`==` is left to Python: UPats compare by identity)."""
        return _binary("eq", self, x)

    def maximum(self, x: UPat | int | float | bool) -> UPat:
        return _binary("max", self, x)

    def where(self, a: UPat | int | float | bool, b: UPat | int | float | bool) -> UPat:
        """core.where with self as the condition."""
        return UPat(role_op("where"), src=(self, _operand(a), _operand(b)))

    def cast(self, dtype: DTypeSpec = None) -> UPat:
        """core.cast of self to `dtype` (None: to any dtype)."""
        return UPat(role_op("cast"), dtype=dtype, src=(self,))

    def bitcast(self, dtype: DTypeSpec = None) -> UPat:
        return UPat(role_op("bitcast"), dtype=dtype, src=(self,))

    # --- introspection ---------------------------------------------------------------------------------------------
    def opset(self) -> frozenset[OpDef] | None:
        """The ops this node accepts (names resolved now), or None for any op."""
        if self.op is None:
            return None
        if self._opset is None:
            try:
                self._opset = frozenset(get_op(o) if isinstance(o, str) else o for o in self.op)
            except KeyError as e:
                raise KeyError(f"UPat op {e.args[0]!r} is not registered (are the dialects loaded?)") from None
        return self._opset

    def top_ops(self) -> frozenset[OpDef] | None:
        """The ops a UOp matched by this pattern can have at the top (None: any), for dispatch."""
        if self.alts is None:
            return self.opset()
        out: set[OpDef] = set()
        for a in self.alts:
            s = a.top_ops()
            if s is None:
                return None
            out |= s
        return frozenset(out)

    def names(self) -> set[str]:
        """Every capture name used anywhere in the pattern."""
        out: set[str] = set()
        stack = [self]
        while stack:
            p = stack.pop()
            if p.name is not None:
                out.add(p.name)
            if p.alts is not None:
                stack.extend(p.alts)
            if isinstance(p.src, tuple):
                stack.extend(p.src)
            elif isinstance(p.src, UPat):
                stack.append(p.src)
        return out

    def __repr__(self) -> str:
        if self.alts is not None:
            inner = ", ".join(map(repr, self.alts))
            return f"UPat.any({inner}{'' if self.name is None else f', name={self.name!r}'})"
        parts = []
        if self.op is not None:
            ops = [o if isinstance(o, str) else o.name for o in self.op]
            parts.append(ops[0] if len(ops) == 1 else "(" + ", ".join(ops) + ")")
        if self.dtype is not None:
            parts.append(f"dtype={getattr(self.dtype, '__name__', self.dtype)}")
        if self.src is not None:
            parts.append(f"src={self.src!r}")
        if self.arg is not _ANY:
            parts.append(f"arg={self.arg!r}")
        if self.name is not None:
            parts.append(f"name={self.name!r}")
        if self.allow_any_len:
            parts.append("allow_any_len=True")
        return f"UPat({', '.join(parts)})"

    # --- the reference interpreter ----------------------------------------------------------------------------------
    def match(self, u: UOp, bindings: dict[str, UOp] | None = None) -> list[dict[str, UOp]]:
        """Every way this pattern matches `u`: a list of capture dicts (empty when it does not match)."""
        return self._match(u, {} if bindings is None else dict(bindings))

    def _match(self, u: UOp, st: dict[str, UOp]) -> list[dict[str, UOp]]:
        if self.name is not None:
            bound = st.get(self.name)
            if bound is not None and bound is not u:
                return []
        if self.alts is not None:
            if self.name is not None:
                st = {**st, self.name: u}
            return [r for a in self.alts for r in a._match(u, st)]
        ops = self.opset()
        if ops is not None and u.op not in ops:
            return []
        if not _dtype_ok(self.dtype, u.dtype) or not _arg_ok(self.arg, u.arg):
            return []
        src = self.src
        if isinstance(src, tuple):
            n = len(src)
            if len(u.src) < n or (not self.allow_any_len and len(u.src) != n):
                return []
        if self.check is not None and not self.check(u):
            return []
        if self.name is not None:
            st = {**st, self.name: u}
        if src is None:
            return [st]
        if isinstance(src, UPat):
            stores = [st]
            for s in u.src:
                stores = [r for x in stores for r in src._match(s, x)]
                if not stores:
                    break
            return stores
        orders = [u.src[:len(src)]]
        if len(src) == 2 and not self.allow_any_len and u.src[0] is not u.src[1] and _IS_COMM[u.op]:
            orders.append((u.src[1], u.src[0]))
        out: list[dict[str, UOp]] = []
        for order in orders:
            stores = [st]
            for p, s in zip(src, order, strict=True):
                stores = [r for x in stores for r in p._match(s, x)]
                if not stores:
                    break
            out.extend(stores)
        return out




class ValueArg:
    """The arg predicate of a const matched by value (UPat.value states the rule); the compiler inlines it."""

    __slots__ = ("value", "nan", "neg_zero")

    def __init__(self, value: int | float | bool):
        if type(value) not in (int, float, bool):
            raise TypeError(f"a const pattern's value must be an int, float or bool, got {type(value).__name__}")
        self.value = value
        self.nan = value != value
        self.neg_zero = type(value) is float and value == 0 and math.copysign(1.0, value) < 0

    def one(self, a: Any) -> bool:
        """Does one scalar value match?"""
        if self.nan:
            return a != a
        if type(a) is tuple or a != self.value:
            return False
        return type(a) is not float or a != 0 or (math.copysign(1.0, a) < 0) == self.neg_zero

    def __call__(self, a: Any) -> bool:
        if type(a) is tuple:  # a vector const: every lane (a shaped tensor const holds a tuple and never matches)
            return bool(a) and all(self.one(x) for x in a)
        return self.one(a)

    def __repr__(self) -> str:
        return f"=={self.value!r}"


def _made_at() -> tuple[str, int]:
    """(file, line) of the first frame outside this module: where the pattern was written (tinygrad's
    `UPat.location`), through the sugar and the convenience constructors."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    return ("?", 0) if f is None else (f.f_code.co_filename, f.f_lineno)


def _operand(x: Any) -> UPat:
    if isinstance(x, UPat):
        return x
    if type(x) in (int, float, bool):
        return UPat.value(x)
    raise TypeError(f"a UPat operand must be a UPat or a number, got {type(x).__name__}")


def _binary(key: str, a: Any, b: Any) -> UPat:
    """core.<key>(a, b); NotImplemented for an operand that is neither a UPat nor a number (Python's TypeError)."""
    if not (isinstance(a, (UPat, int, float)) and isinstance(b, (UPat, int, float))):
        return NotImplemented
    return UPat(role_op(key), src=(_operand(a), _operand(b)))


def _dtype_ok(spec: DTypeSpec, d: DType) -> bool:
    if spec is None:
        return True
    if isinstance(spec, DType):
        return spec is d
    if isinstance(spec, tuple):
        return d in spec
    return bool(spec(d))


def _arg_is_pred(arg: Any) -> bool:
    return callable(arg) and not isinstance(arg, (DType, UOp, type))


def _arg_ok(spec: Any, a: Any) -> bool:
    if spec is _ANY:
        return True
    if _arg_is_pred(spec):
        return bool(spec(a))
    if spec is a:
        return True
    ts = type(spec)
    if ts is int:
        return type(a) is int and a == spec
    if ts is float or ts is bool or ts is tuple:
        return _argkey(a) == _argkey(spec)
    return type(a) is ts and a == spec

