"""The op registry: every op is declared once, by the dialect that owns it, with its schema and verifier.

An op's `arg` holds its attributes: None when it has none, the value itself when it has one, a tuple in
declaration order when it has several. Attribute types convert parsed literals into that canonical form and
print it back, so the text round trips exactly.
"""
from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from keyword import iskeyword
from typing import TYPE_CHECKING, Any

from uopir.ir.dtype import DType, dtypes
from uopir.ir.registration import RegistrationError, Sites

if TYPE_CHECKING:
    from uopir.ir.uop import UOp


class Trait(enum.Flag):
    """What passes may assume about an op without knowing it by name."""

    NONE = 0
    PURE = enum.auto()
    COMMUTATIVE = enum.auto()
    ELEMENTWISE = enum.auto()
    SIDE_EFFECT = enum.auto()
    TERMINATOR = enum.auto()
    COLLECTS_EFFECTS = enum.auto()  # its operands are effects to keep, never values anyone reads (dce prunes them)


# ---- literals the parser produces before an attribute type converts them --------------------------------------------
@dataclass(frozen=True, slots=True)
class Ident:
    """A bare word in attribute position: an enum member, a keyword, or a scalar type name."""

    name: str


class _Dynamic:
    """The one value `DYN`, printed `?`: a dimension (or pad/shrink amount) that is not a number in the attribute but
    a symbolic value, given as the op's next extra operand (MLIR's `?` in `tensor<?x4xf32>`)."""

    __slots__ = ()
    _instance: _Dynamic | None = None

    def __new__(cls) -> _Dynamic:
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "?"

    def __reduce__(self) -> str:
        return "DYN"


DYN = _Dynamic()


class AttrError(ValueError):
    """A value does not fit an attribute's type; the message says what was expected."""


class AttrType:
    """Converts a parsed literal into the canonical Python value and prints it back."""

    name = "attr"

    def convert(self, v: Any) -> Any:
        raise NotImplementedError

    def fmt(self, v: Any) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


def _fail(expected: str, v: Any) -> AttrError:
    return AttrError(f"expected {expected}, got {fmt_literal(v)}")


class IntAttr(AttrType):
    name = "int"

    def __init__(self, lo: int | None = None, hi: int | None = None):
        self.lo, self.hi = lo, hi

    def convert(self, v: Any) -> int:
        if type(v) is not int:
            if v is DYN:
                raise AttrError("expected an integer, got '?' (a symbolic dim; this attribute takes static ones)")
            raise _fail("an integer", v)
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            if self.hi is None:
                raise AttrError(f"expected an integer >= {self.lo}, got {v}")
            if self.lo is None:
                raise AttrError(f"expected an integer <= {self.hi}, got {v}")
            raise AttrError(f"expected an integer in [{self.lo}, {self.hi}], got {v}")
        return v

    def fmt(self, v: int) -> str:
        return str(v)


class DimAttr(IntAttr):
    """A size or an amount (an integer >= 0), or `?` (DYN): a symbolic one, taken from the op's extra operands."""

    name = "dim"

    def __init__(self) -> None:
        super().__init__(lo=0)

    def convert(self, v: Any) -> Any:
        return v if v is DYN else super().convert(v)

    def fmt(self, v: Any) -> str:
        return "?" if v is DYN else str(v)


class FloatAttr(AttrType):
    name = "float"

    def convert(self, v: Any) -> float:
        if type(v) is int or type(v) is float:
            return float(v)
        raise _fail("a number", v)

    def fmt(self, v: float) -> str:
        return fmt_float(v)


class BoolAttr(AttrType):
    name = "bool"

    def convert(self, v: Any) -> bool:
        if type(v) is bool:
            return v
        raise _fail("true or false", v)

    def fmt(self, v: bool) -> str:
        return "true" if v else "false"


class StrAttr(AttrType):
    name = "string"

    def convert(self, v: Any) -> str:
        if type(v) is str:
            return v
        raise _fail("a string", v)

    def fmt(self, v: str) -> str:
        return quote(v)


class EnumAttr(AttrType):
    """One of a fixed set of bare words; the Python value is the word as a str."""

    def __init__(self, *members: str):
        self.members = tuple(members)
        self.name = "enum(" + "|".join(members) + ")"

    def convert(self, v: Any) -> str:
        word = v.name if isinstance(v, Ident) else v
        if type(word) is str and word in self.members:
            return word
        raise AttrError(f"expected one of {', '.join(self.members)}, got {fmt_literal(v)}")

    def fmt(self, v: str) -> str:
        return v


