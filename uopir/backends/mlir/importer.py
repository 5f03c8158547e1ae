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
from collections.abc import Callable
from typing import Any

from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.diagnostics import IRError, Location, SourceMap, register_parse
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["import_module", "MLIRImportError"]


class MLIRImportError(IRError):
    """An input that is not MLIR of the subset emit-mlir writes."""


# ---- xDSL: context, a parser that remembers where each op starts -----------------------------------------------------
def _context():
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func, math, memref, scf, vector

    ctx = Context()
    for d in (builtin.Builtin, func.Func, scf.Scf, arith.Arith, memref.MemRef, math.Math, vector.Vector):
        ctx.load_dialect(d)
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
            op = super().parse_operation()
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
        raise src.error(f"MLIR syntax: {_first_line(e.msg)}", e.span.start) from None
    except Exception as e:  # noqa: BLE001 - xDSL raises several kinds (VerifyException, ValueError...) while parsing
        span = getattr(e, "span", None)
        raise src.error(f"MLIR: {_first_line(str(e))}", span.start if span is not None else 0) from None
    return module, parser.starts


def _first_line(msg: str) -> str:
    msg = msg.strip()
    return msg.split("\n", 1)[0] if msg else "invalid input"


# ---- types -----------------------------------------------------------------------------------------------------------
def _scalar_dtype(t: Any) -> DType | None:
    from xdsl.dialects.builtin import (
        BFloat16Type,
        Float16Type,
        Float32Type,
        Float64Type,
        IndexType,
        IntegerType,
        Signedness,
    )

    if isinstance(t, IndexType):
        return dtypes.index
    if isinstance(t, IntegerType):
        w = t.width.data
        if w == 1:
            return dtypes.bool
        if w not in (8, 16, 32, 64):
            return None
        unsigned = t.signedness.data == Signedness.UNSIGNED
        return dtypes.from_name(f"{'u' if unsigned else 'i'}{w}")
    for cls, d in ((Float16Type, dtypes.float16), (BFloat16Type, dtypes.bfloat16), (Float32Type, dtypes.float32),
                   (Float64Type, dtypes.float64)):
        if isinstance(t, cls):
            return d
    return None


def value_dtype(t: Any) -> DType | None:
    """The uopir dtype of an MLIR value type (a scalar or a 1-d vector of one), None outside the subset."""
    from xdsl.dialects.builtin import VectorType

    if isinstance(t, VectorType):
        shape = t.get_shape()
        s = _scalar_dtype(t.element_type)
        if len(shape) != 1 or s is None or shape[0] < 1:
            return None
        return s.vec(shape[0])
    return _scalar_dtype(t)


# ---- one function ----------------------------------------------------------------------------------------------------
Handler = Callable[["_FuncImporter", Any], None]
_HANDLERS: dict[str, Handler] = {}


def _handles(*names: str) -> Callable[[Handler], Handler]:
    def reg(fn: Handler) -> Handler:
        for n in names:
            _HANDLERS[n] = fn
        return fn
    return reg


