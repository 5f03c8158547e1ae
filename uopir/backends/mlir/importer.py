"""Reading MLIR back: the subset `emit-mlir` writes, parsed with xDSL, becomes linearized device-level uopir.

`import_module(text, filename)` parses a `builtin.module` with xDSL's parser and turns each `func.func` into one
`device.program` (the form device-linearize produces), returned under a `core.sink`. The mapping is the inverse of
the exporter's table (docs/mlir.md): `memref` arguments are `kernel.param`s, `index` arguments `kernel.var`s,
`scf.for` a `device.loop` (its `iter_args` the `device.acc`s it updates), `memref`/`vector` loads and stores
`kernel.index` + `kernel.load`/`kernel.store` (an `scf.if` around one is its gate), `arith`/`math` ops the core ALU.

Anything outside the subset is an IRError located at the MLIR op (file:line:col); xDSL's parse and verification
errors become located IRErrors too. xDSL keeps no source position on an op, so the parser here records where each
op starts while it parses.
"""
from __future__ import annotations

import bisect
import re
import struct
from collections.abc import Callable
from typing import Any

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.diagnostics import IRError, Location, SourceMap, register_parse
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["import_module", "MLIRImportError"]

_COMMENT = re.compile(r"//[^\n]*")
_UNDEFINED = re.compile(r"values used but not defined: \[(%[\w$.-]+)")
_UNREGISTERED = re.compile(r"Operation ([\w.$]+) is not registered")
_OP_NAME = re.compile(r'(?:%[\w.$-]+(?::\d+)?(?:\s*,\s*%[\w.$-]+(?::\d+)?)*\s*=\s*)?"?([A-Za-z_][\w$]*\.[\w.$]+)')


class MLIRImportError(IRError):
    """An input that is not MLIR of the subset emit-mlir writes."""


# ---- xDSL: context, a parser that remembers where each op starts -----------------------------------------------------
def _context():
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, math, memref, scf, vector

    from uopir.backends.mlir.ops import EXTRA_OPS

    ctx = Context()
    for d in (builtin.Builtin, func.Func, scf.Scf, arith.Arith, memref.MemRef, math.Math, vector.Vector):
        ctx.load_dialect(d)
    for op in EXTRA_OPS:  # the exporter's definitions where xDSL's are missing or narrower than MLIR's
        ctx._loaded_ops[op.name] = op
    return ctx


def _parser_class():
    from xdsl.parser import Parser

    class LocatingParser(Parser):
        """xDSL's parser, recording the offset of the first token of every op it parses (its result list)."""

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self.starts: dict[Any, int] = {}

        def parse_operation(self):  # noqa: ANN201 - xDSL's Operation
            start = self._current_token.span.start
            try:
                op = super().parse_operation()
            except Exception as e:
                if not hasattr(e, "span") and not hasattr(e, "uopir_start"):  # the innermost op parsed
                    e.uopir_start = start  # type: ignore[attr-defined]
                raise
            self.starts[op] = start
            return op

    return LocatingParser


class _Text:
    """Offsets of one input text as file:line:col, and its lines for the caret display."""

    def __init__(self, text: str, filename: str, first_line: int):
        self.text, self.filename, self.first_line = text, filename, first_line
        self.lines = text.split("\n")
        self._starts = [0]
        for ln in self.lines[:-1]:
            self._starts.append(self._starts[-1] + len(ln) + 1)

    def line_index(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) - 1

    def loc(self, offset: int) -> Location:
        li = self.line_index(offset)
        return Location(self.filename, li + self.first_line, offset - self._starts[li] + 1)

    def error(self, message: str, offset: int) -> MLIRImportError:
        li = self.line_index(offset)
        return MLIRImportError(message, self.loc(offset), source_line=self.lines[li].rstrip("\r"))


def _parse(src: _Text):
    """The builtin.module of the text and the start offset of each op; xDSL's errors as located IRErrors."""
    from xdsl.utils.exceptions import ParseError

    parser = _parser_class()(_context(), src.text, src.filename)
    try:
        module = parser.parse_module()
    except ParseError as e:
        start = e.span.start
        unknown = _UNREGISTERED.match(e.msg)
        if unknown is not None:  # xDSL points past the name: point at it
            at = src.text.rfind(unknown.group(1), 0, start + 1)
            start = at if at >= 0 and src.line_index(at) == src.line_index(start) else start
            raise src.error(f"unknown MLIR op '{unknown.group(1)}' (not registered in the dialects the importer "
                            "loads: builtin, func, scf, arith, math, memref, vector)", start) from None
        undefined = _UNDEFINED.search(e.msg)
        if undefined is not None:  # xDSL reports them at the end of the input: point at the first use
            code = _COMMENT.sub(lambda c: " " * len(c.group()), src.text)  # not a mention in a comment
            use = re.search(re.escape(undefined.group(1)) + r"(?![\w$.-])", code)
            start = use.start() if use is not None else start
            raise src.error(f"value {undefined.group(1)} is used but never defined", start) from None
        raise src.error(f"MLIR syntax: {_first_line(e.msg)}", start) from None
    except Exception as e:  # noqa: BLE001 - xDSL raises several kinds (VerifyException, ValueError...) while parsing
        span = getattr(e, "span", None)
        start = span.start if span is not None else getattr(e, "uopir_start", 0)
        m = _OP_NAME.match(src.text, start)
        what = f"'{m.group(1)}' op" if m else "MLIR"
        raise src.error(f"{what}: {_first_line(str(e))}", start) from None
    return module, parser.starts


def _first_line(msg: str) -> str:
    msg = msg.strip()
    return msg.split("\n", 1)[0] if msg else "invalid input"