class DTypeAttr(AttrType):
    name = "type"

    def convert(self, v: Any) -> DType:
        if isinstance(v, DType):
            return v
        if isinstance(v, Ident) and (d := dtypes.from_name(v.name)) is not None and v.name == d.name:
            return d
        raise _fail("a type", v)

    def fmt(self, v: DType) -> str:
        return v.name


class TupleAttr(AttrType):
    """A list `[a, b]` of one element type, of any length (or exactly `length`)."""

    def __init__(self, elem: AttrType, length: int | None = None):
        self.elem, self.length = elem, length
        self.name = f"list<{elem.name}>"

    def convert(self, v: Any) -> tuple:
        if type(v) is not tuple and type(v) is not list:
            raise _fail(f"a list of {self.elem.name}", v)
        if self.length is not None and len(v) != self.length:
            raise AttrError(f"expected a list of {self.length} elements, got {len(v)}")
        return tuple(self.elem.convert(x) for x in v)

    def fmt(self, v: tuple) -> str:
        return "[" + ", ".join(self.elem.fmt(x) for x in v) + "]"


class OptionalAttr(AttrType):
    """A value or `none`."""

    def __init__(self, inner: AttrType):
        self.inner = inner
        self.name = f"optional<{inner.name}>"

    def convert(self, v: Any) -> Any:
        if v is None or (isinstance(v, Ident) and v.name == "none"):
            return None
        return self.inner.convert(v)

    def fmt(self, v: Any) -> str:
        return "none" if v is None else self.inner.fmt(v)


class ScalarAttr(AttrType):
    """A number, a bool, or a list of them (a const's value; its dtype normalizes it, see `normalize_const`)."""

    name = "scalar"

    def convert(self, v: Any) -> Any:
        if type(v) in (int, float, bool):
            return v
        if type(v) in (tuple, list):
            return tuple(self.convert(x) for x in v)
        if isinstance(v, Ident) and v.name in ("inf", "nan"):
            return float(v.name)
        raise _fail("a number or a bool", v)

    def fmt(self, v: Any) -> str:
        if type(v) is tuple:
            return "[" + ", ".join(self.fmt(x) for x in v) + "]"
        return fmt_literal(v)


class RegionAttr(AttrType):
    """A nested graph, printed as a region `({ ... })`; its value is the region's root UOp."""

    name = "region"

    def convert(self, v: Any) -> Any:
        if isinstance(getattr(v, "op", None), OpDef):  # a UOp (ops.py sits below uop.py, so no import of it)
            return v
        raise _fail("a region", v)

    def fmt(self, v: Any) -> str:  # the printer handles regions itself
        raise AssertionError("regions are printed by the printer")


class AnyAttr(AttrType):
    """Any literal (int, float, bool, string, word, list); used for tags and free-form args."""

    name = "any"

    def convert(self, v: Any) -> Any:
        if type(v) is list:
            return tuple(self.convert(x) for x in v)
        if isinstance(v, Ident):
            return v.name if v.name not in ("inf", "nan") else float(v.name)
        if type(v) in (int, float, bool, str, tuple) or v is None or isinstance(v, DType):
            return tuple(self.convert(x) for x in v) if type(v) is tuple else v
        raise _fail("a literal", v)

    def fmt(self, v: Any) -> str:
        return fmt_literal(v)


INT, FLOAT, BOOL, STR, DTYPE, SCALAR, REGION, ANY = (IntAttr(), FloatAttr(), BoolAttr(), StrAttr(), DTypeAttr(),
                                                    ScalarAttr(), RegionAttr(), AnyAttr())
SHAPE = TupleAttr(IntAttr(lo=0))
SYM_SHAPE = TupleAttr(DimAttr())  # a shape whose `?` dims are symbolic (the op's extra operands, in order)
SYM_PAIRS = TupleAttr(TupleAttr(DimAttr(), 2))  # [before, after] / [start, end] per axis, `?` as in SYM_SHAPE
INTS = TupleAttr(INT)


def fmt_float(v: float) -> str:
    """Shortest text that parses back to the same bits; always has a '.', 'e', 'inf' or 'nan' so it reads as float."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    r = repr(v)
    return r if ("." in r or "e" in r) else r + ".0"


_ESC = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(s: str) -> str:
    out = []
    for ch in s:
        if ch in _ESC:
            out.append(_ESC[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def fmt_literal(v: Any) -> str:
    """Print any literal in the .uop syntax (used for tags, free-form args and error messages)."""
    if v is None:
        return "none"
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is int:
        return str(v)
    if type(v) is float:
        return fmt_float(v)
    if type(v) is str:
        return quote(v)
    if isinstance(v, Ident):
        return v.name
    if v is DYN:
        return "?"
    if isinstance(v, DType):
        return v.name
    if type(v) in (tuple, list):
        return "[" + ", ".join(fmt_literal(x) for x in v) + "]"
    return f"<{type(v).__name__}>"


# ---- op declarations -------------------------------------------------------------------------------------------------
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True, slots=True)
class Attr:
    """One attribute of an op's arg: its name, type and default."""

    name: str
    type: AttrType
    default: Any = REQUIRED  # an attribute equal to its default is not printed
    in_type: bool = False  # printed as the shape of the result type, not in the attribute dict (tensor.buffer)


