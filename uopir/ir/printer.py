"""Print a UOp graph as .uop text (pretty or generic form); `uopir.ir.parser` reads both back to the same UOps.

Nodes are numbered `%0, %1, …` in toposort order (never recursion on graph depth: chains are 100k deep), each
region restarting at `%0`. The format is specified in docs/internals.md, "The text".
"""
from __future__ import annotations

import math
from typing import Any

from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import REQUIRED, OpDef, OptionalAttr, RegionAttr, fmt_literal
from uopir.ir.syntax import SYNTAX
from uopir.ir.uop import UOp, gc_paused

_VOID = dtypes.void
_INDENT = "  "


def fmt_type(dtype: DType, shape: tuple[int, ...] | None = None) -> str:
    """`tensor<4x4xf32>` / `tensor<f32>` for a shaped value, else the dtype's name; a symbolic dim prints `?`
    (`tensor<?x4xf32>`: its value is the op's operand, see uopir.ir.symbolic)."""
    if shape is None:
        return dtype.name
    key = (dtype, shape)
    t = _TYPE_TEXT.get(key)
    if t is None:
        t = "tensor<" + "".join([f"{d}x" if type(d) is int else "?x" for d in shape]) + dtype.name + ">"
        if len(_TYPE_TEXT) > 4096:
            _TYPE_TEXT.clear()
        _TYPE_TEXT[key] = t
    return t


_TYPE_TEXT: dict[tuple, str] = {}  # (dtype, shape) -> its text: the few types of a graph repeat on every line


def _same(v: Any, d: Any) -> bool:
    """Bit-exact equality for default elision: 0.0 is not -0.0, 1 is not True, nan is nan."""
    if v is d:
        return True
    if type(v) is not type(d):
        return False
    if type(v) is float:
        return v.hex() == d.hex() if not (math.isnan(v) and math.isnan(d)) else True
    if type(v) is tuple:
        return len(v) == len(d) and all(_same(a, b) for a, b in zip(v, d, strict=True))
    try:
        return bool(v == d)
    except Exception:
        return False


def _is_region(t: Any) -> bool:
    return isinstance(t, RegionAttr) or (isinstance(t, OptionalAttr) and isinstance(t.inner, RegionAttr))


class _PMeta:
    """Per-op printing facts, computed once per OpDef."""

    __slots__ = ("name", "quoted", "attrs", "npos", "simple", "has_shape")

    def __init__(self, od: OpDef):
        self.name = od.name
        self.quoted = '"' + od.name + '"'
        # (name, type, default, kind) with kind: "pos", "dict", "in_type" or "region"
        self.attrs = tuple((a.name, a.type, a.default,
                            "region" if _is_region(a.type) else "in_type" if a.in_type else
                            "pos" if i < od.positional else "dict") for i, a in enumerate(od.attrs))
        self.npos = od.positional
        self.simple = type(od).attr_values is OpDef.attr_values
        self.has_shape = od.shape is not None


_PMETA: dict[OpDef, _PMeta] = {}


def _pmeta(od: OpDef) -> _PMeta:
    m = _PMETA.get(od)
    if m is None:
        m = _PMETA[od] = _PMeta(od)
    return m


def _shape_of(u: UOp) -> tuple[int, ...] | None:
    try:
        return u.shape
    except Exception:  # an invalid graph still prints (for dumps); the parser will report the shape error
        return None


def _fmt_attr(t: Any, v: Any) -> str:
    try:
        return t.fmt(v)
    except Exception:
        return fmt_literal(v)


def _attr_list(m: _PMeta, u: UOp) -> list[Any]:
    if m.simple:
        n = len(m.attrs)
        return [u.arg] if n == 1 else list(u.arg) if type(u.arg) is tuple and len(u.arg) == n else None
    try:
        vals = u.op.attr_values(u.arg)
        return [vals[a[0]] for a in m.attrs]
    except Exception:
        return None


def _block(root: UOp, generic: bool, indent: str, out: list[str]) -> None:
    """Append the lines of one block (a graph whose root is its last op); regions recurse per nesting level."""
    names: dict[UOp, str] = {}
    k = 0
    for u in root.toposort():
        od = u.op
        m = _PMETA.get(od) or _pmeta(od)
        dt = u.dtype
        sh = _shape_of(u) if m.has_shape else None
        # operands
        if generic:
            s = m.quoted + "(" + ", ".join([names[x] for x in u.src]) + ")"
        elif SYNTAX and (syn := SYNTAX.get(od)) is not None:  # the op's own pretty form (uopir.ir.syntax)
            s = m.name + " " + syn.print(u, [names[x] for x in u.src])
        elif u.src:
            s = m.name + " " + ", ".join([names[x] for x in u.src])
        else:
            s = m.name
        items: list[str] | None = None
        regions: list[UOp] | None = None
        if m.attrs:
            vals = _attr_list(m, u)
            if vals is None:  # an arg that does not fit the op's schema: show it raw (will not parse back)
                items = ["arg = " + fmt_literal(u.arg)]
            else:
                pos: list[str] | None = None
                for (aname, atype, adef, kind), v in zip(m.attrs, vals, strict=True):
                    if kind == "pos" and not generic:
                        if pos is None:
                            pos = []
                        pos.append(_fmt_attr(atype, v))
                        continue
                    if kind == "region" and isinstance(v, UOp):
                        if regions is None:
                            regions = []
                        regions.append(v)
                        continue
                    if kind == "in_type" and sh is not None and type(v) is tuple and v == sh:
                        continue
                    if adef is not REQUIRED and _same(v, adef):
                        continue
                    if items is None:
                        items = []
                    items.append(aname + " = " + _fmt_attr(atype, v))
                if pos is not None:
                    s += " " + ", ".join(pos)
        if u.tag is not None:
            if items is None:
                items = []
            items.append("tag = " + fmt_literal(u.tag))
        if items is not None:
            s += " {" + ", ".join(items) + "}"
        if regions is not None:
            inner = indent + _INDENT
            for r in regions:
                sub: list[str] = []
                _block(r, generic, inner, sub)
                s += " ({\n" + "\n".join(sub) + "\n" + indent + "})"
        if generic:
            s += " : (" + ", ".join([_type_of(x) for x in u.src]) + ") -> " + fmt_type(dt, sh)
        elif dt is not _VOID or sh is not None:
            s += " : " + (dt.name if sh is None else fmt_type(dt, sh))
        if u is root and dt is _VOID:
            out.append(indent + s)
        else:
            name = f"%{k}"
            k += 1
            names[u] = name
            out.append(indent + name + " = " + s)


def _type_of(u: UOp) -> str:
    return fmt_type(u.dtype, _shape_of(u) if u.op.shape is not None else None)


def print_ir(u: UOp, generic: bool = False) -> str:
    """The .uop text of the graph rooted at `u`; `parse_ir` of it returns `u` itself (hash-consing)."""
    out: list[str] = []
    with gc_paused():
        _block(u, generic, "", out)
    return "\n".join(out) + "\n"