# ---- types ----------------------------------------------------------------------------------------------------------
def _scalar_dtype(t: Any, unsigned: bool = False) -> DType | None:
    from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type, IndexType, IntegerType

    if isinstance(t, IndexType):
        return dtypes.index
    if isinstance(t, IntegerType):
        w = t.width.data
        if w == 1:
            return dtypes.bool
        if w not in (8, 16, 32, 64):
            return None
        return dtypes.from_name(f"{'u' if unsigned else 'i'}{w}")
    for cls, d in ((Float16Type, dtypes.float16), (BFloat16Type, dtypes.bfloat16), (Float32Type, dtypes.float32),
                   (Float64Type, dtypes.float64)):
        if isinstance(t, cls):
            return d
    return None


def value_dtype(t: Any, unsigned: bool = False) -> DType | None:
    """The uopir dtype of an MLIR value type (a scalar or a 1-d vector of one), None outside the subset. MLIR
    integers are signless: `unsigned` picks the unsigned dtype of the width."""
    from xdsl.dialects.builtin import VectorType

    if isinstance(t, VectorType):
        shape = t.get_shape()
        s = _scalar_dtype(t.element_type, unsigned)
        if len(shape) != 1 or s is None or shape[0] < 1:
            return None
        return s.vec(shape[0])
    return _scalar_dtype(t, unsigned)


# ---- signedness: which integer values the unsigned ops read ---------------------------------------------------------
_SAME_INT = frozenset(("arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
                       "arith.maxsi", "arith.maxui", "arith.divsi", "arith.divui", "arith.remsi", "arith.remui",
                       "arith.shli", "arith.shrsi", "arith.shrui", "vector.broadcast", "vector.insert",
                       "vector.extract", "vector.shuffle"))
_UNSIGNED_RESULT = frozenset(("arith.divui", "arith.remui", "arith.shrui", "arith.maxui", "arith.fptoui"))
_UNSIGNED_CMP = frozenset((6, 7, 8, 9))  # ult ule ugt uge


class _Signs:
    """MLIR integers are signless; uopir's are not. Values that flow into each other through ops that keep the type
    (arith, select, memory) form one class; a class is unsigned when an unsigned op (divui, cmpi ult, uitofp, ...)
    reads or makes one of its values. Constants join no class (one constant serves both kinds)."""

    def __init__(self, func: Any):
        self.parent: dict[Any, Any] = {}
        self.unsigned: set[Any] = set()
        skip, magnitudes = _sticky_ops(func)
        self.unsigned.update(magnitudes)
        for op in func.walk():
            if op not in skip:
                self._visit(op)
        self.unsigned = {self.find(v) for v in self.unsigned}

    def find(self, v: Any) -> Any:
        p = self.parent.get(v, v)
        while p is not v:
            nxt = self.parent.get(p, p)
            self.parent[v] = nxt
            v, p = p, nxt
        return v

    def union(self, *vs: Any) -> None:
        roots = [self.find(v) for v in vs if not _is_const(v)]
        for r in roots[1:]:
            if r is not roots[0]:
                self.parent[r] = roots[0]

    def _visit(self, op: Any) -> None:
        name = op.name
        ops, res = list(op.operands), list(op.results)
        if name in _SAME_INT:
            self.union(*res, *(v for v in ops if not _is_index(v)))
        elif name == "arith.select":
            self.union(res[0], ops[1], ops[2])
        elif name == "arith.cmpi":
            self.union(ops[0], ops[1])
            if op.predicate.value.data in _UNSIGNED_CMP:
                self.unsigned.add(ops[0])
        elif name in ("memref.load", "vector.load", "vector.maskedload"):
            self.union(res[0], ops[0])
        elif name in ("memref.store", "vector.store"):
            self.union(ops[0], ops[1])
        elif name == "scf.yield" and op.parent_op() is not None and op.parent_op().name == "scf.if":
            self.union(*op.parent_op().results, *ops) if len(ops) == 1 else None
        if name in _UNSIGNED_RESULT:
            self.unsigned.add(res[0])
        elif name in ("arith.extui", "arith.uitofp", "arith.index_castui") and not _is_bool(ops[0]):
            self.unsigned.add(ops[0])

    def is_unsigned(self, v: Any) -> bool:
        return self.find(v) in self.unsigned


_STICKY_PARTS = frozenset(("arith.andi", "arith.shrui", "arith.cmpi", "arith.extui", "arith.ori", "arith.uitofp"))


def _sticky_ops(func: Any) -> tuple[set[Any], list[Any]]:
    """The ops of the exporter's exact 64-bit int -> f64 conversion (`m >= 2**53 ? (m >> 11 | sticky) * 2048 : m`
    on the magnitude m): unsigned ops on the bits of a value of either signedness, so they say nothing of it; and
    the unsigned values converted (m is the value itself, not `x < 0 ? -x : x`)."""
    skip: set[Any] = set()
    unsigned: list[Any] = []
    for op in func.walk():
        if op.name != "arith.cmpi" or op.predicate.value.data != 9 or _const_int(op.operands[1]) != 1 << 53:
            continue
        m = op.operands[0]
        skip.add(op)
        frontier = [m]
        while frontier:
            for use in frontier.pop().uses:
                o = use.operation
                if o.name in _STICKY_PARTS and o not in skip:
                    skip.add(o)
                    frontier.extend(o.results)
        sel = _owner(m, "arith.select")
        neg = _owner(sel.operands[1], "arith.subi") if sel is not None else None
        if neg is not None:
            skip.update((sel, neg))
        else:
            unsigned.append(m)
    return skip, unsigned


def _is_const(v: Any) -> bool:
    owner = getattr(v, "owner", None)
    return getattr(owner, "name", None) == "arith.constant"


def _is_index(v: Any) -> bool:
    from xdsl.dialects.builtin import IndexType

    return isinstance(v.type, IndexType)


def _is_bool(v: Any) -> bool:
    from xdsl.dialects.builtin import IntegerType, VectorType

    t = v.type.element_type if isinstance(v.type, VectorType) else v.type
    return isinstance(t, IntegerType) and t.width.data == 1