VerifyFn = Callable[["UOp"], Iterable[str]]
ShapeFn = Callable[["UOp"], "tuple[int, ...] | None"]


@dataclass(eq=False)
class OpDef:
    """One op of one dialect. Identity is the object itself; `name` is `dialect.mnemonic`."""

    name: str
    n_src: tuple[int, int | None]  # (min, max); max None = variadic
    attrs: tuple[Attr, ...] = ()
    traits: Trait = Trait.NONE
    verify: VerifyFn | None = None  # yields error messages
    shape: ShapeFn | None = None  # result shape from the sources (None: not a tensor value)
    positional: int = 0  # leading attrs printed bare after the operands in the pretty form (core.const 1.0)
    normalize_arg: Callable[[DType, Any], Any] | None = None  # dtype-aware arg canonicalization (parser)
    summary: str = ""
    operands: tuple[str, ...] = ()  # names of the leading operands with fixed roles; "*name" last: the rest
    dialect: str = field(init=False)
    mnemonic: str = field(init=False)
    attrs_view: type[AttrsView] = field(init=False, repr=False)  # u.attrs: the attributes by name
    operands_view: type[OperandsView] = field(init=False, repr=False)  # u.operands: the named operands

    def __post_init__(self) -> None:
        self.dialect, _, self.mnemonic = self.name.partition(".")
        if not (self.dialect and self.mnemonic):
            raise RegistrationError(f"op name {self.name!r} must be dialect.mnemonic")
        if sum(a.in_type for a in self.attrs) > 1:
            raise RegistrationError(f"{self.name}: at most one attribute can be written in the type")
        self.attrs_view = _view_class(AttrsView, self, {a.name: self.attr_reader(i) for i, a in enumerate(self.attrs)})
        self.operands_view = _view_class(OperandsView, self, _operand_readers(self))

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return (get_op, (self.name,))

    def has(self, trait: Trait) -> bool:
        return bool(self.traits & trait)

    # --- arg <-> attribute dict --------------------------------------------------------------------------------
    def attr_reader(self, i: int) -> property:
        """How `u.attrs.<name>` reads the i-th attribute out of the arg (on each read: the UOp stores only the arg)."""
        if len(self.attrs) == 1:
            return property(_whole_arg)
        return property(lambda v: v._u.arg[i])

    def attr_values(self, arg: Any) -> dict[str, Any]:
        if not self.attrs:
            return {}
        if len(self.attrs) == 1:
            return {self.attrs[0].name: arg}
        return {a.name: v for a, v in zip(self.attrs, arg, strict=True)}

    def make_arg(self, values: dict[str, Any]) -> Any:
        """Build the canonical arg from named, already-parsed values; raises AttrError naming the attribute."""
        unknown = set(values) - {a.name for a in self.attrs}
        if unknown:
            known = ", ".join(a.name for a in self.attrs) or "none"
            raise AttrError(f"'{self.name}' has no attribute '{sorted(unknown)[0]}' (attributes: {known})")
        out = []
        for a in self.attrs:
            if a.name in values:
                try:
                    out.append(a.type.convert(values[a.name]))
                except AttrError as e:
                    raise AttrError(f"attribute '{a.name}' of '{self.name}': {e}") from None
            elif a.default is REQUIRED:
                raise AttrError(f"'{self.name}' requires attribute '{a.name}'")
            else:
                out.append(a.default)
        if not self.attrs:
            return None
        return out[0] if len(out) == 1 else tuple(out)

    def arity_ok(self, n: int) -> bool:
        lo, hi = self.n_src
        return n >= lo and (hi is None or n <= hi)

    def arity_text(self) -> str:
        lo, hi = self.n_src
        if hi == lo:
            return f"{lo} operand" + ("" if lo == 1 else "s")
        if hi is None:
            return f"at least {lo} operand" + ("" if lo == 1 else "s")
        return f"{lo} to {hi} operands"


