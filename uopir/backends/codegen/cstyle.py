"""The C-style renderer: what C, OpenCL C and CUDA C share, each language a `Language` value and a table of rows.

`CStyleRenderer` is the public base class: `walk` (uopir.backends.codegen.walk) runs the program through the
renderer's table, whose shared rows are here (`CSTYLE_ROWS`: constants, pointers, loads and stores, loops and ifs,
accumulators, casts, the ALU); a language adds the rows it spells its own way (C on a cpu: ids as loops over the rest
of the program and heap scratch, uopir.backends.c.renderer; OpenCL C and CUDA C: hardware ids, local memory and
barriers, uopir.backends.gpu.renderer) and frames the function. How values are written is in the C renderer's
docstring (uopir.backends.c.renderer): a typed local per value assigned where the program computes it, constants,
parameters, variables, pointers, `core.gep` and `core.vectorize` as expressions used in place, a value read after its
block has closed declared at the function's top, f32/f64 vectors in native vector types where the language has them
(`Language.vector_ok`; with GCC/clang vector extensions integer and bool vectors too: uopir.backends.codegen.cvector)
and lane by lane otherwise.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from uopir.backends.codegen.clanes import NATIVE_VECTOR, Exprs, Lanes, literal
from uopir.backends.codegen.cprelude import Helper, bitcast_helper, int_vector_ok, mask_type, vector_max
from uopir.backends.codegen.cprelude import vector_ok as c_vector_ok
from uopir.backends.codegen.cvector import vector_alu, vector_bitcast, vector_cast
from uopir.backends.codegen.names import c_comment, c_ident
from uopir.backends.codegen.program import KernelSignature, check_const, op_error
from uopir.backends.codegen.walk import NO_VALUE_ROWS, Row, Table, Writer, rows, walk
from uopir.backends.interface import Renderer
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import OpDef
from uopir.ir.uop import UOp

__all__ = ["Language", "CStyleRenderer", "CEmitter", "CPtr", "CSTYLE_ROWS"]


def _no_header(text: str) -> str:
    return ""


@dataclass(frozen=True)
class Language:
    """How one C dialect spells what differs between them (C itself: uopir.backends.c.renderer.C_LANGUAGE; the gpu
    fields are described in uopir.backends.gpu.renderer)."""

    name: str  # the language name of its device.source (`c`, `opencl`, `cuda`)
    title: str  # the backend's name in messages (`C`, `OpenCL`, `CUDA`)
    kernel_head: str = "void"  # before the kernel's name: `__kernel void`
    buffer: str = "{t}* {name}"  # a buffer parameter, `{t}` its element type and `{name}` its name
    var_type: str = "int64_t"  # a kernel.var parameter's type (64-bit)
    ids: Mapping[str, str] = field(default_factory=dict)  # special kind -> expression with `{dim}` or `{xyz}`
    local: str = ""  # a local-memory array at the kernel's top: `__local {t} {name}[{n}];`
    barrier: str = ""  # a workgroup barrier statement
    header: Callable[[str], str] = _no_header  # the rendered kernel text -> the lines that replace the C headers
    helper_qualifier: str = "static inline"  # what `static inline` of a prelude helper becomes
    helpers: Mapping[str, Helper] = field(default_factory=dict)  # prelude helpers written for this dialect
    bool_buffer: str = "bool"  # element type of a bool buffer parameter
    # lane counts of the f32/f64 vectors held in native vector types (None: every one the C prelude takes, as GCC
    # vector types; (): every vector is rendered lane by lane)
    vector_lanes: tuple[int, ...] | None = ()
    # GCC/clang vector extensions (C on a cpu): integer vectors too, bool vectors as compare masks, selects,
    # shifts, casts and bitcasts as vector code, and ops wider than 64 bytes in 64-byte pieces
    gnu_vectors: bool = False
    # a program's or variable's name as an identifier of the dialect (uopir.backends.codegen.names)
    ident: Callable[[str], str] = c_ident

    def special(self, kind: str, dim: int) -> str:
        return self.ids[kind].format(dim=dim, xyz="xyz"[dim])

    def vector_ok(self, d: DType) -> bool:
        """Whether a vector value lives in one of the language's vector types (else lane by lane)."""
        return (self.vector_lanes is None or d.count in self.vector_lanes) and c_vector_ok(d)

    def any_vector_ok(self, d: DType) -> bool:
        """Whether a vector value lives in a vector type, integers included where the language has them."""
        return self.vector_ok(d) or (self.gnu_vectors and int_vector_ok(d))