def _owner(v: Any, name: str) -> Any:
    """The op defining v when it is a `name` op, else None."""
    o = getattr(v, "owner", None)
    return o if getattr(o, "name", None) == name else None


def _text(attr: Any) -> str:
    """A string attribute's value as text (xDSL gives bytes for a literal whose escapes are not ASCII)."""
    data = attr.data
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


# ---- values that are not (yet) one uopir value ----------------------------------------------------------------------
class _Slot:
    """A rank-0 memref.alloca: an accumulator (`uop.acc`) or a value read after the block that computes it."""

    __slots__ = ("acc_id", "dtype", "acc", "cur")

    def __init__(self, acc_id: int | None, dtype: DType | None):
        self.acc_id, self.dtype = acc_id, dtype
        self.acc: UOp | None = None  # the device.acc (once its init is stored)
        self.cur: UOp | None = None  # what a load reads now: the last accstore, or the stored value


class _Masked:
    """A vector.maskedload (and its bool / bf16 conversion): the gated load once the select with its alternative
    comes."""

    __slots__ = ("ptr", "gate", "dtype")

    def __init__(self, ptr: UOp, gate: UOp, dtype: DType):
        self.ptr, self.gate, self.dtype = ptr, gate, dtype


class _Opaque:
    """A value of an op that has no uopir counterpart on its own (cmpf oge, math.absf...): fine inside the
    exporter's idioms (a saturating cast), an error where anything else reads it."""

    __slots__ = ("op",)

    def __init__(self, op: Any):
        self.op = op


_DROPPABLE = frozenset(C.ALU_OPS) | {C.CAST, C.BITCAST, C.VECTORIZE, C.GEP, K.INDEX}


# ---- one function ---------------------------------------------------------------------------------------------------
Handler = Callable[["_FuncImporter", Any], None]
_HANDLERS: dict[str, Handler] = {}


def _handles(*names: str) -> Callable[[Handler], Handler]:
    def reg(fn: Handler) -> Handler:
        for n in names:
            _HANDLERS[n] = fn
        return fn
    return reg


class _FuncImporter:
    """Builds the device.program of one func.func, op by op in text order (the program's execution order).

    Every op becomes its closest uopir op where it is computed; the exporter's multi-op idioms (guarded divisions,
    saturating casts, masked shifts, bool / bf16 memory) are recognized at the op that finishes them, and the ops
    they were made of, read by nothing else, are dropped at the end."""

    def __init__(self, func: Any, src: _Text, starts: dict[Any, int], smap: SourceMap):
        self.func, self.src, self.starts, self.smap = func, src, starts, smap
        self.vals: dict[Any, Any] = {}  # xDSL SSA value -> UOp | _Slot | _Masked | _Opaque
        self.order: dict[UOp, None] = {}  # the program's ops in execution order
        self.guards: dict[UOp, set[Any]] = {}  # idiom result -> the MLIR conditions of its guard selects
        self.after: dict[UOp, list[UOp]] = {}  # values listed right after another (retyped constants, casts)
        self.besides: set[UOp] = set()
        self.lanes: dict[Any, list[Any]] = {}  # a vector built by broadcast and inserts -> its lanes' MLIR values
        self.signs = _Signs(func)
        self.gate: UOp | None = None  # inside the then-block of a gated store / load
        self.alt: UOp | None = None
        self.op: Any = func  # the op being imported (for error locations)

    # -- helpers
    def error(self, message: str, op: Any = None) -> MLIRImportError:
        op = self.op if op is None else op
        return self.src.error(message, self.starts.get(op, 0))

    def emit(self, u: UOp) -> UOp:
        if u not in self.order:
            self.order[u] = None
            off = self.starts.get(self.op)
            if off is not None:
                self.smap._at.setdefault(u, self.src.line_index(off))
        return u

    def beside(self, u: UOp, v: UOp) -> UOp:
        """List v right after u, where u is computed (v: u retyped, which exports as u itself)."""
        if v not in self.order and v not in self.besides:
            self.after.setdefault(u, []).append(v)
            self.besides.add(v)
        return v

    def raw(self, v: Any) -> Any:
        if v not in self.vals:
            raise self.error(f"'{self.op.name}' reads a value that is not part of the imported program")
        return self.vals[v]

    def get(self, v: Any, want: DType | None = None) -> UOp:
        """The uopir value of an MLIR value (of dtype `want`: a constant is retyped, a value of the other
        signedness cast, which exports as nothing)."""
        u = self.raw(v)
        if isinstance(u, _Opaque):
            raise self.error(f"'{self.op.name}' reads the result of '{u.op.name}' outside the idioms emit-mlir "
                             "writes: outside the subset")
        if not isinstance(u, UOp):
            raise self.error(f"'{self.op.name}' reads a memref or masked load as a value: outside the subset")
        if want is not None and u.dtype is not want:
            if u.op is C.CONST and u.dtype.count == want.count and u.dtype.itemsize == want.itemsize:
                return self.beside(u, C.const(want, C.const_value(u)))
            if u.dtype.is_int and want.is_int and u.dtype.itemsize == want.itemsize and u.dtype.count == want.count:
                cast = UOp(C.CAST, want, (u,))  # an accumulator's value may be read after its loop: cast it there
                return self.emit(cast) if u.op is D.ACCSTORE else self.beside(u, cast)
        return u

    def dtype(self, v: Any) -> DType:
        d = value_dtype(v.type, self.signs.is_unsigned(v))
        if d is None:
            raise self.error(f"'{self.op.name}': type {v.type} is outside the subset emit-mlir writes (index, i1, "
                             "i8..i64, f16, bf16, f32, f64 and 1-d vectors of them)")
        return d

    def set(self, result: Any, u: Any) -> Any:
        self.vals[result] = u
        return u

    def value(self, result: Any, op: Any, *srcs: Any, arg: Any = None) -> UOp:
        """Emit op over srcs (MLIR values, each read as the result's dtype unless a UOp) as `result`'s value."""
        d = self.dtype(result)
        src = tuple(s if isinstance(s, UOp) else self.get(s, d) for s in srcs)
        return self.set(result, self.emit(UOp(op, d, src, arg)))

    # -- the function
    def program(self) -> UOp:
        from xdsl.dialects.builtin import IndexType, MemRefType

        f = self.func
        self.op = f
        if len(f.body.blocks) != 1:
            raise self.error("'func.func' without a body or with more than one block is outside the subset")
        if f.function_type.outputs.data:
            raise self.error("'func.func' returning values is outside the subset (kernels write memrefs)")
        block = f.body.blocks[0]
        attrs = [a.data for a in f.arg_attrs.data] if f.arg_attrs is not None else [{}] * len(block.args)
        for i, (arg, a) in enumerate(zip(block.args, attrs, strict=True)):
            t = arg.type
            if isinstance(t, MemRefType) and "uop.unused" in a:
                continue
            if isinstance(t, MemRefType):
                name = a.get("uop.dtype")
                elem = dtypes.from_name(name.data) if name is not None else \
                    _scalar_dtype(t.element_type, self.signs.is_unsigned(arg))
                if elem is None or len(t.get_shape()) != 1:
                    raise self.error(f"'func.func' argument {i} type {t} is outside the subset (a 1-d memref of a "
                                     "scalar)")
                size = t.get_shape()[0]
                idx = a["uop.param"].value.data if "uop.param" in a else i
                self.vals[arg] = self.emit(UOp(K.PARAM, elem.ptr("global", size if size >= 0 else -1), (), idx))
            elif isinstance(t, IndexType):
                name = _text(a["uop.var"]) if "uop.var" in a else (arg.name_hint or f"arg{i}")
                lo, hi = (r.value.data for r in a["uop.range"].data) if "uop.range" in a else \
                    (0, dtypes.index.max)
                self.vals[arg] = self.emit(UOp(K.VAR, dtypes.index, (), (name, lo, hi)))
            else:
                raise self.error(f"'func.func' argument {i} type {t} is outside the subset (memref or index)")
        self.block(block, "func.return")
        kname = f.attributes.get("uop.kernel")
        return UOp(D.PROGRAM, dtypes.void, tuple(self._live()), _text(kname) if kname is not None else f.sym_name.data)

    def _live(self) -> list[UOp]:
        """The program's ops without the pure ones nothing reads any more (the parts of recognized idioms);
        constants stay (the exporter writes them all at the top, in this order)."""
        needed: set[UOp] = set()
        keep: list[UOp] = []
        order: list[UOp] = []
        for u in self.order:
            order.append(u)
            order.extend(v for v in self.after.get(u, ()) if v not in self.order)
        for u in reversed(order):
            if u.op in _DROPPABLE and u not in needed:
                continue
            keep.append(u)
            needed.update(u.src)
        keep.reverse()
        return keep

    def block(self, block: Any, terminator: str) -> list[Any]:
        """Import the ops of a block; returns the operands of its terminator (MLIR values)."""
        ops = list(block.ops)
        if not ops or ops[-1].name != terminator:
            raise self.error(f"a block here must end with '{terminator}'", ops[-1] if ops else self.op)
        for op in ops[:-1]:
            self.import_op(op)
        return list(ops[-1].operands)

    def import_op(self, op: Any) -> None:
        self.op = op
        h = _HANDLERS.get(op.name)
        if h is None:
            raise self.error(f"'{op.name}' is outside the MLIR subset uop-opt reads (what emit-mlir writes)")
        try:
            h(self, op)
        except (IndexError, ValueError, KeyError, AttributeError, TypeError) as e:  # a shape xDSL accepts, we do not
            raise self.error(f"'{op.name}' in a form outside the MLIR subset uop-opt reads ({type(e).__name__}: "
                             f"{e})", op) from None


