"""The C renderer: one linearized `device.program` -> one C function (plus the prelude helpers it uses).

The program's operands are its ops in execution order (what device-linearize makes). The renderer walks them once:
`device.loop`/`device.endloop` and `device.if`/`device.endif` open and close C blocks, every other value becomes a
typed local assigned where the program computes it, so loads, stores and accumulator updates happen in exactly the
program's order. Constants, parameters, variables, pointers (`kernel.index`), `core.gep` and `core.vectorize` have no
statement of their own: they are expressions used in place. An accumulator (`device.acc`) is a variable declared
where the program declares it; reading it, or the result of a `device.accstore`, reads its current value.

Vectors of f32/f64 (2..64 bytes) live in GCC/clang vector types (`f32x16`): loads and stores through memcpy (any
alignment), accumulators, add/sub/mul/div/neg/mulacc and max as vector code, each lane rounded exactly as the scalar
op. Other vectors, and the other ops on them, are rendered lane by lane (one scalar local per lane, `v[i]` to read a
lane of a vector type). A value used after the block that computes it has closed is declared at the top of the
function and assigned in place (it keeps the value of the last iteration, as in the program).

A global id (`device.special {kind = global_id}`, what kernel-optimize's `global` axis becomes) is a loop over the
rest of the program; the first one is split across cores: the function takes `core_id, core_count` and runs its
contiguous share of the ids (see runtime.py). Local ids (workgroups) are an error on a cpu.

Function signature: `void NAME(T0* restrict data0, ..., int64_t var..., [int64_t core_id, int64_t core_count])`:
the `kernel.param` pointers in index order, then the `kernel.var` values in name order (`kernel_signature`). NAME and
the variables' parameters are the names of the IR made identifiers by uopir.backends.codegen.names (a comment above
the function says what a changed name was). Ops that C on a cpu cannot run (local ids, barriers, tensor cores, local
memory) are located errors.
"""
from __future__ import annotations

from uopir.backends.c.lanes import NATIVE_VECTOR, Exprs, Lanes, literal
from uopir.backends.c.prelude import Helper, bitcast_helper, prelude, vector_max, vector_ok
from uopir.backends.codegen.names import c_comment, c_ident
from uopir.backends.cpu.program import (
    NO_VALUE,
    STACK_SCRATCH,
    KernelSignature,
    check_all_closed,
    check_closes,
    check_const,
    check_special,
    check_supported,
    computed,
    escaping,
    op_error,
    schedule,
)
from uopir.backends.cpu.program import kernel_signature as _signature
from uopir.backends.interface import Renderer
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["CRenderer", "CEmitter", "CPtr", "KernelSignature", "kernel_signature"]


def kernel_signature(program: UOp, backend: str = "C") -> KernelSignature:
    """How the C function of `program` is called; its name is the program's through c_ident."""
    return _signature(program, c_ident, backend)


class CPtr:
    """A pointer value: the C base pointer, an element offset expression and an optional gate expression."""

    __slots__ = ("base", "off", "gate", "dtype")

    def __init__(self, base: str, off: str, gate: str | None, dtype: DType):
        self.base, self.off, self.gate, self.dtype = base, off, gate, dtype

    def at(self, lane: int) -> str:
        off = self.off if lane == 0 else f"{self.off} + {lane}"
        return f"{self.base}[{off}]"


class CEmitter(Exprs):
    """One rendering: the helpers used, the statements, the value of every op."""

    def __init__(self, restrict: bool):
        super().__init__()
        self.restrict = restrict
        self.lines: list[str] = []
        self.depth = 1
        self.vals: dict[UOp, Lanes | CPtr] = {}
        self.counter = {"v": 0, "acc": 0, "ridx": 0, "reg": 0}
        self.hoisted: list[str] = []
        self.ids: list[str] = []  # the loops of global ids opened so far (the first one is split across cores)
        self.id_dims: set[int] = set()  # their dims
        self.cleanup: list[str] = []  # statements at the function's end (freeing heap scratch buffers)

    # names and statements
    def fresh(self, kind: str) -> str:
        n = self.counter[kind]
        self.counter[kind] = n + 1
        return f"{kind}{n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)


