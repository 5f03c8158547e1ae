"""Export device-level uopir to MLIR with xDSL: one `func.func` per `device.program`, in one `builtin.module`.

The walk is the cpu renderers' (uopir.backends.codegen.program: execution order, escaping values, signature); the
language is standard MLIR: `scf` for control flow, `arith`/`math` for the ALU (uopir.backends.mlir.alu), `memref`
for buffers and variables, `vector` for vector values. docs/mlir.md has the whole mapping; the choices that keep
uopir's exact semantics (uopir.dialects.semantics) where MLIR's differ:

- integer divisions and remainders guard the divisor (`arith.divsi` by 0 or MIN/-1 is undefined): it is replaced by
  1 there and the result selected (x/0 = x%0 = 0, MIN/-1 = MIN, MIN%-1 = 0); shift amounts are masked to the width
  (`arith.shli` by the width or more is poison); unsigned integers are signless with the unsigned ops;
- float -> int casts saturate explicitly (`math.trunc`, compares, selects around `arith.fptosi`: NaN -> 0);
  f64 -> f16/bf16 and 64-bit int -> bf16 round once, through a round-to-odd f32 (and a sticky f64), as the
  semantics do; `max` is `arith.maximumf` (NaN wins, +0.0 above -0.0) / `maxsi` / `maxui`; no fastmath flag;
- bf16 values are MLIR `bf16` (each op rounded to bf16); a bf16 buffer holds the f32 carrier of the runtime, read
  with `arith.truncf` (round to nearest even) and written with `arith.extf`; a bool is `i1` in registers and `i8`
  in memory (`!= 0` when read);
- gated scalar loads and gated stores are `scf.if`; gated vector loads are `vector.maskedload`.

Buffers are `memref<?xT>` function arguments in `kernel.param` index order (static `memref<NxT>` where the pointer
type carries a size), then one `index` argument per `kernel.var` in name order. A global id (`device.special
{kind = global_id}`) is an `scf.parallel` over the rest of the program. Accumulators, values read after the block
that computes them, and register arrays are `memref.alloca`s at the top of the function (or of the parallel body,
inside a `memref.alloca_scope` so each iteration owns them, itself inside an `scf.execute_region`: lowering the
scope makes blocks, which scf.parallel's single-block body cannot hold; lower memref before scf then); large
`kernel.local` arrays are `memref.alloc`ed.
Arguments and allocas carry `uop.*` attributes (param index, var name and range, accumulator id, dtype where the
memory type is a carrier) so that an importer can rebuild the uopir program. A function is named after its program
through `mlir_ident` (uopir.backends.codegen.names); the names themselves ride in `uop.kernel` / `uop.var` string
attributes, which xDSL's printer escapes.
"""
from __future__ import annotations

import io
import math
import struct

from xdsl.dialects import arith, func, scf, vector
from xdsl.dialects import math as mmath
from xdsl.dialects import memref as mref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    VectorType,
    bf16,
    f32,
    i1,
    i8,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from uopir.backends.codegen.names import mlir_ident, mlir_text
from uopir.backends.codegen.program import (
    STACK_SCRATCH,
    KernelSignature,
    check_const,
    check_offset,
    check_special,
    op_error,
)
from uopir.backends.codegen.program import kernel_signature as _signature
from uopir.backends.codegen.walk import CPU_REFUSES, NO_VALUE_ROWS, Row, Writer, rows, walk
from uopir.backends.emit import require_programs
from uopir.backends.mlir import ops as X
from uopir.backends.mlir.alu import AluExport
from uopir.backends.mlir.types import (
    SCALAR,
    const_attr,
    mem_scalar,
    memory_type,
    mlir_type,
    py_value,
    same,
    vec,
    zero_of,
)
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import const_array
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["export_module", "export_function", "export_text", "kernel_signature", "mlir_type", "memory_type",
           "print_module", "MLIR_ROWS"]


def kernel_signature(program: UOp) -> KernelSignature:
    """How the exported function of `program` is called: its name (the program's through mlir_ident), buffers,
    variables; `parallel` says it holds an scf.parallel (it takes no core arguments)."""
    return _signature(program, mlir_ident, "MLIR")


# ---- values ----------------------------------------------------------------------------------------------------------
class _Slot:
    """A variable in a rank-0 memref (accumulator, escaping value): loaded where it is read."""

    __slots__ = ("ref", "dtype")

    def __init__(self, ref: SSAValue, dtype: DType):
        self.ref, self.dtype = ref, dtype