class _FuncImporter:
    """Builds the device.program of one func.func, op by op in text order (the program's execution order)."""

    def __init__(self, func: Any, src: _Text, starts: dict[Any, int], smap: SourceMap):
        self.func, self.src, self.starts, self.smap = func, src, starts, smap
        self.vals: dict[Any, UOp] = {}  # xDSL SSA value -> UOp
        self.order: dict[UOp, None] = {}  # the program's ops in execution order
        self.loop_id = 0
        self.acc_id = 0
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

    def get(self, v: Any) -> UOp:
        u = self.vals.get(v)
        if u is None:
            raise self.error(f"'{self.op.name}' uses a value that is not part of the imported program")
        return u

    def dtype_of(self, t: Any, what: str = "result") -> DType:
        d = value_dtype(t)
        if d is None:
            raise self.error(f"'{self.op.name}': {what} type {t} is outside the subset emit-mlir writes (index, i1, "
                             "i8..i64, f16, bf16, f32, f64 and 1-d vectors of them)")
        return d

    def set(self, result: Any, u: UOp) -> UOp:
        self.vals[result] = u
        return u

    # -- the function
    def program(self) -> UOp:
        from xdsl.dialects.builtin import IndexType, MemRefType

        f = self.func
        self.op = f
        if f.body.blocks and len(f.body.blocks) != 1:
            raise self.error("'func.func' with more than one block is outside the subset")
        if not f.body.blocks:
            raise self.error("'func.func' without a body (a declaration) is outside the subset")
        if f.function_type.outputs.data:
            raise self.error("'func.func' returning values is outside the subset (kernels write memrefs)")
        block = f.body.blocks[0]
        idx = 0
        for arg in block.args:
            t = arg.type
            if isinstance(t, MemRefType):
                elem = _scalar_dtype(t.element_type)
                if elem is None or len(t.get_shape()) != 1:
                    raise self.error(f"'func.func' argument type {t} is outside the subset (a 1-d memref of a "
                                     "scalar)")
                self.vals[arg] = self.emit(UOp(K.PARAM, elem.ptr(), (), idx))
                idx += 1
            elif isinstance(t, IndexType):
                name = arg.name_hint or f"arg{arg.index}"
                self.vals[arg] = self.emit(UOp(K.VAR, dtypes.index, (), (name, 0, dtypes.index.max)))
            else:
                raise self.error(f"'func.func' argument type {t} is outside the subset (memref or index)")
        self.block(block, terminator="func.return")
        name = f.sym_name.data
        return UOp(D.PROGRAM, dtypes.void, tuple(self._used()), name)

    def _used(self) -> list[UOp]:
        """The program's ops without constants nothing reads (loop bounds and steps the exporter wrote)."""
        read: set[UOp] = set()
        for u in self.order:
            read.update(u.src)
        return [u for u in self.order if u.op is not C.CONST or u in read]

    def block(self, block: Any, terminator: str) -> list[UOp]:
        """Import the ops of a block; returns the operands of its terminator."""
        ops = list(block.ops)
        for op in ops[:-1] if ops else ():
            self.import_op(op)
        if not ops or ops[-1].name != terminator:
            raise self.error(f"block must end with '{terminator}'", ops[-1] if ops else self.op)
        self.op = ops[-1]
        return [self.get(v) for v in ops[-1].operands]

    def import_op(self, op: Any) -> None:
        self.op = op
        h = _HANDLERS.get(op.name)
        if h is None:
            raise self.error(f"'{op.name}' is outside the MLIR subset uop-opt reads (what emit-mlir writes)")
        h(self, op)


# ---- arith / math ----------------------------------------------------------------------------------------------------
_BINARY = {"arith.addi": C.ADD, "arith.addf": C.ADD, "arith.subi": C.SUB, "arith.subf": C.SUB, "arith.muli": C.MUL,
           "arith.mulf": C.MUL, "arith.divf": C.FDIV, "arith.divsi": C.IDIV, "arith.divui": C.IDIV,
           "arith.remsi": C.MOD, "arith.remui": C.MOD, "arith.remf": C.MOD, "arith.maxsi": C.MAX,
           "arith.maxui": C.MAX, "arith.maximumf": C.MAX, "arith.maxnumf": C.MAX, "arith.andi": C.AND,
           "arith.ori": C.OR, "arith.xori": C.XOR, "arith.shli": C.SHL, "arith.shrsi": C.SHR, "arith.shrui": C.SHR}
_UNARY = {"arith.negf": C.NEG, "math.exp2": C.EXP2, "math.log2": C.LOG2, "math.sin": C.SIN, "math.sqrt": C.SQRT,
          "math.trunc": C.TRUNC}
_CASTS = ("arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.extsi", "arith.extui",
          "arith.trunci", "arith.extf", "arith.truncf", "arith.index_cast", "arith.index_castui")


@_handles(*_BINARY)
def _binary(m: _FuncImporter, op: Any) -> None:
    a, b = (m.get(v) for v in op.operands)
    d = m.dtype_of(op.results[0].type)
    m.set(op.results[0], m.emit(UOp(_BINARY[op.name], d, (a, b))))


@_handles(*_UNARY)
def _unary(m: _FuncImporter, op: Any) -> None:
    x = m.get(op.operands[0])
    m.set(op.results[0], m.emit(UOp(_UNARY[op.name], m.dtype_of(op.results[0].type), (x,))))