# ---- arith / math ---------------------------------------------------------------------------------------------------
_BINARY = {"arith.addi": C.ADD, "arith.addf": C.ADD, "arith.subi": C.SUB, "arith.subf": C.SUB, "arith.muli": C.MUL,
           "arith.mulf": C.MUL, "arith.divf": C.FDIV, "arith.remf": C.MOD, "arith.maxsi": C.MAX, "arith.maxui": C.MAX,
           "arith.maximumf": C.MAX, "arith.andi": C.AND, "arith.ori": C.OR, "arith.xori": C.XOR}
_UNARY = {"arith.negf": C.NEG, "math.exp2": C.EXP2, "math.log2": C.LOG2, "math.sin": C.SIN, "math.sqrt": C.SQRT,
          "math.trunc": C.TRUNC}
_CASTS = ("arith.sitofp", "arith.uitofp", "arith.extsi", "arith.extui", "arith.trunci", "arith.extf", "arith.truncf",
          "arith.index_cast", "arith.index_castui")
_DIVS = ("arith.divsi", "arith.divui", "arith.remsi", "arith.remui")
_SHIFTS = {"arith.shli": C.SHL, "arith.shrsi": C.SHR, "arith.shrui": C.SHR}
_OPAQUE = ("math.absf",)


@_handles(*_BINARY)
def _binary(m: _FuncImporter, op: Any) -> None:
    if any(isinstance(m.raw(v), _Opaque) for v in op.operands):  # the flags of an idiom (a saturating cast)
        m.set(op.results[0], _Opaque(op))
        return
    m.value(op.results[0], _BINARY[op.name], *op.operands)


@_handles(*_UNARY)
def _unary(m: _FuncImporter, op: Any) -> None:
    if isinstance(m.raw(op.operands[0]), _Opaque):
        m.set(op.results[0], _Opaque(op))
        return
    m.value(op.results[0], _UNARY[op.name], op.operands[0])


@_handles(*_OPAQUE)
def _opaque(m: _FuncImporter, op: Any) -> None:
    m.set(op.results[0], _Opaque(op))


