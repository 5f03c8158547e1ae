"""Parse .uop text (pretty and generic forms, mixed freely) into hash-consed UOps, with located errors.

Every bad input ends in an IRError whose location is the offending token (file:line:col) and whose source line
is attached for the caret display; no other exception type escapes `parse_ir`. The parser is line based (one
op per line; a region `({ … })` spans the lines between its opening and closing lines), tokenizes with one
regex per line and caches per-op and per-type facts, so that large graphs parse at well over 100k ops/s.
"""
from __future__ import annotations

import difflib
import os
import re
from typing import Any, NoReturn

from uopir.ir.diagnostics import IRError, Location, ShapeError, SourceMap, register_parse, register_source
from uopir.ir.dtype import ADDRSPACES, SCALARS, DType, dtypes
from uopir.ir.lexer import NUM_START, WORD_START, parse_number, token_col, tokenize_line, unescape
from uopir.ir.ops import ANY, DIALECTS, DYN, REGISTRY, REQUIRED, AttrError, Ident, OpDef, OptionalAttr, RegionAttr
from uopir.ir.printer import fmt_type
from uopir.ir.syntax import SYNTAX
from uopir.ir.uop import UOp, gc_paused

__all__ = ["parse_ir", "parse_with_source_map", "split_input", "parse_type"]

MAX_REGION_DEPTH = 64
MAX_LIST_DEPTH = 64
_VOID = dtypes.void
_KEYWORDS: dict[str, Any] = {"true": True, "false": False, "none": None, "inf": float("inf"), "nan": float("nan")}
_SPLIT_MARK = "// -----"
# one canonical pretty line: [%name = ] op [%a, %b] [number|true|false] [: type]
_FAST = re.compile(r"[ \t]*(?:(%[\w.$-]+) = )?([A-Za-z_][\w.$]*)((?: %[\w.$-]++,)*+ %[\w.$-]+)?"
                   r"(?: (-?[0-9][\w.+-]*|true|false))?(?: \{([^{}]*)\})?(?: : ([\w<>]+))?", re.ASCII).fullmatch
_DICTS: dict[str, tuple[tuple[str, Any], ...]] = {}  # attribute dict text -> parsed items (they repeat a lot)
_CACHE_KEY_MAX = 256  # longer type or attribute-dict texts are parsed each time rather than cached
# one canonical generic line: [%name = ] "op"(%a, %b) [{key = number|true|false}] : (T, T) -> T
_FAST_GENERIC = re.compile(r"[ \t]*(?:(%[\w.$-]+) = )?\"([A-Za-z_][\w.$]*)\"\(((?:%[\w.$-]++, )*+%[\w.$-]+)?\)"
                           r"(?: \{([A-Za-z_]\w*) = (-?[0-9][\w.+-]*|true|false)\})?"
                           r" : \(((?:[\w<>]++, )*+[\w<>]+)?\) -> ([\w<>]+)", re.ASCII).fullmatch
_NO_TOKS: list[int] = []
_NO_KEYS: dict[str, int] = {}
_NO_REGIONS: list = []


# ---- types ----------------------------------------------------------------------------------------------------------
_SCALAR_TYPES: dict[str, DType] = {d.name: d for d in SCALARS}
_TYPES: dict[str, tuple[DType, tuple[int, ...] | None]] = {}
_DIMS_RE = re.compile(r"((?:(?:[0-9]++|\?)x)*+)(.+)", re.ASCII)
_VEC_RE = re.compile(r"([0-9]+)x(.+)", re.ASCII)