# ---- attributes and operands by name ---------------------------------------------------------------------------------
# `u.attrs.axis` and `u.operands.ptr` (uopir.ir.uop) build a small view of u whose class the op made once, at its
# declaration: one property per name, reading u.arg / u.src on each access. Nothing happens when a UOp is built (the
# constructor is the hot path), and one view serves every op that shares a name (tensor.var and kernel.var: `name`).
class AttrsView:
    """The attributes of one UOp by name; an unknown name is an AttributeError naming the op and what it has."""

    __slots__ = ("_u",)
    _op: OpDef  # set on each op's subclass
    _what = "attribute"

    def __init__(self, u: UOp) -> None:
        self._u = u

    def _names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self._op.attrs)

    def __getattr__(self, name: str) -> Any:  # only reached for a name the op does not declare
        have = ", ".join(self._names()) or "none"
        raise AttributeError(f"'{self._op.name}' has no {self._what} '{name}' ({self._what}s: {have})")

    def __repr__(self) -> str:
        return f"{self._op.name} {self._what}s(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._names()) + ")"


class OperandsView(AttrsView):
    """The operands of one UOp by the names its op declares (an absent optional one is None; `*rest` a tuple)."""

    __slots__ = ()
    _what = "operand"

    def _names(self) -> tuple[str, ...]:
        return tuple(n.lstrip("*") for n in self._op.operands)


def _whole_arg(v: AttrsView) -> Any:
    return v._u.arg


def _view_class(base: type[AttrsView], op: OpDef, readers: dict[str, property]) -> type[AttrsView]:
    bad = [n for n in readers if not n.isidentifier() or iskeyword(n) or n.startswith("_") or hasattr(base, n)]
    if bad:
        raise RegistrationError(f"{op.name}: {base._what} name {bad[0]!r} cannot be an accessor")
    return type(f"{base.__name__}[{op.name}]", (base,), {"__slots__": (), "_op": op, **readers})


def _operand_readers(op: OpDef) -> dict[str, property]:
    """One property per named operand: required ones (within the op's minimum count) read src[i], optional ones
    None when absent, a last `*name` the tuple of the remaining operands."""
    lo, hi = op.n_src
    out: dict[str, property] = {}
    for i, n in enumerate(op.operands):
        if n.startswith("*"):
            if not (i == len(op.operands) - 1 and hi is None):
                raise RegistrationError(f"{op.name}: '{n}' must be last, on a variadic op")
            out[n[1:]] = property(lambda v, i=i: v._u.src[i:])
        elif i < lo:
            out[n] = property(lambda v, i=i: v._u.src[i])
        else:
            if not (hi is None or i < hi):
                raise RegistrationError(f"{op.name}: operand '{n}' past the op's {hi} operands")
            out[n] = property(lambda v, i=i: v._u.src[i] if len(v._u.src) > i else None)
    if len(out) != len(op.operands):
        raise RegistrationError(f"{op.name}: operand names repeat")
    return out


REGISTRY: dict[str, OpDef] = {}
DIALECTS: dict[str, list[OpDef]] = {}


_SITES = Sites("op")


def register(op: OpDef, *, replace: bool = False) -> OpDef:
    """Add `op` to the registry; a name taken by another line is a RegistrationError naming both (see
    uopir.ir.registration), unless `replace`. Ops that hold the old OpDef (patterns, handler tables) keep it: replace
    an op before anything is built on it."""
    old = REGISTRY.get(op.name)
    _SITES.claim(op.name, old is not None, replace)
    if old is not None:
        DIALECTS[old.dialect].remove(old)
    REGISTRY[op.name] = op
    DIALECTS.setdefault(op.dialect, []).append(op)
    return op


def op_site(name: str) -> str | None:
    """Where op `name` was declared (file:line), if it was."""
    return _SITES.where(name)


def def_op(name: str, n_src: int | tuple[int, int | None], attrs: Iterable[Attr] = (), traits: Trait = Trait.NONE,
           verify: VerifyFn | None = None, shape: ShapeFn | None = None, positional: int = 0,
           normalize_arg: Callable[[DType, Any], Any] | None = None, summary: str = "",
           operands: Iterable[str] = (), replace: bool = False) -> OpDef:
    """Declare and register one op. `n_src` is an exact count or (min, max) with max None for variadic; `operands`
    names the operands with fixed roles (`u.operands.<name>`), a last `*name` the variadic rest. `replace`: redefine
    an op declared elsewhere (a second declaration is otherwise an error naming both places)."""
    rng = (n_src, n_src) if isinstance(n_src, int) else n_src
    return register(OpDef(name, rng, tuple(attrs), traits, verify, shape, positional, normalize_arg, summary,
                          tuple(operands)), replace=replace)


def get_op(name: str) -> OpDef:
    """The registered op called `name`; KeyError if none (load the dialects first: `import uopir`)."""
    return REGISTRY[name]