@_handles(*_DIVS)
def _div(m: _FuncImporter, op: Any) -> None:
    """`a / b`; the exporter's guarded form `a / (b == 0 | b == -1 ? 1 : b)`, finished by selects of 0 and -a, is
    the one uopir division (x / 0 = 0 and MIN / -1 = MIN are uopir's own rules)."""
    a, b = op.operands
    uop = C.IDIV if op.name in ("arith.divsi", "arith.divui") else C.MOD
    sel = _owner(b, "arith.select")
    if sel is not None and _const_int(sel.operands[1]) == 1:
        cond, real = sel.operands[0], sel.operands[2]
        conds = {cond}
        orr = _owner(cond, "arith.ori")
        conds.update(orr.operands if orr is not None else ())
        if all(_is_cmp_eq(c, real) for c in conds - {cond}) and (orr is not None or _is_cmp_eq(cond, real)):
            u = m.value(op.results[0], uop, a, real)
            m.guards[u] = conds
            return
    m.value(op.results[0], uop, a, b)


def _const_int(v: Any) -> int | None:
    """The value of an integer constant (or of an integer splat vector constant), else None."""
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerAttr

    o = _owner(v, "arith.constant")
    if o is None:
        return None
    if isinstance(o.value, IntegerAttr):
        return o.value.value.data
    if isinstance(o.value, DenseIntOrFPElementsAttr):
        vals = list(o.value.get_values())
        if vals and all(x == vals[0] for x in vals) and isinstance(vals[0], int):
            return vals[0]
    return None


def _is_cmp_eq(cond: Any, b: Any) -> bool:
    o = _owner(cond, "arith.cmpi")
    return o is not None and o.predicate.value.data == 0 and o.operands[0] is b and _is_const(o.operands[1])


@_handles(*_SHIFTS)
def _shift(m: _FuncImporter, op: Any) -> None:
    """A shift; the exporter masks a variable amount to the width (`b & (bits - 1)`), uopir's shifts do that."""
    a, b = op.operands
    mask = _owner(b, "arith.andi")
    d = m.dtype(op.results[0])
    if mask is not None and _const_int(mask.operands[1]) == d.scalar.itemsize * 8 - 1:
        b = mask.operands[0]
    m.value(op.results[0], _SHIFTS[op.name], a, b)


@_handles(*_CASTS)
def _cast(m: _FuncImporter, op: Any) -> None:
    x = m.raw(op.operands[0])
    if isinstance(x, UOp) and x.op is K.LOAD and op.name == "arith.truncf" and x.dtype.scalar is dtypes.bfloat16:
        m.set(op.results[0], x)  # a bf16 buffer's f32 carrier, rounded: the load itself
        return
    if isinstance(x, _Masked):
        m.set(op.results[0], _Masked(x.ptr, x.gate, m.dtype(op.results[0])))
        return
    if isinstance(x, _Opaque) and op.name == "arith.truncf" and (src := _odd_source(op.operands[0])) is not None:
        if isinstance(m.raw(src), _Opaque):  # a 64-bit int made an exact f64 first
            src = _sticky_source(src)
        if src is not None:
            m.value(op.results[0], C.CAST, m.get(src))  # f64 -> f16 / bf16, rounded once through round-to-odd f32
            return
    if isinstance(x, _Opaque):  # inside an idiom
        m.set(op.results[0], _Opaque(op))
        return
    m.value(op.results[0], C.CAST, m.get(op.operands[0]))


@_handles("arith.fptosi", "arith.fptoui")
def _fptoint(m: _FuncImporter, op: Any) -> None:
    """The exporter's saturating cast: `fptosi(bad ? 0 : trunc(x))` (x extended to f32 from f16 / bf16), then
    selects of the bounds where trunc(x) is over / under them; uopir's cast saturates by itself."""
    sel = _owner(op.operands[0], "arith.select")
    tr = _owner(sel.operands[2], "math.trunc") if sel is not None else None
    if tr is None:
        m.value(op.results[0], C.CAST, m.get(op.operands[0]))
        return
    x = tr.operands[0]
    ext = _owner(x, "arith.extf")
    if ext is not None and value_dtype(ext.operands[0].type) in (dtypes.float16, dtypes.bfloat16):
        x = ext.operands[0]
    u = m.value(op.results[0], C.CAST, m.get(x))
    flags = _owner(sel.operands[0], "arith.ori")
    inner = _owner(flags.operands[0], "arith.ori") if flags is not None else None
    m.guards[u] = set(inner.operands) if inner is not None else set()


@_handles("arith.bitcast", "vector.bitcast")
def _bitcast(m: _FuncImporter, op: Any) -> None:
    if isinstance(m.raw(op.operands[0]), _Opaque):  # inside the round-to-odd idiom of a narrowing float cast
        m.set(op.results[0], _Opaque(op))
        return
    m.value(op.results[0], C.BITCAST, m.get(op.operands[0]))


def _odd_source(v: Any) -> Any:
    """The f64 value x when v is the exporter's f64 -> f32 round-to-odd of it (the bits of truncf(x) moved to the
    odd neighbour where inexact), else None."""
    b = _owner(v, "arith.bitcast")
    sel2 = _owner(b.operands[0], "arith.select") if b is not None else None
    sel1 = _owner(sel2.operands[2], "arith.select") if sel2 is not None else None
    bits = _owner(sel1.operands[2], "arith.bitcast") if sel1 is not None else None
    r = _owner(bits.operands[0], "arith.truncf") if bits is not None else None
    return r.operands[0] if r is not None else None


def _sticky_source(v: Any) -> Any:
    """The 64-bit int x when v is the exporter's exact f64 of it (`-mag` where x < 0 for a signed x; mag = m >= 2**53
    ? ... : uitofp(m), m the magnitude), else None."""
    sel = _owner(v, "arith.select")
    if sel is not None and _owner(sel.operands[1], "arith.negf") is not None:
        v = sel.operands[2]
        sel = _owner(v, "arith.select")
    conv = _owner(sel.operands[2], "arith.uitofp") if sel is not None else None
    if conv is None:
        return None
    m = conv.operands[0]
    msel = _owner(m, "arith.select")
    return msel.operands[2] if msel is not None and _owner(msel.operands[1], "arith.subi") is not None else m