class CPtr:
    """A pointer value: the C base pointer, an element offset expression and an optional gate expression."""

    __slots__ = ("base", "off", "gate", "dtype")

    def __init__(self, base: str, off: str, gate: str | None, dtype: DType):
        self.base, self.off, self.gate, self.dtype = base, off, gate, dtype

    def at(self, lane: int) -> str:
        off = self.off if lane == 0 else f"{self.off} + {lane}"
        return f"{self.base}[{off}]"


class CEmitter(Exprs, Writer):
    """One rendering: the helpers used, the statements, the value of every op."""

    pointer = CPtr

    def __init__(self, lang: Language, restrict: bool = True):
        Exprs.__init__(self, shuffles=lang.gnu_vectors)
        Writer.__init__(self)
        self.lang, self.restrict = lang, restrict
        self.who = f"the {lang.title} backend"
        self.lines: list[str] = []
        self.depth = 1
        self.counter = {"v": 0, "acc": 0, "ridx": 0, "reg": 0}
        self.hoisted: list[str] = []
        self.ids: list[str] = []  # the ids opened so far (on a cpu: loops; the first one is split across cores)
        self.id_dims: set[int] = set()  # their dims
        self.cleanup: list[str] = []  # statements at the function's end (freeing heap scratch buffers)
        self.masks: set[str] = set()  # vector variables holding bool vectors as masks (codegen.cvector)

    # names and statements
    def fresh(self, kind: str) -> str:
        n = self.counter[kind]
        self.counter[kind] = n + 1
        return f"{kind}{n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    # values
    def lanes(self, u: UOp) -> Lanes:
        v = self.value(u)
        assert isinstance(v, Lanes)
        return v

    def scalar(self, u: UOp) -> str:
        return self.lanes(u).lane(0)

    def ptr(self, u: UOp) -> CPtr:
        p = self.vals.get(u)
        if not isinstance(p, CPtr):
            raise op_error(u, f"expected a pointer, got {u.op.name} : {u.dtype}")
        return p

    def define(self, u: UOp, exprs: list[str], escapes: bool, kind: str = "v", const: bool = True) -> list[str]:
        """Statements assigning each lane to a fresh local; hoisted to the function top when the value escapes."""
        t = self.ctype(u.dtype.scalar)
        base = self.fresh(kind)
        names = [base] if len(exprs) == 1 else [f"{base}_{i}" for i in range(len(exprs))]
        for name, e in zip(names, exprs, strict=True):
            if escapes:
                self.hoisted.append(f"{t} {name};")
                self.emit(f"{name} = {e};")
            else:
                self.emit(f"{'const ' if const else ''}{t} {name} = {e};")
        return names

    def set(self, u: UOp, exprs: list[str], escapes: bool) -> None:
        self.vals[u] = Lanes(self.define(u, exprs, escapes))

    def set_vector(self, u: UOp, expr: str, escapes: bool, kind: str = "v", const: bool = True) -> None:
        """A local of u's vector type assigned `expr` (hoisted to the function top when the value escapes)."""
        name = self.vector_local(self.vtype(u.dtype), expr, escapes, kind, const)
        self.vals[u] = Lanes.of_vector(name, u.dtype.count)

    def vector_local(self, t: str, expr: str, escapes: bool, kind: str = "v", const: bool = True) -> str:
        """A fresh local of C vector type t assigned `expr` (hoisted when it escapes); returns its name."""
        name = self.fresh(kind)
        if escapes:
            self.hoisted.append(f"{t} {name};")
            self.emit(f"{name} = {expr};")
        else:
            self.emit(f"{'const ' if const else ''}{t} {name} = {expr};")
        self.vec_types[name] = t
        return name

    def scratch(self, u: UOp) -> None:
        """A zeroed stack array (kernel.register, a small kernel.local)."""
        name = self.fresh("reg")
        self.hoisted.append(f"{self.ctype(u.dtype.base)} {name}[{max(u.dtype.size, 1)}] = {{0}};")
        self.vals[u] = CPtr(name, "0", None, u.dtype)