class _Ptr:
    """A buffer (memref), an index offset (None: 0) and an optional i1 gate."""

    __slots__ = ("mem", "off", "gate", "dtype")

    def __init__(self, mem: SSAValue, off: SSAValue | None, gate: SSAValue | None, dtype: DType):
        self.mem, self.off, self.gate, self.dtype = mem, off, gate, dtype


class _Scope:
    """Where allocas go: the function's entry block, or a parallel body's alloca_scope block."""

    __slots__ = ("block", "prologue", "frees")

    def __init__(self, block: Block):
        self.block = block
        self.prologue: list[Operation] = []
        self.frees: list[SSAValue] = []  # heap scratch allocated in the prologue, freed where the scope ends


def _prepend(block: Block, ops: list[Operation]) -> None:
    """Put ops, in order, before the block's first op (the constants and allocas made while the body was built)."""
    first = block.first_op
    for op in ops:
        if first is None:
            block.add_op(op)
        else:
            block.insert_op_before(op, first)


class _Func(AluExport, Writer):
    """The export of one device.program into one func.func (blocks: (opener, the block it hid))."""

    who = "the MLIR export"
    pointer = _Ptr

    def __init__(self, program: UOp, name: str | None = None):
        Writer.__init__(self)
        self.program = program
        self.sig = kernel_signature(program)
        self.name = name or self.sig.name
        args: list[Attribute] = []
        attrs: list[dict[str, Attribute]] = []
        sized = {u.arg: u.dtype for u in program.toposort() if u.op is K.PARAM}
        for i, d in enumerate(self.sig.params):
            if d is None:
                args.append(MemRefType(i8, [0]))
                attrs.append({"uop.unused": IntegerAttr(i, i64)})
                continue
            size = sized[i].size
            args.append(MemRefType(mem_scalar(d), [size if size >= 0 else DYNAMIC_INDEX]))
            a: dict[str, Attribute] = {"uop.param": IntegerAttr(i, i64)}
            if d.scalar in (dtypes.bool, dtypes.bfloat16):
                a["uop.dtype"] = StringAttr(d.scalar.name)
            attrs.append(a)
        self.var_types: dict[str, DType] = {}
        ranges: dict[str, tuple[int, int]] = {}
        for u in program.toposort():
            if u.op is K.VAR:
                a = u.attrs
                self.var_types[a.name] = u.dtype
                ranges[a.name] = (a.min, a.max)
        for v in self.sig.vars:
            args.append(IndexType())
            lo, hi = ranges[v]
            attrs.append({"uop.var": StringAttr(mlir_text(v)), "uop.range": ArrayAttr([IntegerAttr(lo, i64),
                                                                                IntegerAttr(hi, i64)])})
        self.entry = Block(arg_types=args)
        self.arg_types, self.arg_attrs = args, attrs
        self.consts: list[Operation] = []
        self.const_cache: dict[tuple, SSAValue] = {}
        self.cur = self.entry
        self.scopes = [_Scope(self.entry)]
        self.ids: list[tuple[Block, _Scope | None, Operation | None]] = []  # open parallels: (outer block, ...)
        self.id_dims: set[int] = set()

    # ---- building
    def add(self, op: Operation) -> SSAValue:
        self.cur.add_op(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def const(self, t: Attribute, value: object) -> SSAValue:
        """A constant of MLIR type t (a scalar or a splat vector), made once per function at its top."""
        key = (t, value if not (isinstance(value, float) and math.isnan(value)) else "nan",
               struct.pack("<d", value) if isinstance(value, float) else None)
        hit = self.const_cache.get(key)
        if hit is not None:
            return hit
        op = arith.ConstantOp(const_attr(t, value))
        self.consts.append(op)
        self.const_cache[key] = op.results[0]
        return op.results[0]

    def const_lanes(self, t: Attribute, lanes: list[object]) -> SSAValue:
        key = (t, tuple(struct.pack("<d", v) if isinstance(v, float) else v for v in lanes))
        hit = self.const_cache.get(key)
        if hit is not None:
            return hit
        assert isinstance(t, VectorType)
        op = arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, lanes))  # type: ignore[arg-type]
        self.consts.append(op)
        self.const_cache[key] = op.results[0]
        return op.results[0]

    def alloca(self, t: MemRefType, attrs: dict[str, Attribute] | None = None) -> SSAValue:
        op = mref.AllocaOp.get(t.element_type, shape=t.get_shape())
        if attrs:
            op.attributes.update(attrs)
        self.scopes[-1].prologue.append(op)
        return op.results[0]

    # ---- values
    def get(self, u: UOp, n: int | None = None) -> SSAValue:
        """u's value (loaded when it lives in a slot), broadcast to n lanes when u is a scalar and n > 1."""
        v = self.value(u)
        if isinstance(v, _Slot):
            v = self.add(mref.LoadOp.get(v.ref, []))
        if n is not None and n > 1 and not isinstance(v.type, VectorType):
            if u.op is C.CONST:  # a splat constant rather than a broadcast
                value = py_value(u.dtype, const_array(u.dtype, u.arg).reshape(-1)[0])
                return self.const(VectorType(v.type, [n]), value)
            v = self.add(vector.BroadcastOp(v, VectorType(v.type, [n])))
        return v

    def define(self, u: UOp, v: SSAValue, escapes: bool) -> None:
        if escapes:
            slot = self.alloca(MemRefType(v.type, []))
            self.add(mref.StoreOp.get(v, slot, []))
            self.vals[u] = _Slot(slot, u.dtype)
        else:
            self.vals[u] = v

    def ptr(self, u: UOp) -> _Ptr:
        p = self.vals.get(u)
        if not isinstance(p, _Ptr):
            raise op_error(u, f"expected a pointer, got {u.op.name} : {u.dtype}")
        return p

    def index(self, u: UOp) -> SSAValue:
        """An integer operand as an `index` value."""
        v = self.get(u)
        d = check_offset(u)
        if d is dtypes.index:
            return v
        if d.kind == "uint":
            if d.itemsize < 8:
                v = self.add(X.ExtUIOp(v, i64))
        return self.add(X.IndexCastOp(v, IndexType()))

    # ---- the walk
    def build(self) -> func.FuncOp:
        walk(self.program, MLIR_ROWS, self)
        while self.ids:
            self.close_parallel()
        for mem in self.scopes[-1].frees:
            self.add(mref.DeallocOp.get(mem))
        self.add(func.ReturnOp())
        self.finish_scope(self.scopes.pop())
        _prepend(self.entry, self.consts)
        f = func.FuncOp(self.name, (self.arg_types, []), Region(self.entry),
                        arg_attrs=ArrayAttr([DictionaryAttr(a) for a in self.arg_attrs]))
        f.attributes["uop.kernel"] = StringAttr(mlir_text(self.program.arg))
        return f

    def finish_scope(self, scope: _Scope) -> None:
        _prepend(scope.block, scope.prologue)

    # ---- the rows (MLIR_ROWS)
    def const_op(self, u: UOp, escapes: bool) -> None:
        check_const(u, "exported")
        if u.dtype.scalar not in SCALAR:
            raise op_error(u, f"the MLIR export has no type for {u.dtype}")
        self.vals[u] = self.const_of(u.dtype, u.arg)  # a constant of the function's top: never in a slot

    def param(self, u: UOp, escapes: bool) -> None:
        self.vals[u] = _Ptr(self.entry.args[u.arg], None, None, u.dtype)

    def var(self, u: UOp, escapes: bool) -> None:
        arg = self.entry.args[len(self.sig.params) + self.sig.vars.index(u.attrs.name)]
        t = mlir_type(u.dtype)
        self.vals[u] = arg if isinstance(t, IndexType) else self.add(X.IndexCastOp(arg, t))

    def index_op(self, u: UOp, escapes: bool) -> None:
        ops = u.operands
        p = self.ptr(ops.ptr)
        off = self.index(ops.offset)
        if p.off is not None:
            off = self.add(arith.AddiOp(p.off, off))
        gate = p.gate
        if (own := ops.gate) is not None:
            g = self.get(own)
            gate = g if gate is None else self.add(arith.AndIOp(gate, g))
        self.vals[u] = _Ptr(p.mem, off, gate, u.dtype)

    def gep_op(self, u: UOp, escapes: bool) -> None:
        self.define(u, self.gep(u), escapes)

    def vectorize_op(self, u: UOp, escapes: bool) -> None:
        self.define(u, self.vectorize(u), escapes)

    def if_(self, u: UOp, escapes: bool) -> None:
        body = Block()
        self.add(scf.IfOp(self.get(u.operands.cond), [], Region(body)))
        self.open(u, self.cur)
        self.cur = body

    def end(self, u: UOp, escapes: bool) -> None:
        outer = self.close(u)
        self.add(scf.YieldOp())
        self.cur = outer

    def acc(self, u: UOp, escapes: bool) -> None:
        init = self.get(u.operands.init, u.dtype.count)
        slot = self.alloca(MemRefType(mlir_type(u.dtype), []), {"uop.acc": IntegerAttr(u.arg, i64)})
        self.add(mref.StoreOp.get(init, slot, []))
        self.vals[u] = _Slot(slot, u.dtype)

    def accstore(self, u: UOp, escapes: bool) -> None:
        ops = u.operands
        acc = self.vals.get(ops.acc)
        if not isinstance(acc, _Slot):
            raise op_error(u, "device.accstore's first operand must be a device.acc")
        v = self.get(ops.value, acc.dtype.count)
        self.add(mref.StoreOp.get(v, acc.ref, []))
        self.vals[u] = acc

    def cast_op(self, u: UOp, escapes: bool) -> None:
        n, x = u.dtype.count, u.operands.x
        self.define(u, self.cast(self.get(x, n), x.dtype, u.dtype, n), escapes)

    def bitcast_op(self, u: UOp, escapes: bool) -> None:
        self.define(u, self.bitcast(u), escapes)

    def alu_op(self, u: UOp, escapes: bool) -> None:
        self.define(u, self.alu(u), escapes)

    def fma_op(self, u: UOp, escapes: bool) -> None:
        """device.fma: math.fma (rounded once; it lowers to LLVM's fma intrinsic)."""
        a, b, c = (self.get(s, u.dtype.count) for s in u.src)
        self.define(u, self.add(mmath.FmaOp(a, b, c)), escapes)

    def const_of(self, d: DType, value: object) -> SSAValue:
        """The constant of a const op's value through the semantics' carrier (exactly the interpreter's value)."""
        t, n = mlir_type(d), d.count
        lanes = value if n > 1 and type(value) is tuple else (value,) * n
        vals = [py_value(d.scalar, const_array(d.scalar, v).reshape(-1)[0]) for v in lanes]
        if n == 1:
            return self.const(t, vals[0])
        if all(same(v, vals[0]) for v in vals):
            return self.const(t, vals[0])
        return self.const_lanes(t, vals)

    def scratch(self, u: UOp, escapes: bool = False) -> None:
        """kernel.register / small kernel.local: a zeroed stack array; a large kernel.local: zeroed heap memory."""
        size = max(u.dtype.size, 1)
        t = MemRefType(mem_scalar(u.dtype.base), [size])
        kind = "uop.register" if u.op is K.REGISTER else "uop.local"
        heap = u.op is K.LOCAL and u.dtype.size * u.dtype.base.itemsize > STACK_SCRATCH
        if heap:
            alloc = mref.AllocOp.get(t.element_type, shape=[size])
            alloc.attributes[kind] = IntegerAttr(u.arg, i64)
            self.scopes[-1].prologue.append(alloc)
            mem = alloc.results[0]
            self.scopes[-1].frees.append(mem)
        else:
            mem = self.alloca(t, {kind: IntegerAttr(u.arg, i64)})
        # zero it where it is declared (the prologue of its scope)
        c0, c1, cn = self.const(IndexType(), 0), self.const(IndexType(), 1), self.const(IndexType(), size)
        body = Block(arg_types=[IndexType()])
        body.add_ops([mref.StoreOp.get(self.const(t.element_type, zero_of(t.element_type)), mem, [body.args[0]]),
                      scf.YieldOp()])
        self.scopes[-1].prologue.append(scf.ForOp(c0, cn, c1, [], Region(body)))
        self.vals[u] = _Ptr(mem, None, None, u.dtype)

    # ---- blocks
    def open_loop(self, u: UOp, escapes: bool = False) -> None:
        end = self.index(u.operands.end)
        body = Block(arg_types=[IndexType()])
        loop = scf.ForOp(self.const(IndexType(), 0), end, self.const(IndexType(), 1), [], Region(body))
        loop.attributes["uop.loop"] = IntegerAttr(u.arg, i64)
        self.add(loop)
        self.open(u, self.cur)
        self.cur = body
        self.vals[u] = body.args[0]

    def special(self, u: UOp, escapes: bool = False) -> None:
        kind, dim = check_special(u, self.who, self.innermost(), self.id_dims)
        size = self.index(u.operands.size)
        body = Block(arg_types=[IndexType()])
        par = scf.ParallelOp([self.const(IndexType(), 0)], [size], [self.const(IndexType(), 1)], Region(body))
        par.attributes["uop.id"] = ArrayAttr([StringAttr(kind), IntegerAttr(dim, i64)])
        self.add(par)
        inner = Block()
        scope_op = mref.AllocaScopeOp(result_types=((),), regions=(Region(inner),))
        body.add_op(scope_op)
        self.ids.append((self.cur, self.scopes[-1], scope_op))
        self.scopes.append(_Scope(inner))
        self.cur = inner
        self.vals[u] = body.args[0]

    def close_parallel(self) -> None:
        outer, _, scope_op = self.ids.pop()
        scope = self.scopes.pop()
        inner = self.cur
        body = scope_op.parent_block()
        assert body is not None and scope_op is not None
        if scope.prologue:  # the iteration's own allocas: keep the alloca_scope, inside an scf.execute_region
            self.finish_scope(scope)  # (lowering the scope makes blocks, which only a multi-block region may hold)
            for mem in scope.frees:  # the iteration's heap scratch
                inner.add_op(mref.DeallocOp.get(mem))
            inner.add_op(mref.AllocaScopeReturnOp(operands=((),)))
            scope_op.detach()
            region_block = Block([scope_op, scf.YieldOp()])
            body.add_op(X.ExecuteRegionOp([], Region(region_block)))
        else:  # nothing allocated: the body is the scope's ops
            for o in list(inner.ops):
                o.detach()
                body.add_op(o)
            scope_op.detach()
            scope_op.erase()
        body.add_op(scf.ReduceOp())
        self.cur = outer

    # ---- memory
    def _gate(self, u: UOp, p: _Ptr) -> SSAValue | None:
        gate = p.gate
        if (own := u.operands.gate) is not None:
            g = self.get(own)
            gate = g if gate is None else self.add(arith.AndIOp(gate, g))
        return gate

    def _off(self, p: _Ptr) -> SSAValue:
        return p.off if p.off is not None else self.const(IndexType(), 0)

    def _from_mem(self, x: SSAValue, d: DType, n: int) -> SSAValue:
        """A value read from memory in its register form (bool from a byte, bf16 rounded from its carrier)."""
        if d.scalar is dtypes.bool:
            return self.add(X.CmpiOp(x, self.const(vec(i8, n), 0), "ne"))
        if d.scalar is dtypes.bfloat16:
            return self.add(arith.TruncFOp(x, vec(bf16, n)))
        return x

    def _to_mem(self, x: SSAValue, d: DType, n: int) -> SSAValue:
        if d.scalar is dtypes.bool:
            return self.add(X.ExtUIOp(x, vec(i8, n)))
        if d.scalar is dtypes.bfloat16:
            return self.add(arith.ExtFOp(x, vec(f32, n)))
        return x

    def _raw_load(self, p: _Ptr, d: DType, n: int) -> SSAValue:
        off = self._off(p)
        if n == 1:
            return self.add(mref.LoadOp.get(p.mem, [off]))
        return self.add(vector.LoadOp(p.mem, [off], VectorType(mem_scalar(d), [n])))

    def load(self, u: UOp, escapes: bool) -> None:
        ops = u.operands
        p = self.ptr(ops.ptr)
        gate = self._gate(u, p)
        d, n = u.dtype, u.dtype.count
        if gate is None:
            self.define(u, self._from_mem(self._raw_load(p, d, n), d, n), escapes)
            return
        alt = self.get(ops.alt, n) if ops.alt is not None else self.const(mlir_type(d), zero_of(SCALAR[d.scalar]))
        if n == 1:  # the load runs only where the gate holds
            then, other = Block(), Block()
            outer = self.cur
            self.cur = then
            v = self._from_mem(self._raw_load(p, d, n), d, n)
            self.add(scf.YieldOp(v))
            self.cur = other
            self.add(scf.YieldOp(alt))
            self.cur = outer
            self.define(u, self.add(scf.IfOp(gate, [v.type], Region(then), Region(other))), escapes)
            return
        mt = VectorType(mem_scalar(d), [n])
        mask = self.add(vector.BroadcastOp(gate, VectorType(i1, [n])))
        raw = self.add(vector.MaskedLoadOp(p.mem, [self._off(p)], mask, self.const(mt, zero_of(mt.element_type))))
        v = self._from_mem(raw, d, n)
        self.define(u, self.add(X.SelectOp(gate, v, alt)), escapes)

    def store(self, u: UOp, escapes: bool = False) -> None:
        ops = u.operands
        p = self.ptr(ops.ptr)
        gate = self._gate(u, p)
        d = ops.value.dtype
        n = d.count
        v = self.get(ops.value, n)
        outer = self.cur
        if gate is not None:
            then = Block()
            self.add(scf.IfOp(gate, [], Region(then)))
            self.cur = then
        x = self._to_mem(v, d, n)
        if n == 1:
            self.add(mref.StoreOp.get(x, p.mem, [self._off(p)]))
        else:
            self.add(vector.StoreOp(x, p.mem, [self._off(p)]))
        if gate is not None:
            self.add(scf.YieldOp())
            self.cur = outer

    # ---- lanes
    def gep(self, u: UOp) -> SSAValue:
        v = self.get(u.operands.x)
        lanes = tuple(u.attrs.idx)
        if not isinstance(v.type, VectorType):
            return v
        et = v.type.element_type
        parts = [self.add(vector.ExtractOp(v, [k], et)) for k in lanes]
        if len(lanes) == 1:
            return parts[0]
        # lane by lane rather than vector.shuffle, whose mask attribute MLIR 19's generic form spells differently
        return self.lanes(VectorType(et, [len(lanes)]), parts)

    def vectorize(self, u: UOp) -> SSAValue:
        return self.lanes(mlir_type(u.dtype), [self.get(s) for s in u.src])  # type: ignore[arg-type]

    def lanes(self, t: VectorType, parts: list[SSAValue]) -> SSAValue:
        """A vector of the given lane values: a broadcast of the first, then an insert of each lane that differs."""
        acc = self.add(vector.BroadcastOp(parts[0], t))
        for i, p in enumerate(parts[1:], 1):
            if p is not parts[0]:  # a splat is the broadcast alone
                acc = self.add(vector.InsertOp(p, acc, [i], t))
        return acc