@_handles("arith.select")
def _select(m: _FuncImporter, op: Any) -> None:
    c, a, b = op.operands
    inner = m.raw(b)
    if isinstance(inner, UOp) and c in m.guards.get(inner, ()):  # a guard of an idiom: its value passes through
        m.set(op.results[0], inner)
        return
    masked = m.raw(a)
    if isinstance(masked, _Masked):  # gate ? maskedload : alt, the gated vector load
        d = masked.dtype
        u = m.emit(UOp(K.LOAD, d, (masked.ptr, m.get(b, d), masked.gate)))
        m.set(op.results[0], u)
        return
    if any(isinstance(m.raw(v), _Opaque) for v in (c, a, b)):
        m.set(op.results[0], _Opaque(op))
        return
    d = m.dtype(op.results[0])
    m.value(op.results[0], C.WHERE, m.get(c), m.get(a, d), m.get(b, d))


_CMPI = {0: (C.CMPEQ, False), 1: (C.CMPNE, False), 2: (C.CMPLT, False), 6: (C.CMPLT, False)}  # eq ne slt ult
_CMPF = {1: (C.CMPEQ, False), 4: (C.CMPLT, False), 13: (C.CMPNE, False)}  # oeq olt une


@_handles("arith.cmpi", "arith.cmpf")
def _cmp(m: _FuncImporter, op: Any) -> None:
    a, b = op.operands
    pred = op.predicate.value.data
    x = m.raw(a)
    if op.name == "arith.cmpi" and pred == 1 and isinstance(x, UOp) and x.op is K.LOAD and x.dtype.scalar is \
            dtypes.bool and _const_int(b) == 0:
        m.set(op.results[0], x)  # a bool buffer's byte, read as `!= 0`: the load itself
        return
    if isinstance(x, _Masked) and pred == 1:
        m.set(op.results[0], _Masked(x.ptr, x.gate, x.dtype.scalar.vec(1) if False else dtypes.bool.vec(
            x.dtype.count)))
        return
    entry = (_CMPI if op.name == "arith.cmpi" else _CMPF).get(pred)
    if entry is None:  # only inside the exporter's idioms (the bounds of a saturating cast)
        m.set(op.results[0], _Opaque(op))
        return
    ta = value_dtype(a.type, m.signs.is_unsigned(a) or (op.name == "arith.cmpi" and pred == 6))
    if ta is None:
        raise m.error(f"'{op.name}': operand type {a.type} is outside the subset")
    m.set(op.results[0], m.emit(UOp(entry[0], m.dtype(op.results[0]), (m.get(a, ta), m.get(b, ta)))))


@_handles("arith.constant")
def _constant(m: _FuncImporter, op: Any) -> None:
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr

    d = m.dtype(op.results[0])
    v = op.value
    if isinstance(v, IntegerAttr):
        val: Any = v.value.data
        val = bool(val) if d is dtypes.bool else val
    elif isinstance(v, FloatAttr):
        val = v.value.data
    elif isinstance(v, DenseIntOrFPElementsAttr):
        vals = list(v.get_values())
        if d.is_float:  # xDSL 0.75 reads a hex float in dense<...> as an integer: read the literals ourselves
            vals = _dense_floats(m.src.text, m.starts.get(op, 0), d.scalar) or vals
        val = tuple(bool(x) if d.scalar is dtypes.bool else x for x in vals)
        if len(val) == 1 and d.count > 1:
            val = val * d.count
    else:
        raise m.error(f"'arith.constant' value {v} is outside the subset")
    m.set(op.results[0], m.emit(C.const(d, val)))


_BITS_FMT = {dtypes.float16: ("<H", "<e"), dtypes.float32: ("<I", "<f"), dtypes.float64: ("<Q", "<d")}


_DENSE = re.compile(r"dense<\s*\[?([^\]>]*)\]?\s*>")


def _dense_floats(text: str, start: int, d: DType) -> list[float] | None:
    """The float literals of the `dense<...>` of the op at `start`, hex bit patterns included."""
    end = text.find("\n", start)
    m = _DENSE.search(text, start, end if end >= 0 else len(text))
    if m is None:
        return None
    out = []
    for tok in m.group(1).split(","):
        tok = tok.strip()
        try:
            out.append(_float_bits(d, int(tok, 16)) if tok.lower().startswith(("0x", "-0x")) else float(tok))
        except ValueError:
            return None
    return out


def _float_bits(d: DType, x: int) -> float:
    """A float given by its bits (xDSL reads `dense<0xFF800000>` as that integer)."""
    if d is dtypes.bfloat16:
        return struct.unpack("<f", struct.pack("<I", (x & 0xFFFF) << 16))[0]
    ifmt, ffmt = _BITS_FMT[d]
    return struct.unpack(ffmt, struct.pack(ifmt, x & ((1 << (d.itemsize * 8)) - 1)))[0]


# ---- memref / vector ------------------------------------------------------------------------------------------------
def _pointer(m: _FuncImporter, mem: Any, indices: Any) -> UOp:
    base = m.raw(mem)
    if not isinstance(base, UOp) or base.op is not K.PARAM:
        raise m.error(f"'{m.op.name}' of a memref that is not a function argument is outside the subset")
    idx = list(indices)
    if len(idx) != 1:
        raise m.error(f"'{m.op.name}' with {len(idx)} indices is outside the subset (1-d memrefs)")
    return m.emit(UOp(K.INDEX, base.dtype, (base, m.get(idx[0]))))


def _elem(ptr: UOp, result: Any, m: _FuncImporter) -> DType:
    from xdsl.dialects.builtin import VectorType

    n = result.type.get_shape()[0] if isinstance(result.type, VectorType) else 1
    return ptr.dtype.base.vec(n)