# ---- the rows every C dialect shares ---------------------------------------------------------------------------------
def _const(em: CEmitter, u: UOp, escapes: bool) -> None:
    check_const(u)
    lanes = u.arg if u.dtype.count > 1 and type(u.arg) is tuple else (u.arg,) * u.dtype.count
    em.vals[u] = Lanes([literal(u.dtype.scalar, v, em.use) for v in lanes])


def _param(em: CEmitter, u: UOp, escapes: bool) -> None:
    em.vals[u] = CPtr(f"data{u.arg}", "0", None, u.dtype)


def _var(em: CEmitter, u: UOp, escapes: bool) -> None:
    em.vals[u] = Lanes([em.lang.ident(u.attrs.name)])


def _register(em: CEmitter, u: UOp, escapes: bool) -> None:
    em.scratch(u)


def _index(em: CEmitter, u: UOp, escapes: bool) -> None:
    ops = u.operands
    p = em.vals[ops.ptr]
    assert isinstance(p, CPtr)
    off = em.scalar(ops.offset)
    if p.off != "0":
        off = f"{p.off} + {off}"
    gate = p.gate
    if (own := ops.gate) is not None:
        g = em.scalar(own)
        gate = g if gate is None else f"{gate} && {g}"
    em.vals[u] = CPtr(p.base, off, gate, u.dtype)


def _gep(em: CEmitter, u: UOp, escapes: bool) -> None:
    src = em.lanes(u.operands.x)
    idx = u.attrs.idx
    em.vals[u] = Lanes([src.lane(i) for i in idx], None,
                       None if src.src is None else [src.lane_src(i) for i in idx])


def _vectorize(em: CEmitter, u: UOp, escapes: bool) -> None:
    lanes = [em.lanes(s) for s in u.src]
    em.vals[u] = Lanes([x.lane(0) for x in lanes], None, [x.lane_src(0) for x in lanes])


def _loop(em: CEmitter, u: UOp, escapes: bool) -> None:
    end = em.scalar(u.operands.end)
    name = em.fresh("ridx")
    em.emit(f"for (int64_t {name} = 0; {name} < {end}; {name}++) {{")
    em.depth += 1
    em.open(u)
    em.vals[u] = Lanes([name])


def _if(em: CEmitter, u: UOp, escapes: bool) -> None:
    em.emit(f"if ({em.scalar(u.operands.cond)}) {{")
    em.depth += 1
    em.open(u)


def _end(em: CEmitter, u: UOp, escapes: bool) -> None:
    em.close(u)
    em.depth -= 1
    em.emit("}")


def _acc(em: CEmitter, u: UOp, escapes: bool) -> None:
    init = em.lanes(u.operands.init)
    if em.lang.any_vector_ok(u.dtype):
        em.set_vector(u, em.pack(init, u.dtype), escapes, kind="acc", const=False)
        return
    names = em.define(u, [init.lane(i) for i in range(u.dtype.count)], escapes, kind="acc", const=False)
    em.vals[u] = Lanes(names)


def _accstore(em: CEmitter, u: UOp, escapes: bool) -> None:
    ops = u.operands
    acc, val = em.vals[ops.acc], em.lanes(ops.value)
    assert isinstance(acc, Lanes)
    if acc.vec is not None:
        em.emit(f"{acc.vec} = {em.pack(val, ops.acc.dtype)};")
    else:
        for i, name in enumerate(acc.exprs):
            em.emit(f"{name} = {val.lane(i)};")
    em.vals[u] = acc