def _split_commas(s: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for j, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(s[start:j])
            start = j + 1
    parts.append(s[start:])
    return parts


def _dtype(s: str) -> DType:
    d = _SCALAR_TYPES.get(s)
    if d is not None:
        return d
    if s.startswith("vector<") and s.endswith(">"):
        m = _VEC_RE.fullmatch(s[7:-1])
        if m is None:
            raise ValueError(f"malformed vector type '{s}' (expected vector<NxT>)")
        n, el = int(m.group(1)), _dtype(m.group(2))
        if el.count != 1 or el.kind in ("ptr", "void"):
            raise ValueError(f"vector element type must be a scalar, got '{el.name}'")
        if n < 2:
            raise ValueError(f"a vector type needs at least 2 lanes, got {n}")
        return el.vec(n)
    if s.startswith("ptr<") and s.endswith(">"):
        parts = _split_commas(s[4:-1])
        if len(parts) not in (2, 3):
            raise ValueError(f"malformed pointer type '{s}' (expected ptr<T, addrspace> or ptr<T, addrspace, size>)")
        base = _dtype(parts[0])
        if parts[1] not in ADDRSPACES:
            raise ValueError(f"unknown address space '{parts[1]}' (expected {', '.join(ADDRSPACES)})")
        size = -1
        if len(parts) == 3:
            if not parts[2].isdigit() or not parts[2].isascii():
                raise ValueError(f"pointer size must be a non-negative integer, got '{parts[2]}'")
            size = int(parts[2])
        return base.ptr(parts[1], size)
    if s.startswith("tensor<"):
        raise ValueError(f"a tensor type cannot be an element type: '{s}'")
    close = difflib.get_close_matches(s, list(_SCALAR_TYPES), n=1)
    raise ValueError(f"unknown type '{s}'" + (f"; did you mean '{close[0]}'?" if close else ""))


def parse_type(text: str) -> tuple[DType, tuple[int, ...] | None]:
    """(dtype, shape) of a type's text: `f32`, `vector<4xf32>`, `ptr<f32, local, 16>`, `tensor<4x4xf32>`; a `?` dim
    (`tensor<?x4xf32>`, a symbolic one) is DYN in the shape.

    Cached (the same few types repeat on every line); ValueError with a message for a bad type."""
    r = _TYPES.get(text)
    if r is not None:
        return r
    s = "".join(text.split())
    if s.startswith("tensor<") and s.endswith(">"):
        m = _DIMS_RE.fullmatch(s[7:-1])
        if m is None:
            raise ValueError(f"malformed tensor type '{text}' (expected tensor<4x4xf32>)")
        dims = m.group(1)
        if len(dims) > 4000:
            raise ValueError("tensor type has too many dimensions")
        shape = tuple(DYN if x == "?" else int(x) for x in dims.split("x")[:-1])
        r = (_dtype(m.group(2)), shape)
    else:
        r = (_dtype(s), None)
    if len(text) <= _CACHE_KEY_MAX:  # fuzzed input must not grow the cache without bound (count and size)
        if len(_TYPES) > 10000:
            _TYPES.clear()
        _TYPES[text] = r
    return r


# ---- per-op facts ---------------------------------------------------------------------------------------------------
def _as_typed(shape: tuple | None) -> tuple | None:
    """A value's shape as its type states it: a symbolic dim (an index UOp) is `?` (DYN)."""
    if shape is None:
        return None
    return tuple(d if type(d) is int else DYN for d in shape)


def _is_region(t: Any) -> bool:
    return isinstance(t, RegionAttr) or (isinstance(t, OptionalAttr) and isinstance(t.inner, RegionAttr))


class _OpInfo:
    __slots__ = ("od", "npos", "posnames", "in_type", "regions", "has_dict", "has_attrs", "has_shape")

    def __init__(self, od: OpDef):
        self.od = od
        self.npos = od.positional
        self.posnames = tuple(a.name for a in od.attrs[:od.positional])
        self.in_type = next((a.name for a in od.attrs if a.in_type), None)
        self.regions = tuple(a.name for a in od.attrs if _is_region(a.type))
        self.has_dict = any(not _is_region(a.type) for a in od.attrs[od.positional:])
        self.has_attrs = bool(od.attrs)
        self.has_shape = od.shape is not None


_INFO: dict[str, _OpInfo] = {}


def _info(name: str) -> _OpInfo | None:
    od = REGISTRY.get(name)
    if od is None:
        return None
    info = _INFO[name] = _OpInfo(od)
    return info


def _short(tok: str) -> str:
    """A token as quoted in a message: long ones (a fuzzer's 5000-digit int) cut to a readable length."""
    return tok if len(tok) <= 60 else tok[:57] + "..."


def _closest(word: str, names: list[str]) -> str | None:
    """The most similar name (difflib), ties going to the longest common prefix: 'core.ad' -> 'core.add'."""
    cands = difflib.get_close_matches(word, names, n=5, cutoff=0.6)
    if not cands:
        return None

    def score(c: str) -> tuple[float, int]:
        return round(difflib.SequenceMatcher(None, word, c).ratio(), 6), len(os.path.commonprefix([word, c]))

    return max(cands, key=score)


def _unknown_op_message(name: str) -> str:
    if len(name) > 100:
        return f"unknown op '{_short(name)}'"
    dialect, dot, _ = name.partition(".")
    close = _closest(name, list(REGISTRY))
    hint = f"; did you mean '{close}'?" if close else ""
    if not dot:
        return f"unknown op '{name}' (ops are written dialect.name){hint}"
    if dialect not in DIALECTS:
        if not close:
            dclose = difflib.get_close_matches(dialect, list(DIALECTS), n=1)
            hint = f"; did you mean '{dclose[0]}'?" if dclose else f" (dialects: {', '.join(sorted(DIALECTS))})"
        return f"unknown dialect '{dialect}' in op '{name}'{hint}"
    return f"unknown op '{name}'{hint}"


def _tag_literal(v: Any) -> Any:
    """A bare scalar type name in a tag is the DType (strings always print quoted, so `f32` cannot be one)."""
    if type(v) is Ident and v.name in _SCALAR_TYPES:
        return _SCALAR_TYPES[v.name]
    if type(v) is list:
        return [_tag_literal(x) for x in v]
    return v


def _join_or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


# ---- the parser -----------------------------------------------------------------------------------------------------
class _Cursor:
    """The tokens of one op line for a custom syntax's parse hook (uopir.ir.syntax.Cursor); errors point at them."""

    __slots__ = ("p", "t", "li", "i", "env", "used", "depth")

    def __init__(self, p: _Parser, t: list[str], li: int, i: int, env: dict[str, UOp], used: set[str], depth: int):
        self.p, self.t, self.li, self.i, self.env, self.used, self.depth = p, t, li, i, env, used, depth

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def expect(self, token: str) -> None:
        if self.peek() != token:
            self.p.err(self.li, self.i, f"expected '{token}', got {self.p.got(self.t, self.i)}")
        self.i += 1

    def operand(self) -> UOp:
        tok = self.peek()
        if tok is None or tok[0] != "%":
            self.p.err(self.li, self.i, f"expected a value, got {self.p.got(self.t, self.i)}")
        u = self.env.get(tok)
        if u is None:
            self.p.undefined(self.t, self.li, self.i, self.depth)
        self.used.add(tok)
        self.i += 1
        return u

    def error(self, message: str) -> NoReturn:
        self.p.err(self.li, self.i, message)


class _Parser:
    def __init__(self, text: str, filename: str, first_line: int):
        self.file = filename
        self.first = first_line
        self.lines = text.split("\n")
        self.smap = SourceMap(filename, first_line, self.lines)  # this parse's locations (see diagnostics.py)
        self.at = self.smap._at
        self.toks: list[list[str] | None] = [None] * len(self.lines)  # tokenized on demand (slow path)
        self.envs: list[dict[str, UOp]] = []  # enclosing blocks' names, only for a better message

    # --- errors ----------------------------------------------------------------------------------------------------
    def loc(self, li: int, col: int) -> Location:
        return Location(self.file, li + self.first, col)

    def err(self, li: int, k: int, msg: str) -> NoReturn:
        line = self.lines[li] if 0 <= li < len(self.lines) else ""
        raise IRError(msg, self.loc(li, token_col(line, k)), source_line=line.rstrip("\r"))

    def got(self, t: list[str], i: int) -> str:
        return f"'{_short(t[i])}'" if i < len(t) else "end of line"

    # --- blocks ----------------------------------------------------------------------------------------------------
    def block(self, li: int, depth: int, open_at: tuple[int, int] | None) -> tuple[UOp, int]:
        """Parse ops until the end of input (top level) or a line starting with '}' (a region); (root, end line)."""
        lines = self.lines
        toks = self.toks
        n = len(lines)
        env: dict[str, UOp] = {}
        defs: list[tuple[str | None, int, UOp]] = []
        used: set[str] = set()
        op = self.op
        fast = self.fast
        while li < n:
            line = lines[li]
            m = _FAST(line)
            if m is not None:
                if fast(m, False, li, env, defs, used):
                    li += 1
                    continue
            elif '"(' in line and (m := _FAST_GENERIC(line)) is not None and fast(m, True, li, env, defs, used):
                li += 1
                continue
            t = toks[li]
            if t is None:
                t = toks[li] = tokenize_line(line)
                if t and t[-1][:2] == "//":
                    t.pop()
            if not t:
                li += 1
                continue
            if t[0] == "}":
                if open_at is None:
                    self.err(li, 0, "unexpected '}' outside a region")
                break
            li = op(t, li, env, defs, used, depth)
        else:
            if open_at is not None:
                self.err(open_at[0], open_at[1], "unterminated region: expected '})' before the end of the input")
        if not defs:
            if open_at is not None:
                self.err(open_at[0], open_at[1], "empty region: a region needs at least one op")
            raise IRError("empty input: expected at least one op", self.loc(0, 1),
                          source_line=self.lines[0] if self.lines else None)
        if len(used) != len(defs) - 1:  # every value but the root must be used (so all are reachable from it)
            for name, dli, _ in defs[:-1]:
                if name is None or name not in used:
                    what = f"'{name}'" if name is not None else "this op's result (it has no name)"
                    self.err(dli, 0, f"{what} is not reachable from the root (the last op of the block)")
        return defs[-1][2], li

    def fast(self, m: re.Match, generic: bool, li: int, env: dict[str, UOp], defs: list, used: set[str]) -> bool:
        """A common canonical line (`%3 = core.add %1, %2 : f32`, `%0 = core.const 1.0 : f32`, and their generic
        forms) from one regex match. Anything unusual, including any error, returns False and the tokenizing path
        redoes the line (and reports the error at its token)."""
        if generic:
            name, opname, ops, key, val, optys, ty = m.groups()
            names = ops.split(", ") if ops is not None else None
            dct = None
        else:
            name, opname, ops, val, dct, ty = m.groups()
            names = ops[1:].split(", ") if ops is not None else None
        info = _INFO.get(opname) or _info(opname)
        if info is None or (name is not None and name in env) or (SYNTAX and info.od in SYNTAX):
            return False
        src = []
        if names is not None:
            for x in names:
                u = env.get(x)
                if u is None:
                    return False
                src.append(u)
        if not info.od.arity_ok(len(src)):
            return False
        types = _TYPES
        if ty is not None:
            r = types.get(ty)
            if r is None:
                try:
                    r = parse_type(ty)
                except ValueError:
                    return False
            dtype, shape = r
        else:
            dtype, shape = _VOID, None
        values = None
        if val is not None:
            if generic:
                if key == "tag":
                    return False
            elif not info.npos:
                return False
            else:
                key = info.posnames[0]
            if val in _KEYWORDS:
                v = _KEYWORDS[val]
            else:
                try:
                    v = parse_number(val)
                except ValueError:
                    return False
            values = {key: v}
        if dct is not None:
            items = _DICTS.get(dct)
            if items is None:
                items = self.fast_dict(dct)
                if items is None:
                    return False
            if values is None:
                values = dict(items)
            else:
                for k, v in items:
                    if k in values:
                        return False
                    values[k] = v
        if generic:  # the stated operand types must be the operands' types
            tys = optys.split(", ") if optys is not None else ()
            if len(tys) != len(src):
                return False
            for x, tx in zip(src, tys, strict=True):
                r = types.get(tx)
                if r is None or x.dtype is not r[0] or (x.shape if x.op.shape is not None else None) != r[1]:
                    return False
        od = info.od
        if values is None and not info.has_attrs and od.normalize_arg is None:  # the ALU ops: no arg at all
            try:
                u = UOp(od, dtype, tuple(src))
                if (u.shape if info.has_shape else None) != shape:
                    return False
            except Exception:
                return False
        else:
            try:
                u = self.build(info, li, li, 0, src, _NO_TOKS, values, _NO_KEYS, None, _NO_REGIONS, dtype, shape,
                               -1 if ty is None else 0, 0, None)
            except IRError:
                return False
        if names is not None:
            used.update(names)
        self.at[u] = li
        if name is not None:
            env[name] = u
        defs.append((name, li, u))
        return True

    def fast_dict(self, text: str) -> tuple[tuple[str, Any], ...] | None:
        """The items of an attribute dict's text, cached; None (the slow path will report it) for anything odd."""
        t = tokenize_line(text)
        n = len(t)
        items: dict[str, Any] = {}
        i = 0
        try:
            while i < n:
                key = t[i]
                if key[0] not in WORD_START or key == "tag" or key in items or i + 1 >= n or t[i + 1] != "=":
                    return None
                items[key], i = self.literal(t, i + 2, -1, 0)
                if i < n:
                    if t[i] != "," or i + 1 == n:
                        return None
                    i += 1
        except IRError:
            return None
        r = tuple(items.items())
        if len(text) <= _CACHE_KEY_MAX:  # bounded in count and in size: a 1 MB string attribute is not kept
            if len(_DICTS) > 10000:
                _DICTS.clear()
            _DICTS[text] = r
        return r

    # --- one op ----------------------------------------------------------------------------------------------------
    def op(self, t: list[str], li: int, env: dict[str, UOp], defs: list, used: set[str], depth: int) -> int:
        """Parse the op starting on line li (and the lines of its regions); returns the next line index."""
        n = len(t)
        tok = t[0]
        name = None
        i = 0
        if tok[0] == "%":
            if len(tok) == 1:
                self.err(li, 0, "expected a value name after '%'")
            if n < 2 or t[1] != "=":
                self.err(li, 1, f"expected '=' after '{_short(tok)}', got {self.got(t, 1)}")
            name = tok
            if name in env:
                first = next(d for d in defs if d[0] == name)
                line = self.lines[first[1]]
                self.err(li, 0, f"redefinition of '{name}' (first defined at {self.loc(first[1], token_col(line, 0))})")
            i = 2
            if n < 3:
                self.err(li, 2, "expected an op name, got end of line")
        tok = t[i]
        generic = tok[0] == '"'
        opname = self.string(t, li, i) if generic else tok
        info = _INFO.get(opname) or _info(opname)
        if info is None:
            if generic or tok[0] in WORD_START:
                self.err(li, i, _unknown_op_message(opname))
            self.err(li, i, f"expected an op name, got '{_short(tok)}'")
        od = info.od
        op_k = i
        i += 1
        src: list[UOp] = []
        src_toks: list[int] = []
        if generic:
            if i >= n or t[i] != "(":
                self.err(li, i, f"expected '(' after the op name, got {self.got(t, i)}")
            i += 1
            if i < n and t[i] == ")":
                i += 1
            else:
                while True:
                    tok = t[i] if i < n else ""
                    if tok[:1] != "%":
                        self.err(li, i, f"expected a value, got {self.got(t, i)}")
                    u = env.get(tok)
                    if u is None:
                        self.undefined(t, li, i, depth)
                    src.append(u)
                    src_toks.append(i)
                    used.add(tok)
                    i += 1
                    if i < n and t[i] == ",":
                        i += 1
                    elif i < n and t[i] == ")":
                        i += 1
                        break
                    else:
                        self.err(li, i, f"expected ',' or ')', got {self.got(t, i)}")
        elif SYNTAX and (syn := SYNTAX.get(od)) is not None:  # the op's own pretty form (uopir.ir.syntax)
            cur = _Cursor(self, t, li, i, env, used, depth)
            src = list(syn.parse(cur))
            i = cur.i
        elif i < n and t[i][0] == "%":
            while True:
                tok = t[i]
                u = env.get(tok)
                if u is None:
                    self.undefined(t, li, i, depth)
                src.append(u)
                used.add(tok)
                i += 1
                if i + 1 < n and t[i] == "," and t[i + 1][0] == "%":
                    i += 1
                else:
                    break
        after_operand = bool(src) and not generic
        values: dict[str, Any] | None = None
        keypos: dict[str, int] = {}
        # positional attributes (pretty form): `core.const 1.0 : f32`
        if info.npos and not generic and i < n and t[i] not in ("{", "(", ":"):
            if t[i] == "," and after_operand:
                i += 1
            values = {}
            k = 0
            while True:
                if k == info.npos:
                    self.err(li, i, f"'{od.name}' takes {info.npos} positional attribute"
                                    f"{'' if info.npos == 1 else 's'} ({', '.join(info.posnames)})")
                keypos[info.posnames[k]] = i
                values[info.posnames[k]], i = self.literal(t, i, li, 0)
                k += 1
                if i < n and t[i] == ",":
                    i += 1
                else:
                    break
            after_operand = False
        # attribute dict
        tag = None
        had_dict = False
        if i < n and t[i] == "{":
            had_dict = True
            after_operand = False
            i += 1
            if values is None:
                values = {}
            if i < n and t[i] == "}":
                i += 1
            else:
                while True:
                    key = t[i] if i < n else ""
                    if key[:1] not in WORD_START:
                        self.err(li, i, f"expected an attribute name, got {self.got(t, i)}")
                    if key in keypos:
                        self.err(li, i, f"attribute '{key}' given twice")
                    keypos[key] = i
                    if i + 1 >= n or t[i + 1] != "=":
                        self.err(li, i + 1, f"expected '=' after attribute name '{key}', got {self.got(t, i + 1)}")
                    v, i = self.literal(t, i + 2, li, 0)
                    if key == "tag":
                        tag = v
                    else:
                        values[key] = v
                    if i < n and t[i] == ",":
                        i += 1
                    elif i < n and t[i] == "}":
                        i += 1
                        break
                    else:
                        self.err(li, i, f"expected ',' or '}}', got {self.got(t, i)}")
        # regions: `({` ends the line, the region's ops follow, `})` starts the closing line
        cl = li
        regions: list[UOp] = []
        while i + 1 < n and t[i] == "(" and t[i + 1] == "{":
            after_operand = False
            if i + 2 != n:
                self.err(cl, i + 2, f"expected end of line after '({{' (a region's ops go on the following lines), "
                                    f"got {self.got(t, i + 2)}")
            if depth >= MAX_REGION_DEPTH:
                self.err(cl, i, f"regions nested more than {MAX_REGION_DEPTH} deep")
            self.envs.append(env)
            try:
                root, cl2 = self.block(cl + 1, depth + 1, (cl, i))
            finally:
                self.envs.pop()
            regions.append(root)
            cl = cl2
            t = self.toks[cl]  # tokenized by the region's block, which stopped at its '}'
            n = len(t)
            if n < 2 or t[1] != ")":
                self.err(cl, 1, f"expected ')' after the '}}' that closes a region, got {self.got(t, 1)}")
            i = 2
        # type
        dtype, shape, ty_k = _VOID, None, -1
        stated: list[tuple[int, tuple[DType, Any]]] = []
        if i < n and t[i] == ":":
            i += 1
            if generic:
                if i >= n or t[i] != "(":
                    self.err(cl, i, f"expected '(' starting the operand types, got {self.got(t, i)}")
                i += 1
                if i < n and t[i] == ")":
                    i += 1
                else:
                    while True:
                        stated.append((i, self.type(t, cl, i)))
                        i += 1
                        if i < n and t[i] == ",":
                            i += 1
                        elif i < n and t[i] == ")":
                            i += 1
                            break
                        else:
                            self.err(cl, i, f"expected ',' or ')', got {self.got(t, i)}")
                if i >= n or t[i] != "->":
                    self.err(cl, i, f"expected '->' and the result type, got {self.got(t, i)}")
                i += 1
            ty_k = i
            dtype, shape = self.type(t, cl, i)
            i += 1
            after_operand = False
        elif generic:
            self.err(cl, i, f"expected ':' and the function type '(operand types) -> result type', "
                            f"got {self.got(t, i)}")
        if i != n:
            if after_operand and t[i] == ",":  # `%a, %b,` / `%a, :` (an op's operands never span lines)
                self.err(cl, i + 1, f"expected an operand ('%name') after ',', got {self.got(t, i + 1)}"
                                    + (" (an op and its operands go on one line)" if i + 1 == n else ""))
            exp = []
            if after_operand:
                exp.append("','")
            if not had_dict and not regions and ty_k < 0 and info.has_dict:
                exp.append("'{'")
            if len(regions) < len(info.regions) and ty_k < 0:
                exp.append("'({'")
            if ty_k < 0:
                exp.append("':'")
            exp.append("end of line")
            self.err(cl, i, f"expected {_join_or(exp)}, got '{_short(t[i])}'")
        u = self.build(info, li, cl, op_k, src, src_toks, values, keypos, tag, regions, dtype, shape, ty_k, i,
                       stated if generic else None)
        self.at[u] = li
        if name is not None:
            env[name] = u
        defs.append((name, li, u))
        return cl + 1

    def build(self, info: _OpInfo, li: int, cl: int, op_k: int, src: list[UOp], src_toks: list[int],
              values: dict[str, Any] | None, keypos: dict[str, int], tag: Any, regions: list[UOp], dtype: DType,
              shape: tuple[int, ...] | None, ty_k: int, end_k: int, stated: list | None) -> UOp:
        """Make the UOp from the parsed pieces and check it against the stated types (errors at the token)."""
        od = info.od
        if not od.arity_ok(len(src)):
            self.err(li, op_k, f"'{od.name}' takes {od.arity_text()}, got {len(src)}")
        if stated is not None and len(stated) != len(src):
            self.err(cl, stated[-1][0] if stated else ty_k - 2,
                     f"{len(stated)} operand types for {len(src)} operands")
        if info.in_type is not None and shape is not None and (values is None or info.in_type not in values):
            if values is None:
                values = {}
            values[info.in_type] = shape
        if regions:
            free = [r for r in info.regions if values is None or r not in values]
            if len(regions) > len(free):
                self.err(li, op_k, f"'{od.name}' takes {len(info.regions)} region"
                                   f"{'' if len(info.regions) == 1 else 's'}, got {len(regions)}")
            if values is None:
                values = {}
            for rname, r in zip(free, regions, strict=False):
                values[rname] = r
        arg = None
        if values or info.has_attrs:
            try:
                arg = od.make_arg(values or {})
            except AttrError as e:
                if (info.in_type is not None and shape is None and (values is None or info.in_type not in values)
                        and od.attrs[[a.name for a in od.attrs].index(info.in_type)].default is REQUIRED):
                    self.err(cl, ty_k if ty_k >= 0 else end_k,
                             f"'{od.name}' needs a tensor result type (its '{info.in_type}' attribute is the "
                             f"type's shape), got {dtype.name if ty_k >= 0 else 'no type'}")
                self.err(li, self.attr_pos(str(e), keypos, op_k), str(e))
            except Exception as e:  # a dialect's make_arg that fails on odd input is still a located error
                self.err(li, op_k, f"invalid attributes for '{od.name}': {e}")
        if od.normalize_arg is not None:
            try:
                arg = od.normalize_arg(dtype, arg)
            except Exception as e:
                self.err(li, self.attr_pos(str(e), keypos, op_k), f"'{od.name}' op {e}")
        if tag is not None:
            try:
                tag = ANY.convert(_tag_literal(tag))
            except AttrError as e:
                self.err(li, keypos["tag"], f"bad tag: {e}")
        try:
            u = UOp(od, dtype, tuple(src), arg, tag)
        except Exception as e:
            self.err(li, op_k, f"cannot build '{od.name}': {e}")
        ush = None
        if info.has_shape:
            try:
                ush = u.shape
            except ShapeError as e:
                self.err(li, 0, f"'{od.name}' op {e}")
            except Exception as e:
                self.err(li, 0, f"cannot infer the shape of '{od.name}': {type(e).__name__}: {e}")
        if ush is not None and type(ush) is not tuple:
            ush = tuple(ush)
        if ush != shape and _as_typed(ush) != shape:
            if ty_k < 0:
                self.err(cl, end_k, f"missing result type: the result is a tensor of shape {list(ush)}")
            self.err(cl, ty_k, f"result type {fmt_type(dtype, shape)} does not match the inferred "
                               f"{fmt_type(dtype, ush)}")
        for j, (k, (sd, ss)) in enumerate(stated or ()):
            s = src[j]
            if s.dtype is not sd or _as_typed(s.shape if s.op.shape is not None else None) != ss:
                self.err(cl, k, f"operand {j} type {fmt_type(sd, ss)} does not match the type of "
                                f"'{self.toks[li][src_toks[j]]}' ({fmt_type(s.dtype, s.shape)})")
        return u

    # --- pieces ----------------------------------------------------------------------------------------------------
    def undefined(self, t: list[str], li: int, i: int, depth: int) -> NoReturn:
        tok = t[i]
        if tok == "%":
            self.err(li, i, "expected a value name after '%'")
        if depth and any(tok in e for e in self.envs):
            self.err(li, i, f"use of undefined value '{_short(tok)}' "
                            "(a region cannot use values of the enclosing block)")
        self.err(li, i, f"use of undefined value '{_short(tok)}'")

    def attr_pos(self, msg: str, keypos: dict[str, int], default: int) -> int:
        for key, k in keypos.items():
            if f"'{key}'" in msg:
                return k
        return default

    def string(self, t: list[str], li: int, i: int) -> str:
        tok = t[i]
        if len(tok) < 2 or tok[-1] != '"':
            self.err(li, i, "unterminated string")
        try:
            return unescape(tok)
        except ValueError as e:
            self.err(li, i, str(e))

    def type(self, t: list[str], li: int, i: int) -> tuple[DType, tuple[int, ...] | None]:
        if i >= len(t):
            self.err(li, i, "expected a type, got end of line")
        tok = t[i]
        r = _TYPES.get(tok)
        if r is not None:
            return r
        if tok[0] not in WORD_START:
            self.err(li, i, f"expected a type, got '{_short(tok)}'")
        try:
            return parse_type(tok)
        except ValueError as e:
            self.err(li, i, str(e))

    def literal(self, t: list[str], i: int, li: int, depth: int) -> tuple[Any, int]:
        """One attribute value: int, float, bool, none, string, word, type or a list of them; (value, next i)."""
        if i >= len(t):
            self.err(li, i, "expected a value, got end of line")
        tok = t[i]
        c = tok[0]
        if c == '"':
            return self.string(t, li, i), i + 1
        if c in NUM_START:
            try:
                return parse_number(tok), i + 1
            except ValueError as e:
                self.err(li, i, str(e))
        if tok == "?":  # a symbolic dim (DimAttr): its value is one of the op's extra operands
            return DYN, i + 1
        if c in WORD_START:
            if tok in _KEYWORDS:
                return _KEYWORDS[tok], i + 1
            if tok[-1] == ">":
                d, sh = self.type(t, li, i)
                if sh is not None:
                    self.err(li, i, "a tensor type is not an attribute value")
                return d, i + 1
            return Ident(tok), i + 1
        if c == "[":
            if depth >= MAX_LIST_DEPTH:
                self.err(li, i, f"lists nested more than {MAX_LIST_DEPTH} deep")
            i += 1
            out: list[Any] = []
            if i < len(t) and t[i] == "]":
                return out, i + 1
            while True:
                v, i = self.literal(t, i, li, depth + 1)
                out.append(v)
                if i < len(t) and t[i] == ",":
                    i += 1
                elif i < len(t) and t[i] == "]":
                    return out, i + 1
                else:
                    self.err(li, i, f"expected ',' or ']', got {self.got(t, i)}")
        self.err(li, i, f"expected a value, got '{_short(tok)}'")


def parse_ir(text: str, filename: str = "<string>", first_line: int = 1) -> UOp:
    """Parse one block of .uop text and return its root (the last op). Raises IRError, located, on bad input.

    `first_line` is the file line of the text's first line (for a chunk of `split_input`), so errors and the
    UOps' locations point at the real file line."""
    return parse_with_source_map(text, filename, first_line)[0]


def parse_with_source_map(text: str, filename: str = "<string>", first_line: int = 1) -> tuple[UOp, SourceMap]:
    """`parse_ir`, and the SourceMap of this parse (where each op is written in this text).

    Hash-consing makes the graphs of two files that write the same ops one object, so the root alone cannot say
    which file a diagnostic about it should point into (without more, the newest parse of it wins). Give the map
    to `verify(root, source=...)` and `PassManager.run(root, source=...)`, or make it current with
    `with located(smap):`."""
    if not isinstance(text, str):
        raise IRError(f"expected text, got {type(text).__name__}", Location(filename, first_line, 1))
    p = _Parser(text, filename, first_line)
    register_source(filename, text, first_line, p.lines)
    try:
        with gc_paused():  # parsing allocates no cycles; the collector would rescan the growing graph
            root = p.block(0, 0, None)[0]
        register_parse(root, p.smap)
        return root, p.smap
    except IRError:
        raise
    except RecursionError:
        raise IRError("input nested too deeply", Location(filename, first_line, 1)) from None
    except Exception as e:  # a safety net: bad input must never surface as a Python traceback
        raise IRError(f"internal parser error: {type(e).__name__}: {e}", Location(filename, first_line, 1)) from e


def split_input(text: str) -> list[tuple[int, str]]:
    """Split on lines that are exactly `// -----`; each chunk with the 1-based file line it starts on."""
    if _SPLIT_MARK not in text:
        return [(1, text)]
    out: list[tuple[int, str]] = []
    lines = text.split("\n")
    start = 0
    for j, line in enumerate(lines):
        if line.rstrip() == _SPLIT_MARK:
            out.append((start + 1, "\n".join(lines[start:j]) + "\n"))
            start = j + 1
    rest = "\n".join(lines[start:])
    if rest.strip() or not out:  # a file that ends with the marker has no empty last case
        out.append((start + 1, rest))
    return out