@_handles("memref.load", "vector.load")
def _load(m: _FuncImporter, op: Any) -> None:
    slot = m.raw(op.operands[0])
    if isinstance(slot, _Slot):
        if slot.cur is None and slot.acc is None:
            raise m.error("'memref.load' of a variable nothing was stored to")
        m.set(op.results[0], slot.cur if slot.cur is not None else slot.acc)
        return
    ptr = _pointer(m, op.operands[0], op.operands[1:])
    d = _elem(ptr, op.results[0], m)
    src = (ptr,) if m.alt is None else (ptr, m.alt, m.gate)
    m.set(op.results[0], m.emit(UOp(K.LOAD, d, src)))


@_handles("vector.maskedload")
def _maskedload(m: _FuncImporter, op: Any) -> None:
    mem, *rest = op.operands
    mask = m.get(op.mask)
    if mask.op is not C.VECTORIZE or any(s is not mask.src[0] for s in mask.src):
        raise m.error("'vector.maskedload' with a mask that is not a broadcast gate is outside the subset")
    ptr = _pointer(m, mem, op.indices)
    m.set(op.results[0], _Masked(ptr, mask.src[0], _elem(ptr, op.results[0], m)))


@_handles("memref.store", "vector.store")
def _store(m: _FuncImporter, op: Any) -> None:
    v, mem = op.operands[0], op.operands[1]
    slot = m.raw(mem)
    if isinstance(slot, _Slot):
        if slot.acc_id is None:
            slot.cur = m.get(v)
        elif slot.acc is None:
            init = m.get(v, slot.dtype)
            slot.acc = m.emit(UOp(D.ACC, init.dtype, (init,), slot.acc_id))
        else:
            slot.cur = m.emit(UOp(D.ACCSTORE, slot.acc.dtype, (slot.acc, m.get(v, slot.acc.dtype))))
        return
    ptr = _pointer(m, mem, op.operands[2:])
    base = ptr.dtype.base
    conv = _owner(v, "arith.extui") if base is dtypes.bool else _owner(v, "arith.extf") \
        if base is dtypes.bfloat16 else None
    if conv is not None:  # a bool as a byte, a bf16 as its f32 carrier: the value itself
        v = conv.operands[0]
    d = base.vec(m.dtype(v).count)
    src = (ptr, m.get(v, d)) if m.gate is None else (ptr, m.get(v, d), m.gate)
    m.emit(UOp(K.STORE, dtypes.void, src))


@_handles("memref.alloca")
def _alloca(m: _FuncImporter, op: Any) -> None:
    t = op.results[0].type
    if t.get_shape():
        raise m.error("'memref.alloca' of an array (a register or local buffer) is outside the subset the importer "
                      "reads yet")
    acc = op.attributes.get("uop.acc")
    d = value_dtype(t.element_type, m.signs.is_unsigned(op.results[0]))
    m.set(op.results[0], _Slot(acc.value.data if acc is not None else None, d))


@_handles("vector.broadcast")
def _broadcast(m: _FuncImporter, op: Any) -> None:
    d = m.dtype(op.results[0])
    m.lanes[op.results[0]] = [op.operands[0]] * d.count
    if d.count == 1:  # to a vector<1xT> (a bitcast of a scalar to a vector): the value itself
        m.set(op.results[0], m.get(op.operands[0], d))
        return
    m.value(op.results[0], C.VECTORIZE, *(m.get(op.operands[0], d.scalar),) * d.count)


@_handles("vector.insert")
def _insert(m: _FuncImporter, op: Any) -> None:
    d = m.dtype(op.results[0])
    x, vec = m.get(op.operands[0], d.scalar), m.get(op.operands[1], d)
    pos = list(op.static_position.get_values())
    if vec.op is not C.VECTORIZE or len(pos) != 1 or len(op.operands) != 2:
        raise m.error("'vector.insert' outside the subset: one static position into a vector built lane by lane")
    lanes = list(vec.src)
    lanes[pos[0]] = x
    mlir_lanes = list(m.lanes.get(op.operands[1], [None] * d.count))
    mlir_lanes[pos[0]] = op.operands[0]
    m.lanes[op.results[0]] = mlir_lanes
    picked = _extracted_lanes(mlir_lanes)
    if picked is not None:  # the exporter's multi-lane core.gep: one extract per lane, then the lanes put together
        m.value(op.results[0], C.GEP, m.get(picked[0]), arg=picked[1])
        return
    m.value(op.results[0], C.VECTORIZE, *lanes)


def _extracted_lanes(lanes: list[Any]) -> tuple[Any, tuple[int, ...]] | None:
    """(v, positions) when every lane is its own vector.extract of one vector v, else None."""
    if any(v is None for v in lanes) or len({id(v) for v in lanes}) != len(lanes):
        return None
    ops = [_owner(v, "vector.extract") for v in lanes]
    if any(o is None or len(o.operands) != 1 for o in ops) or len({id(o.operands[0]) for o in ops}) != 1:
        return None
    pos = [list(o.static_position.get_values()) for o in ops]
    if any(len(p) != 1 for p in pos):
        return None
    return ops[0].operands[0], tuple(p[0] for p in pos)


@_handles("vector.extract")
def _extract(m: _FuncImporter, op: Any) -> None:
    pos = list(op.static_position.get_values())
    if len(pos) != 1 or len(op.operands) != 1:
        raise m.error("'vector.extract' needs one static position in the subset")
    if m.dtype(op.operands[0]).count == 1:  # lane 0 of a vector<1xT>: the value itself
        m.set(op.results[0], m.get(op.operands[0]))
        return
    m.value(op.results[0], C.GEP, m.get(op.operands[0]), arg=(pos[0],))


@_handles("vector.shuffle")
def _shuffle(m: _FuncImporter, op: Any) -> None:
    a, b = op.operands
    if a is not b:
        raise m.error("'vector.shuffle' of two different vectors is outside the subset")
    m.value(op.results[0], C.GEP, m.get(a), arg=tuple(op.mask.get_values()))