MLIR_ROWS: dict[OpDef, Row] = {
    **NO_VALUE_ROWS,
    **CPU_REFUSES,
    **rows(C.ALU_OPS, _Func.alu_op),
    C.CONST: _Func.const_op, C.CAST: _Func.cast_op, C.BITCAST: _Func.bitcast_op, C.GEP: _Func.gep_op,
    C.VECTORIZE: _Func.vectorize_op,
    K.PARAM: _Func.param, K.VAR: _Func.var, K.REGISTER: _Func.scratch, K.LOCAL: _Func.scratch,
    K.INDEX: _Func.index_op, K.LOAD: _Func.load, K.STORE: _Func.store,
    D.LOOP: _Func.open_loop, D.ENDLOOP: _Func.end, D.IF: _Func.if_, D.ENDIF: _Func.end, D.ACC: _Func.acc,
    D.ACCSTORE: _Func.accstore, D.SPECIAL: _Func.special, D.FMA: _Func.fma_op,
}


# ---- entry points ----------------------------------------------------------------------------------------------------
def _unique(names: list[str]) -> list[str]:
    """The names with `_1`, `_2`, ... added where one repeats, never taking a name another program has or got."""
    taken, out = set(names), []
    used: set[str] = set()
    for n in names:
        cand, k = n, 0
        while cand in used or (cand != n and cand in taken):
            k += 1
            cand = f"{n}_{k}"
        used.add(cand)
        out.append(cand)
    return out


def export_function(program: UOp, name: str | None = None) -> func.FuncOp:
    """One device.program as a func.func (named `name`, or the program's name made an identifier)."""
    return _Func(program, name).build()


def export_module(root: UOp) -> ModuleOp:
    """Every device.program of the graph (nested regions included), each as a func.func, in one builtin.module,
    checked by xDSL's verifier. A graph with no device.program is a located error."""
    progs = require_programs(root, "emit-mlir", "c")
    names = _unique([kernel_signature(p).name for p in progs])
    module = ModuleOp([export_function(p, n) for p, n in zip(progs, names, strict=True)])
    try:
        module.verify()
    except VerifyException as e:  # a defect of the exporter, reported at the program
        raise IRError(diagnostics=[diag_at(progs[0], f"the exported MLIR does not verify: {e}")]) from None
    return module


def print_module(module: ModuleOp, generic: bool = False) -> str:
    """xDSL's text of a module: the pretty form by default (mlir-opt 19 parses both)."""
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    text = out.getvalue()
    return text if text.endswith("\n") else text + "\n"


def export_text(root: UOp, generic: bool = False) -> str:
    """export_module's module as MLIR text (pretty form unless generic)."""
    return print_module(export_module(root), generic)