def _cast(em: CEmitter, u: UOp, escapes: bool) -> None:
    x = u.operands.x
    if em.lang.gnu_vectors and vector_cast(em, u, escapes):
        return
    src, s, d = em.lanes(x), x.dtype.scalar, u.dtype.scalar
    em.set(u, [em.cast(s, d, src.lane(i)) for i in range(u.dtype.count)], escapes)


def _alu(em: CEmitter, u: UOp, escapes: bool) -> None:
    op = u.op
    srcs = [em.lanes(s) for s in u.src]
    if em.lang.gnu_vectors and u.dtype.count > 1 and vector_alu(em, u, srcs, escapes):
        return
    if op.name in NATIVE_VECTOR and em.lang.vector_ok(u.dtype):
        a = [em.pack(x, u.dtype) for x in srcs]
        em.set_vector(u, NATIVE_VECTOR[op.name].format(*a), escapes)
        return
    if op is C.MAX and em.lang.vector_ok(u.dtype):
        em.vtype(u.dtype)
        hname, helper = vector_max(u.dtype)
        em.use(hname, helper)
        if em.helpers[hname] is helper:  # the C prelude's (not a language's own): its mask type too
            em.vtype(mask_type(u.dtype.scalar.itemsize * 8, u.dtype.count))
        em.set_vector(u, f"{hname}({em.pack(srcs[0], u.dtype)}, {em.pack(srcs[1], u.dtype)})", escapes)
        return
    em.set(u, [em.alu(u, [s.lane(i) for s in srcs]) for i in range(u.dtype.count)], escapes)


def _gate(em: CEmitter, u: UOp, p: CPtr) -> str | None:
    """The pointer's gate and the access's own (a load's or store's third operand), joined."""
    gate = p.gate
    if (own := u.operands.gate) is not None:
        g = em.scalar(own)
        gate = g if gate is None else f"{gate} && {g}"
    return gate


def _load(em: CEmitter, u: UOp, escapes: bool) -> None:
    ops = u.operands
    p = em.ptr(ops.ptr)
    gate = _gate(em, u, p)
    n = u.dtype.count
    if em.lang.any_vector_ok(u.dtype):
        t = em.vtype(u.dtype)
        ld = f"load_{t}(&{p.at(0)})"
        if gate is not None:
            alt = em.lanes(ops.alt) if ops.alt is not None else Lanes([literal(u.dtype.scalar, 0, em.use)])
            ld = f"{gate} ? {ld} : {em.pack(alt, u.dtype)}"
        em.set_vector(u, ld, escapes)
        return
    if gate is None:
        # a bf16 carrier is rounded when read (the semantics): a buffer filled from outside may hold any f32
        em.set(u, [em.down(p.at(i), u.dtype) if u.dtype.scalar is dtypes.bfloat16 else p.at(i) for i in range(n)],
               escapes)
        return
    alt = em.lanes(ops.alt) if ops.alt is not None else Lanes([literal(u.dtype.scalar, 0, em.use)])
    # Branch free: read element 0 where the gate is off (every buffer has one: the runtime passes a scratch
    # element for an empty one), then select. A conditional load per gate would be a branch, which blocks
    # vectorization and makes GCC superlinearly slow on kernels with hundreds of them.
    g = gate
    if n > 1 or " " in gate:
        g = em.fresh("v")
        em.emit(f"const bool {g} = {gate};")
    raw = []
    for i in range(n):
        name = em.fresh("v")
        em.emit(f"const {em.ctype(u.dtype.scalar)} {name} = {p.base}[{g} ? {p.off} + {i} : 0];" if i else
                f"const {em.ctype(u.dtype.scalar)} {name} = {p.base}[{g} ? {p.off} : 0];")
        raw.append(em.down(name, u.dtype) if u.dtype.scalar is dtypes.bfloat16 else name)
    em.set(u, [f"{g} ? {raw[i]} : {alt.lane(i)}" for i in range(n)], escapes)