@_handles(*_CASTS)
def _cast(m: _FuncImporter, op: Any) -> None:
    x = m.get(op.operands[0])
    m.set(op.results[0], m.emit(UOp(C.CAST, m.dtype_of(op.results[0].type), (x,))))


@_handles("arith.bitcast")
def _bitcast(m: _FuncImporter, op: Any) -> None:
    x = m.get(op.operands[0])
    m.set(op.results[0], m.emit(UOp(C.BITCAST, m.dtype_of(op.results[0].type), (x,))))


@_handles("arith.select")
def _select(m: _FuncImporter, op: Any) -> None:
    c, a, b = (m.get(v) for v in op.operands)
    m.set(op.results[0], m.emit(UOp(C.WHERE, m.dtype_of(op.results[0].type), (c, a, b))))


# predicate -> (op, swap operands); the others (le, ge) are outside the subset
_CMPI = {0: (C.CMPEQ, False), 1: (C.CMPNE, False), 2: (C.CMPLT, False), 4: (C.CMPLT, True), 6: (C.CMPLT, False),
         8: (C.CMPLT, True)}
_CMPF = {1: (C.CMPEQ, False), 4: (C.CMPLT, False), 2: (C.CMPLT, True), 13: (C.CMPNE, False), 9: (C.CMPLT, False),
         12: (C.CMPLT, False)}


@_handles("arith.cmpi", "arith.cmpf")
def _cmp(m: _FuncImporter, op: Any) -> None:
    a, b = (m.get(v) for v in op.operands)
    pred = op.predicate.value.data
    table = _CMPI if op.name == "arith.cmpi" else _CMPF
    if pred not in table:
        raise m.error(f"'{op.name}' with predicate {pred} is outside the subset")
    uop, swap = table[pred]
    if swap:
        a, b = b, a
    m.set(op.results[0], m.emit(UOp(uop, m.dtype_of(op.results[0].type), (a, b))))


@_handles("arith.constant")
def _constant(m: _FuncImporter, op: Any) -> None:
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr

    d = m.dtype_of(op.results[0].type)
    v = op.value
    if isinstance(v, IntegerAttr):
        val: Any = v.value.data
        val = bool(val & 1) if d is dtypes.bool else val
    elif isinstance(v, FloatAttr):
        val = v.value.data
    elif isinstance(v, DenseIntOrFPElementsAttr):
        vals = list(v.get_values())
        val = tuple(bool(x) if d.scalar is dtypes.bool else x for x in vals)
        if len(val) == 1 and d.count > 1:
            val = val * d.count
    else:
        raise m.error(f"'arith.constant' value {v} is outside the subset")
    m.set(op.results[0], m.emit(C.const(d, val)))


# ---- memref / vector -------------------------------------------------------------------------------------------------
def _pointer(m: _FuncImporter, mem: Any, indices: Any) -> UOp:
    base = m.get(mem)
    if base.op is not K.PARAM:
        raise m.error(f"'{m.op.name}' of a memref that is not a function argument is outside the subset")
    idx = list(indices)
    if len(idx) != 1:
        raise m.error(f"'{m.op.name}' with {len(idx)} indices is outside the subset (1-d memrefs)")
    return m.emit(UOp(K.INDEX, base.dtype, (base, m.get(idx[0]))))


@_handles("memref.load", "vector.load")
def _load(m: _FuncImporter, op: Any) -> None:
    ptr = _pointer(m, op.operands[0], op.operands[1:])
    m.set(op.results[0], m.emit(UOp(K.LOAD, m.dtype_of(op.results[0].type), (ptr,))))


@_handles("memref.store", "vector.store")
def _store(m: _FuncImporter, op: Any) -> None:
    value = m.get(op.operands[0])
    ptr = _pointer(m, op.operands[1], op.operands[2:])
    m.emit(UOp(K.STORE, dtypes.void, (ptr, value)))


@_handles("vector.from_elements", "vector.broadcast")
def _vectorize(m: _FuncImporter, op: Any) -> None:
    d = m.dtype_of(op.results[0].type)
    xs = tuple(m.get(v) for v in op.operands)
    if op.name == "vector.broadcast":
        xs = xs * d.count
    m.set(op.results[0], m.emit(UOp(C.VECTORIZE, d, xs)))