# ---- scf ------------------------------------------------------------------------------------------------------------
@_handles("scf.for")
def _for(m: _FuncImporter, op: Any) -> None:
    lb, step = (m.raw(v) for v in (op.lb, op.step))
    if not all(isinstance(u, UOp) and u.op is C.CONST for u in (lb, step)) or C.const_value(lb) != 0 or \
            C.const_value(step) != 1 or op.iter_args:
        raise m.error("'scf.for' outside the subset: from the constant 0 by step 1, with no iter_args")
    ident = op.attributes.get("uop.loop")
    loop = m.emit(UOp(D.LOOP, dtypes.index, (m.get(op.ub),), ident.value.data if ident is not None else 0))
    body = op.body.blocks[0]
    m.vals[body.args[0]] = loop
    m.block(body, "scf.yield")
    m.op = op
    m.emit(UOp(D.ENDLOOP, dtypes.void, (loop,)))


@_handles("scf.parallel")
def _parallel(m: _FuncImporter, op: Any) -> None:
    """A global id (`uop.id = ["global_id", dim]`): the rest of the program runs once per id."""
    ident = op.attributes.get("uop.id")
    if ident is None or len(op.lowerBound) != 1 or _const_int(op.lowerBound[0]) != 0 or \
            _const_int(op.step[0]) != 1:
        raise m.error("'scf.parallel' outside the subset: one dim from 0 by step 1, marked `uop.id`")
    kind, dim = ident.data[0].data, ident.data[1].value.data
    if kind not in D.SPECIAL_KINDS:
        raise m.error(f"'scf.parallel': unknown uop.id kind {kind!r}")
    body = op.body.blocks[0]
    m.vals[body.args[0]] = m.emit(UOp(D.SPECIAL, dtypes.index, (m.get(op.upperBound[0]),), (kind, dim)))
    m.block(body, "scf.reduce")


@_handles("memref.alloca_scope")
def _alloca_scope(m: _FuncImporter, op: Any) -> None:
    m.block(op.scope.blocks[0], "memref.alloca_scope.return")


@_handles("scf.execute_region")
def _execute_region(m: _FuncImporter, op: Any) -> None:
    """The region around a parallel body's alloca_scope (one block, no results in the subset)."""
    if op.results or len(op.region.blocks) != 1:
        raise m.error("'scf.execute_region' outside the subset: one block, no results")
    m.block(op.region.blocks[0], "scf.yield")


@_handles("scf.if")
def _if(m: _FuncImporter, op: Any) -> None:
    """A gate: `scf.if %g { store }` is a gated store; `scf.if %g -> T { load; yield } else { yield %alt }` a gated
    load."""
    if m.gate is not None:
        raise m.error("nested 'scf.if' is outside the subset")
    gate = m.get(op.cond)
    if not op.false_region.blocks and not op.results:
        m.gate = gate
        try:
            m.block(op.true_region.blocks[0], "scf.yield")
        finally:
            m.gate = None
        return
    if len(op.results) != 1 or not op.false_region.blocks:
        raise m.error("'scf.if' outside the subset: a gated store, or a gated load with its alternative")
    els = list(op.false_region.blocks[0].ops)
    if len(els) != 1:
        raise m.error("'scf.if' outside the subset: the else block of a gated load only yields its alternative")
    d = m.dtype(op.results[0])
    m.gate, m.alt = gate, m.get(els[0].operands[0], d)
    try:
        outs = m.block(op.true_region.blocks[0], "scf.yield")
        if len(outs) != 1:
            raise m.error("'scf.if' outside the subset: the then block of a gated load yields the load", op)
        u = m.get(outs[0], d)
    finally:
        m.gate = m.alt = None
    m.op = op
    if u.op is not K.LOAD or len(u.src) != 3:
        raise m.error("'scf.if' outside the subset: the then block of a gated load yields the load")
    m.set(op.results[0], u)


# ---- the module -----------------------------------------------------------------------------------------------------
def import_module(text: str, filename: str = "<mlir>", first_line: int = 1) -> UOp:
    """The device-level uopir of an MLIR module of the emit-mlir subset: a core.sink of one device.program per
    func.func, in order. Raises IRError (located file:line:col at the MLIR op) for anything else."""
    try:
        import xdsl  # noqa: F401
    except ImportError:
        raise MLIRImportError("reading MLIR needs xDSL: pip install 'uopir[mlir]'",
                              Location(filename, first_line, 1)) from None
    src = _Text(text, filename, first_line)
    if not _COMMENT.sub("", text).strip():
        raise src.error("the input holds no MLIR (expected a builtin.module or func.func ops)", 0)
    module, starts = _parse(src)
    _verify(module, starts, src)
    smap = SourceMap(filename, first_line, src.lines)
    programs = []
    names: set[str] = set()
    for op in module.ops:
        if op.name != "func.func":
            raise src.error(f"'{op.name}' at module level is outside the subset (func.func only)", starts.get(op, 0))
        if op.sym_name.data in names:
            raise src.error(f"function @{op.sym_name.data} is defined twice", starts.get(op, 0))
        names.add(op.sym_name.data)
        programs.append(_FuncImporter(op, src, starts, smap).program())
    if not programs:
        raise src.error("the module has no func.func to import", 0)
    root = UOp.sink(*programs)
    register_parse(root, smap)
    return root


def _verify(module: Any, starts: dict[Any, int], src: _Text) -> None:
    """xDSL's verifier on every op, innermost first, its message located at the op that fails."""
    for op in module.walk(reverse=True):
        try:
            op.verify(verify_nested_ops=False)
        except Exception as e:  # noqa: BLE001 - VerifyException and the odd ValueError of an attribute check
            raise src.error(f"'{op.name}' op {_first_line(str(e))}", starts.get(op, 0)) from None