# GCC is superlinear in a function's size, mostly in register allocation once many values are live (an unrolled
# kernel's lanes). A kernel over HUGE_KERNEL statements is compiled at -O1 with one-region IRA (HUGE_PRAGMA): the
# 9,380-statement max-pool backward kernel of a small CNN compiles in 3.7 s instead of 9.3 s (-O1) / 11.8 s (-O2) and
# runs as fast as at -O2 (14-15 ms CPU); at -O0 (1.4 s) it ran 134 ms, 6-20x slower than the LLVM tier 0 it replaces
# (uopir.backends.c.tiered). Over GIANT_KERNEL statements, -O0 (GCC took minutes on such kernels).
HUGE_KERNEL = 2000
HUGE_PRAGMA = '#pragma GCC optimize ("O1", "ira-region=one")'
GIANT_KERNEL = 20000


class CRenderer(Renderer):
    """device.program -> C source text. `restrict=False` renders the variant for buffers that alias each other."""

    language = "c"
    title = "C"  # the backend's name in error messages
    vector_ok = staticmethod(vector_ok)  # which vector dtypes live in native vector types (C: GCC vector types)
    ident = staticmethod(c_ident)  # a program's or variable's name as an identifier of the language

    def __init__(self, restrict: bool = True):
        self.restrict = restrict

    def render(self, program: UOp) -> str:
        sig = kernel_signature(program, self.title)
        em = self.emitter()
        self.walk(em, program)
        args = []
        for i, d in enumerate(sig.params):
            if d is None:
                args.append(f"void* unused{i}")
            else:
                args.append(f"{em.ctype(d)}* {'restrict ' if self.restrict else ''}data{i}")
        args.extend(f"int64_t {self.ident(v)}" for v in sig.vars)
        if sig.parallel:
            args.extend(("int64_t core_id", "int64_t core_count"))
        while em.depth > 1:  # the loops of global ids span the rest of the program
            em.depth -= 1
            em.emit("}")
        for line in em.cleanup:
            em.emit(line)
        head = prelude(em.helpers)
        if len(em.lines) > GIANT_KERNEL:
            head += (f"/* {len(em.lines)} statements: compiled without optimization (GCC's passes take minutes on "
                     f"functions this large) */\n#pragma GCC optimize (\"O0\")\n")
        elif len(em.lines) > HUGE_KERNEL:
            head += (f"/* {len(em.lines)} statements: -O1 with one-region register allocation (GCC is superlinear "
                     f"in a function's size) */\n{HUGE_PRAGMA}\n")
        body = [*("  " + h for h in em.hoisted), *em.lines]
        return f"{head}\n{self.renamed(program, sig)}void {sig.name}({', '.join(args) or 'void'}) {{\n" \
            + "\n".join(body) + ("\n" if body else "") + "}\n"

    def renamed(self, program: UOp, sig: KernelSignature) -> str:
        """A comment line for each name the kernel could not keep (the program's, a variable's), saying what it was."""
        names = ((n, self.ident(n)) for n in (program.arg, *sig.vars))
        return "".join(f"/* {c_comment(old)} is {new} here */\n" for old, new in names if new != old)

    def emitter(self) -> CEmitter:
        """A fresh rendering state (a C-style renderer for another language returns its own subclass)."""
        return CEmitter(self.restrict)

    def walk(self, em: CEmitter, program: UOp) -> None:
        """Render the program's ops in execution order into em (statements, helpers, values)."""
        order = schedule(program)
        escapes = escaping(order)
        open_blocks: list[UOp] = []
        for u in order:
            self._op(em, u, u in escapes, open_blocks)
        check_all_closed(open_blocks[-1] if open_blocks else None)

    # each op: its value (an expression or lanes) and its statements
    def _op(self, em: CEmitter, u: UOp, escapes: bool, blocks: list[UOp]) -> None:
        op = u.op
        check_supported(u, f"the {self.title} backend")
        if op is C.CONST:
            check_const(u)
            lanes = u.arg if u.dtype.count > 1 and type(u.arg) is tuple else (u.arg,) * u.dtype.count
            em.vals[u] = Lanes([literal(u.dtype.scalar, v, em.use) for v in lanes])
        elif op is K.PARAM:
            em.vals[u] = CPtr(f"data{u.arg}", "0", None, u.dtype)
        elif op is K.VAR:
            em.vals[u] = Lanes([self.ident(u.arg[0])])
        elif op is K.REGISTER or (op is K.LOCAL and u.dtype.size * u.dtype.base.itemsize <= STACK_SCRATCH):
            name = em.fresh("reg")
            em.hoisted.append(f"{em.ctype(u.dtype.base)} {name}[{max(u.dtype.size, 1)}] = {{0}};")
            em.vals[u] = CPtr(name, "0", None, u.dtype)
        elif op is K.LOCAL:  # a large scratch buffer (kernel-optimize's packed panels): zeroed heap memory per call
            name, t = em.fresh("reg"), em.ctype(u.dtype.base)
            em.use("stdlib", Helper("", includes=("stdlib.h",)))
            em.hoisted.append(f"{t}* {name} = ({t}*)calloc({u.dtype.size}, sizeof({t}));")
            em.hoisted.append(f"if (!{name}) abort();")
            em.cleanup.append(f"free({name});")
            em.vals[u] = CPtr(name, "0", None, u.dtype)
        elif op is K.INDEX:
            p = em.vals[u.src[0]]
            assert isinstance(p, CPtr)
            off = self._scalar(em, u.src[1])
            if p.off != "0":
                off = f"{p.off} + {off}"
            gate = p.gate
            if len(u.src) > 2:
                g = self._scalar(em, u.src[2])
                gate = g if gate is None else f"{gate} && {g}"
            em.vals[u] = CPtr(p.base, off, gate, u.dtype)
        elif op is C.GEP:
            src = self._lanes(em, u.src[0])
            em.vals[u] = Lanes([src.lane(i) for i in u.arg])
        elif op is C.VECTORIZE:
            em.vals[u] = Lanes([self._scalar(em, s) for s in u.src])
        elif op is K.LOAD:
            self._load(em, u, escapes)
        elif op is K.STORE:
            self._store(em, u)
        elif op is D.LOOP:
            end = self._scalar(em, u.src[0])
            name = em.fresh("ridx")
            em.emit(f"for (int64_t {name} = 0; {name} < {end}; {name}++) {{")
            em.depth += 1
            blocks.append(u)
            em.vals[u] = Lanes([name])
        elif op is D.SPECIAL:
            self._special(em, u, blocks)
        elif op is D.IF:
            em.emit(f"if ({self._scalar(em, u.src[0])}) {{")
            em.depth += 1
            blocks.append(u)
        elif op in (D.ENDLOOP, D.ENDIF):
            check_closes(u, blocks[-1] if blocks else None)
            blocks.pop()
            em.depth -= 1
            em.emit("}")
        elif op is D.ACC:
            init = self._lanes(em, u.src[0])
            if self.vector_ok(u.dtype):
                self._set_vector(em, u, em.pack(init, u.dtype), escapes, kind="acc", const=False)
                return
            names = self._define(em, u, [init.lane(i) for i in range(u.dtype.count)], escapes, kind="acc",
                                 const=False)
            em.vals[u] = Lanes(names)
        elif op is D.ACCSTORE:
            acc, val = em.vals[u.src[0]], self._lanes(em, u.src[1])
            assert isinstance(acc, Lanes)
            if acc.vec is not None:
                em.emit(f"{acc.vec} = {em.pack(val, u.src[0].dtype)};")
            else:
                for i, name in enumerate(acc.exprs):
                    em.emit(f"{name} = {val.lane(i)};")
            em.vals[u] = acc
        elif op is C.CAST:
            src = self._lanes(em, u.src[0])
            self._set(em, u, [em.cast(u, src.lane(i)) for i in range(u.dtype.count)], escapes)
        elif op is C.BITCAST:
            self._bitcast(em, u, escapes)
        elif op in C.ALU_OPS:
            srcs = [self._lanes(em, s) for s in u.src]
            if op.name in NATIVE_VECTOR and self.vector_ok(u.dtype):
                a = [em.pack(x, u.dtype) for x in srcs]
                self._set_vector(em, u, NATIVE_VECTOR[op.name].format(*a), escapes)
                return
            if op is C.MAX and self.vector_ok(u.dtype):
                em.vtype(u.dtype)
                hname, helper = vector_max(u.dtype)
                em.use(hname, helper)
                self._set_vector(em, u, f"{hname}({em.pack(srcs[0], u.dtype)}, {em.pack(srcs[1], u.dtype)})", escapes)
                return
            self._set(em, u, [em.alu(u, [s.lane(i) for s in srcs]) for i in range(u.dtype.count)], escapes)
        elif op in NO_VALUE:
            pass
        else:
            raise op_error(u, f"the {self.title} backend cannot render {op.name}")

    def _special(self, em: CEmitter, u: UOp, blocks: list[UOp]) -> None:
        """A global (or group) id on a cpu: a loop over the rest of the program. The first one in the program is
        split across cores: core `core_id` of `core_count` runs its contiguous share of the ids."""
        _, dim = check_special(u, f"the {self.title} backend", blocks[-1] if blocks else None, em.id_dims)
        size = self._scalar(em, u.src[0])
        name = f"gidx{dim}"
        em.ids.append(name)
        if len(em.ids) == 1:
            n = f"gsize{dim}"
            em.emit(f"const int64_t {n} = {size};")
            em.emit(f"for (int64_t {name} = {n} * core_id / core_count; {name} < {n} * (core_id + 1) / core_count; "
                    f"{name}++) {{")
        else:
            em.emit(f"for (int64_t {name} = 0; {name} < {size}; {name}++) {{")
        em.depth += 1
        em.vals[u] = Lanes([name])

    def _lanes(self, em: CEmitter, u: UOp) -> Lanes:
        v = computed(em.vals, u, CPtr)
        assert isinstance(v, Lanes)
        return v

    def _scalar(self, em: CEmitter, u: UOp) -> str:
        return self._lanes(em, u).lane(0)

    def _define(self, em: CEmitter, u: UOp, exprs: list[str], escapes: bool, kind: str = "v",
                const: bool = True) -> list[str]:
        """Statements assigning each lane to a fresh local; hoisted to the function top when the value escapes."""
        t = em.ctype(u.dtype.scalar)
        base = em.fresh(kind)
        names = [base] if len(exprs) == 1 else [f"{base}_{i}" for i in range(len(exprs))]
        for name, e in zip(names, exprs, strict=True):
            if escapes:
                em.hoisted.append(f"{t} {name};")
                em.emit(f"{name} = {e};")
            else:
                em.emit(f"{'const ' if const else ''}{t} {name} = {e};")
        return names

    def _set(self, em: CEmitter, u: UOp, exprs: list[str], escapes: bool) -> None:
        em.vals[u] = Lanes(self._define(em, u, exprs, escapes))

    def _set_vector(self, em: CEmitter, u: UOp, expr: str, escapes: bool, kind: str = "v",
                    const: bool = True) -> None:
        """A local of u's vector type assigned `expr` (hoisted to the function top when the value escapes)."""
        t = em.vtype(u.dtype)
        name = em.fresh(kind)
        if escapes:
            em.hoisted.append(f"{t} {name};")
            em.emit(f"{name} = {expr};")
        else:
            em.emit(f"{'const ' if const else ''}{t} {name} = {expr};")
        em.vals[u] = Lanes.of_vector(name, u.dtype.count)

    def _ptr(self, em: CEmitter, u: UOp) -> CPtr:
        p = em.vals.get(u)
        if not isinstance(p, CPtr):
            raise op_error(u, f"expected a pointer, got {u.op.name} : {u.dtype}")
        return p

    def _load(self, em: CEmitter, u: UOp, escapes: bool) -> None:
        p = self._ptr(em, u.src[0])
        gate = p.gate
        if len(u.src) == 3:
            g = self._scalar(em, u.src[2])
            gate = g if gate is None else f"{gate} && {g}"
        n = u.dtype.count
        if self.vector_ok(u.dtype):
            t = em.vtype(u.dtype)
            ld = f"load_{t}(&{p.at(0)})"
            if gate is not None:
                alt = self._lanes(em, u.src[1]) if len(u.src) == 3 else Lanes([literal(u.dtype.scalar, 0, em.use)])
                ld = f"{gate} ? {ld} : {em.pack(alt, u.dtype)}"
            self._set_vector(em, u, ld, escapes)
            return
        if gate is None:
            # a bf16 carrier is rounded when read (the semantics): a buffer filled from outside may hold any f32
            self._set(em, u, [em.down(p.at(i), u.dtype) if u.dtype.scalar is dtypes.bfloat16 else p.at(i)
                              for i in range(n)], escapes)
            return
        alt = self._lanes(em, u.src[1]) if len(u.src) == 3 else Lanes(
            [literal(u.dtype.scalar, 0, em.use)])
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
        self._set(em, u, [f"{g} ? {raw[i]} : {alt.lane(i)}" for i in range(n)], escapes)

    def _store(self, em: CEmitter, u: UOp) -> None:
        p = self._ptr(em, u.src[0])
        val = self._lanes(em, u.src[1])
        gate = p.gate
        if len(u.src) == 3:
            g = self._scalar(em, u.src[2])
            gate = g if gate is None else f"{gate} && {g}"
        d = u.src[1].dtype
        if self.vector_ok(d):
            stmts = [f"store_{em.vtype(d)}(&{p.at(0)}, {em.pack(val, d)});"]
        else:
            stmts = [f"{p.at(i)} = {val.lane(i)};" for i in range(d.count)]
        if gate is None:
            for s in stmts:
                em.emit(s)
        else:
            em.emit(f"if ({gate}) {{ {' '.join(stmts)} }}")

    def _bitcast(self, em: CEmitter, u: UOp, escapes: bool) -> None:
        s, d = u.src[0].dtype, u.dtype
        src = self._lanes(em, u.src[0])
        if s.count == d.count:  # lane by lane (bf16 rides as a float carrier, so memcpy of the lanes would be wrong)
            ss, ds = s.scalar, d.scalar
            if ss is ds:
                em.vals[u] = src
                return
            hname, helper = bitcast_helper(ss, ds)
            self.use_bitcast_types(em, ss, ds)
            em.use(hname, helper)
            self._set(em, u, [f"{hname}({src.lane(i)})" for i in range(s.count)], escapes)
            return
        if dtypes.bfloat16 in (s.scalar, d.scalar):
            raise op_error(u, "the C backend does not bitcast vectors of bf16 to a different lane count")
        em.use("f32_bits")  # string.h for memcpy
        tmp = em.fresh("v")
        em.emit(f"{em.ctype(s.scalar)} {tmp}[{s.count}] = {{{', '.join(src.lane(i) for i in range(s.count))}}};")
        out = em.fresh("v")
        em.emit(f"{em.ctype(d.scalar)} {out}[{d.count}];")
        em.emit(f"memcpy({out}, {tmp}, sizeof {out});")
        self._set(em, u, [f"{out}[{i}]" for i in range(d.count)], escapes)

    @staticmethod
    def use_bitcast_types(em: CEmitter, s: DType, d: DType) -> None:
        em.ctype(s)
        em.ctype(d)