@_handles("vector.extract")
def _extract(m: _FuncImporter, op: Any) -> None:
    x = m.get(op.operands[0])
    pos = list(op.static_position.get_values()) if hasattr(op, "static_position") else []
    if len(pos) != 1 or len(op.operands) != 1:
        raise m.error("'vector.extract' needs one static position in the subset")
    m.set(op.results[0], m.emit(UOp(C.GEP, m.dtype_of(op.results[0].type), (x,), (pos[0],))))


# ---- scf -------------------------------------------------------------------------------------------------------------
@_handles("scf.for")
def _for(m: _FuncImporter, op: Any) -> None:
    lb, ub, step = (m.get(v) for v in (op.lb, op.ub, op.step))
    if lb.op is not C.CONST or C.const_value(lb) != 0 or step.op is not C.CONST or C.const_value(step) != 1:
        raise m.error("'scf.for' outside the subset: its lower bound must be the constant 0 and its step 1")
    accs = []
    for init in op.iter_args:  # an accumulator: declared before the loop unless an outer loop carries it already
        u = m.get(init)
        if u.op not in (D.ACC, D.ACCSTORE):
            u = m.emit(UOp(D.ACC, u.dtype, (u,), m.acc_id))
            m.acc_id += 1
        accs.append(u.src[0] if u.op is D.ACCSTORE else u)
    loop = m.emit(UOp(D.LOOP, dtypes.index, (ub,), m.loop_id))
    m.loop_id += 1
    body = op.body.blocks[0]
    m.vals[body.args[0]] = loop
    for arg, acc in zip(body.args[1:], accs, strict=True):
        m.vals[arg] = acc
    yielded = m.block(body, "scf.yield")
    outs = []
    for acc, v in zip(accs, yielded, strict=True):
        if v.op is D.ACCSTORE and v.src[0] is acc:
            outs.append(v)
        else:
            outs.append(m.emit(UOp(D.ACCSTORE, acc.dtype, (acc, v))))
    m.op = op
    m.emit(UOp(D.ENDLOOP, dtypes.void, (loop,)))
    for r, u in zip(op.results, outs, strict=True):
        m.set(r, u)


@_handles("scf.if")
def _if(m: _FuncImporter, op: Any) -> None:
    """A gate: `scf.if %g { store }` is a gated store; `scf.if %g -> T { load; yield } else { yield %alt }` a gated
    load."""
    gate = m.get(op.cond)
    then = op.true_region.blocks[0] if op.true_region.blocks else None
    ops = list(then.ops) if then is not None else []
    if not op.results and len(ops) == 2 and ops[0].name in ("memref.store", "vector.store"):
        s = ops[0]
        m.op = s
        value = m.get(s.operands[0])
        ptr = _pointer(m, s.operands[1], s.operands[2:])
        m.emit(UOp(K.STORE, dtypes.void, (ptr, value, gate)))
        return
    if len(op.results) == 1 and len(ops) == 2 and ops[0].name in ("memref.load", "vector.load") and \
            op.false_region.blocks:
        els = list(op.false_region.blocks[0].ops)
        if len(els) == 1 and els[0].name == "scf.yield":
            ld = ops[0]
            m.op = ld
            alt = m.get(els[0].operands[0])
            ptr = _pointer(m, ld.operands[0], ld.operands[1:])
            m.op = op
            u = m.emit(UOp(K.LOAD, m.dtype_of(op.results[0].type), (ptr, alt, gate)))
            m.set(op.results[0], u)
            return
    raise m.error("'scf.if' outside the subset: only a gated store or a gated load")


# ---- the module ------------------------------------------------------------------------------------------------------
def import_module(text: str, filename: str = "<mlir>", first_line: int = 1) -> UOp:
    """The device-level uopir of an MLIR module of the emit-mlir subset: a core.sink of one device.program per
    func.func, in order. Raises IRError (located file:line:col at the MLIR op) for anything else."""
    try:
        import xdsl  # noqa: F401
    except ImportError:
        raise MLIRImportError("reading MLIR needs xDSL: pip install 'uopir[mlir]'",
                              Location(filename, first_line, 1)) from None
    src = _Text(text, filename, first_line)
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