def _store(em: CEmitter, u: UOp, escapes: bool) -> None:
    ops = u.operands
    p = em.ptr(ops.ptr)
    val = em.lanes(ops.value)
    gate = _gate(em, u, p)
    d = ops.value.dtype
    if em.lang.any_vector_ok(d):
        stmts = [f"store_{em.vtype(d)}(&{p.at(0)}, {em.pack(val, d)});"]
    else:
        stmts = [f"{p.at(i)} = {val.lane(i)};" for i in range(d.count)]
    if gate is None:
        for s in stmts:
            em.emit(s)
    else:
        em.emit(f"if ({gate}) {{ {' '.join(stmts)} }}")


def _bitcast(em: CEmitter, u: UOp, escapes: bool) -> None:
    x = u.operands.x
    if em.lang.gnu_vectors and vector_bitcast(em, u, escapes):
        return
    s, d = x.dtype, u.dtype
    src = em.lanes(x)
    if s.count == d.count:  # lane by lane (bf16 rides as a float carrier, so memcpy of the lanes would be wrong)
        ss, ds = s.scalar, d.scalar
        if ss is ds:
            em.vals[u] = src
            return
        hname, helper = bitcast_helper(ss, ds)
        em.ctype(ss)
        em.ctype(ds)
        em.use(hname, helper)
        em.set(u, [f"{hname}({src.lane(i)})" for i in range(s.count)], escapes)
        return
    if dtypes.bfloat16 in (s.scalar, d.scalar):
        raise op_error(u, "the C backend does not bitcast vectors of bf16 to a different lane count")
    em.use("f32_bits")  # string.h for memcpy
    tmp = em.fresh("v")
    em.emit(f"{em.ctype(s.scalar)} {tmp}[{s.count}] = {{{', '.join(src.lane(i) for i in range(s.count))}}};")
    out = em.fresh("v")
    em.emit(f"{em.ctype(d.scalar)} {out}[{d.count}];")
    em.emit(f"memcpy({out}, {tmp}, sizeof {out});")
    em.set(u, [f"{out}[{i}]" for i in range(d.count)], escapes)


CSTYLE_ROWS: dict[OpDef, Row] = {
    **NO_VALUE_ROWS,
    **rows(C.ALU_OPS, _alu),
    C.CONST: _const, C.CAST: _cast, C.BITCAST: _bitcast, C.GEP: _gep, C.VECTORIZE: _vectorize,
    K.PARAM: _param, K.VAR: _var, K.REGISTER: _register, K.INDEX: _index, K.LOAD: _load, K.STORE: _store,
    D.LOOP: _loop, D.ENDLOOP: _end, D.IF: _if, D.ENDIF: _end, D.ACC: _acc, D.ACCSTORE: _accstore,
}


class CStyleRenderer(Renderer):
    """The base of the C-style renderers: a language, its table (`rows`: CSTYLE_ROWS and the language's own) and
    the walk; a subclass frames the rendered statements as a function of its language (`render`)."""

    rows: ClassVar[Table] = CSTYLE_ROWS

    def __init__(self, lang: Language, restrict: bool = True):
        self.lang, self.restrict = lang, restrict
        self.language, self.title = lang.name, lang.title
        self.ident = lang.ident

    def emitter(self) -> CEmitter:
        """A fresh rendering state (a language may return its own subclass)."""
        return CEmitter(self.lang, self.restrict)

    def walk(self, em: CEmitter, program: UOp) -> None:
        """Render the program's ops in execution order into em (statements, helpers, values)."""
        walk(program, self.rows, em)

    def renamed(self, program: UOp, sig: KernelSignature) -> str:
        """A comment line for each name the kernel could not keep (the program's, a variable's), saying what it was."""
        names = ((n, self.ident(n)) for n in (program.arg, *sig.vars))
        return "".join(f"/* {c_comment(old)} is {new} here */\n" for old, new in names if new != old)
