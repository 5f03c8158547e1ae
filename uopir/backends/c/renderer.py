"""The C renderer: one linearized `device.program` -> one C function (plus the prelude helpers it uses).

The program's operands are its ops in execution order (what device-linearize makes). The renderer walks them once:
`device.loop`/`device.endloop` and `device.if`/`device.endif` open and close C blocks, every other value becomes a
typed local assigned where the program computes it, so loads, stores and accumulator updates happen in exactly the
program's order. Constants, parameters, variables, pointers (`kernel.index`), `core.gep` and `core.vectorize` have no
statement of their own: they are expressions used in place. An accumulator (`device.acc`) is a variable declared
where the program declares it; reading it, or the result of a `device.accstore`, reads its current value.

Vector values are rendered lane by lane (one scalar local per lane): plain portable C that the compiler's SLP
vectorizer turns back into vector code. A value used after the block that computes it has closed is declared at the
top of the function and assigned in place (it keeps the value of the last iteration, as in the program).

Function signature: `void NAME(T0* restrict data0, ..., int64_t var...)`: the `kernel.param` pointers in index order,
then the `kernel.var` values in name order (`kernel_signature`). Ops that C on a cpu cannot run (thread ids,
barriers, tensor cores, local memory) are located errors.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uopir.backends.c.prelude import (
    HELPERS,
    Helper,
    bitcast_helper,
    ctype,
    float_helper,
    int_helper,
    prelude,
    vector_max,
    vector_ok,
    vector_type,
)
from uopir.backends.interface import Renderer
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import const_array
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

__all__ = ["CRenderer", "KernelSignature", "kernel_signature", "c_name"]

_IDENT = re.compile(r"[^A-Za-z0-9_]")
_C_KEYWORDS = frozenset((
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "bool true false half bf16").split())


def c_name(name: str, prefix: str = "k_") -> str:
    """`name` as a C identifier: other characters become '_', a leading digit or a keyword gets `prefix`."""
    s = _IDENT.sub("_", name) or "_"
    return prefix + s if s[0].isdigit() or s in _C_KEYWORDS else s


_OUR_NAMES = re.compile(r"(data|unused|v|acc|ridx|reg)[0-9][0-9_]*"  # our locals and parameters
                        r"|[a-z0-9]+_(f16|f32|f64|bf16|bits|odd|round|sticky)\w*")  # prelude helpers


def _unclashed(name: str, prefix: str) -> str:
    """`name` as a C identifier that cannot clash with a local or a prelude helper of ours."""
    s = c_name(name, prefix)
    return prefix + s if _OUR_NAMES.fullmatch(s) or s.startswith(("idiv_", "mod_", "f2i_", "max_", "bitcast_")) \
        else s


def var_name(name: str) -> str:
    """The C parameter of a kernel.var: its name (made an identifier, `var_` in front if it could clash)."""
    return _unclashed(name, "var_")


def _error(u: UOp, msg: str) -> IRError:
    return IRError(diagnostics=[diag_at(u, msg)])


@dataclass(frozen=True)
class KernelSignature:
    """How a rendered kernel is called: its name, pointer parameters (dtype per index; None where no kernel.param
    has that index), scalar variables (by name, in argument order), and whether it takes `core_id, core_count`
    last (a kernel with a global id: each core runs its share of the ids)."""

    name: str
    params: tuple[DType | None, ...]
    vars: tuple[str, ...]
    parallel: bool = False


def kernel_signature(program: UOp) -> KernelSignature:
    if program.op is not D.PROGRAM:
        raise _error(program, f"the C backend renders a device.program, got {program.op.name}")
    params: dict[int, DType] = {}
    names: set[str] = set()
    parallel = False
    for u in program.toposort():
        if u.op is K.PARAM:
            params[u.arg] = u.dtype.base
        elif u.op is K.VAR:
            names.add(u.arg[0])
        elif u.op is D.SPECIAL:
            parallel = True
    n = max(params) + 1 if params else 0
    return KernelSignature(_unclashed(program.arg, "k_"), tuple(params.get(i) for i in range(n)), tuple(sorted(names)),
                           parallel)


# ---- literals --------------------------------------------------------------------------------------------------------
def _literal(d: DType, v: object, use: Callable[[str], None]) -> str:
    """A C literal of scalar dtype d holding the const value v exactly (through the semantics' carrier)."""
    x = const_array(d, v).reshape(-1)[0]
    if d is dtypes.bool:
        return "true" if bool(x) else "false"
    if d is dtypes.float16:
        return f"(half)0x{int(np.asarray(x).view(np.uint16)):04x}"
    if d.is_float:
        f = float(x)
        if math.isnan(f):
            use("math")
            return "NAN"
        if math.isinf(f):
            use("math")
            return "INFINITY" if f > 0 else "(-INFINITY)"
        text = repr(f) + ("" if d is dtypes.float64 else "f")
        return f"({text})" if text.startswith("-") else text
    i = int(x)
    bits = d.itemsize * 8
    if d.kind in ("int", "index"):
        if i == -(1 << (bits - 1)):
            return f"INT{bits}_MIN"
        text = f"{i}ll" if bits == 64 else str(i)
        return f"({text})" if i < 0 else text
    return f"{i}ull" if bits == 64 else f"{i}u"


# ---- ALU and casts on one lane ---------------------------------------------------------------------------------------
_FLOAT_FN = {"core.exp2": "exp2", "core.log2": "log2", "core.sin": "sin", "core.sqrt": "sqrt", "core.trunc": "trunc",
             "core.mod": "fmod"}
_CMP = {"core.cmplt": "<", "core.cmpne": "!=", "core.cmpeq": "=="}
# ops computed on whole vectors (vector_ok dtypes): exactly the scalar op on each lane, rounded once per lane
_NATIVE_VECTOR = {"core.add": "{0} + {1}", "core.sub": "{0} - {1}", "core.mul": "{0} * {1}", "core.fdiv": "{0} / {1}",
                  "core.neg": "-{0}", "core.mulacc": "{0} * {1} + {2}"}
_ARITH = {"core.add": "+", "core.sub": "-", "core.mul": "*", "core.fdiv": "/", "core.and": "&", "core.or": "|",
          "core.xor": "^"}


class _Lanes:
    """The C expressions of one value, one per lane (a scalar has one); `vec` names the vector variable holding
    them all when the value lives in a native vector type (its lanes are then `vec[i]`)."""

    __slots__ = ("exprs", "vec")

    def __init__(self, exprs: list[str], vec: str | None = None):
        self.exprs, self.vec = exprs, vec

    @staticmethod
    def of_vector(name: str, n: int) -> _Lanes:
        return _Lanes([f"{name}[{i}]" for i in range(n)], name)

    def lane(self, i: int) -> str:
        return self.exprs[i if len(self.exprs) > 1 else 0]


class _Ptr:
    """A pointer value: the C base pointer, an element offset expression and an optional gate expression."""

    __slots__ = ("base", "off", "gate", "dtype")

    def __init__(self, base: str, off: str, gate: str | None, dtype: DType):
        self.base, self.off, self.gate, self.dtype = base, off, gate, dtype

    def at(self, lane: int) -> str:
        off = self.off if lane == 0 else f"{self.off} + {lane}"
        return f"{self.base}[{off}]"


class _Emitter:
    """One rendering: the helpers used, the statements, the value of every op."""

    def __init__(self, restrict: bool):
        self.restrict = restrict
        self.helpers: dict[str, Helper] = {}
        self.lines: list[str] = []
        self.depth = 1
        self.vals: dict[UOp, _Lanes | _Ptr] = {}
        self.counter = {"v": 0, "acc": 0, "ridx": 0, "reg": 0}
        self.hoisted: list[str] = []
        self.ids: list[str] = []  # the loops of global ids opened so far (the first one is split across cores)

    # helpers and names
    def use(self, name: str, helper: Helper | None = None) -> None:
        if name not in self.helpers:
            self.helpers[name] = helper if helper is not None else HELPERS[name]

    def fresh(self, kind: str) -> str:
        n = self.counter[kind]
        self.counter[kind] = n + 1
        return f"{kind}{n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def vtype(self, d: DType) -> str:
        name, helper = vector_type(d)
        self.use(name, helper)
        return name

    def pack(self, v: _Lanes, d: DType) -> str:
        """An expression of d's vector type holding v's lanes (a broadcast when v is a scalar)."""
        if v.vec is not None:
            return v.vec
        return f"({self.vtype(d)}){{{', '.join(v.lane(i) for i in range(d.count))}}}"

    def ctype(self, d: DType) -> str:
        if d.scalar is dtypes.float16:
            self.use("half")
        elif d.scalar is dtypes.bfloat16:
            self.use("bf16")
        return ctype(d)

    # compute-type conversions: f16 computes in float (bf16 already rides in one)
    def up(self, e: str, d: DType) -> str:
        if d.scalar is dtypes.float16:
            self.use("f16_to_f32")
            return f"f16_to_f32({e})"
        return e

    def down(self, e: str, d: DType) -> str:
        """A float-precision expression rounded to dtype d (f16, bf16); others unchanged."""
        if d.scalar is dtypes.float16:
            self.use("f32_to_f16")
            return f"f32_to_f16({e})"
        if d.scalar is dtypes.bfloat16:
            self.use("bf16_round")
            return f"bf16_round({e})"
        return e

    # one lane of a core op
    def alu(self, u: UOp, args: list[str]) -> str:
        name = u.op.name
        src = u.src[0].dtype.scalar if u.src else u.dtype.scalar
        d = u.dtype.scalar
        if name == "core.where":
            return f"{args[0]} ? {args[1]} : {args[2]}"
        if name in _CMP:
            if src.is_float:
                args = [self.up(a, src) for a in args]
            return f"{args[0]} {_CMP[name]} {args[1]}"
        if d.is_float:
            return self.float_alu(u, name, d, args)
        return self.int_alu(u, name, d, args)

    def float_alu(self, u: UOp, name: str, d: DType, args: list[str]) -> str:
        a = [self.up(x, d) for x in args]
        suf = "" if d is dtypes.float64 else "f"
        if name in ("core.add", "core.sub", "core.mul", "core.fdiv"):
            e = f"{a[0]} {_ARITH[name]} {a[1]}"
        elif name == "core.max":
            hname, helper = float_helper("max", d)
            self.use(hname, helper)
            e = f"{hname}({a[0]}, {a[1]})"
        elif name == "core.neg":
            e = f"-{a[0]}"
        elif name == "core.recip":
            e = f"1.0{suf} / {a[0]}"
        elif name in _FLOAT_FN:
            self.use("math")
            e = f"{_FLOAT_FN[name]}{suf}({', '.join(a)})"
        elif name == "core.mulacc":
            e = f"{self.up(self.down(f'{a[0]} * {a[1]}', d), d)} + {a[2]}"
        else:
            raise _error(u, f"the C backend cannot compute {name} on {d}")
        return self.down(e, d)

    def int_alu(self, u: UOp, name: str, d: DType, args: list[str]) -> str:
        a = args
        if d is dtypes.bool:
            logic = {"core.add": "|", "core.mul": "&", "core.max": "|", "core.and": "&", "core.or": "|",
                     "core.xor": "^"}
            if name in logic:
                return f"{a[0]} {logic[name]} {a[1]}"
            if name == "core.neg":
                return f"!{a[0]}"
            if name == "core.mulacc":
                return f"({a[0]} & {a[1]}) | {a[2]}"
            raise _error(u, f"the C backend cannot compute {name} on bool")
        bits = d.itemsize * 8
        if name in _ARITH and name != "core.fdiv":  # wraps: kernels are compiled with -fwrapv
            return f"{a[0]} {_ARITH[name]} {a[1]}"
        if name == "core.neg":
            return f"-{a[0]}"
        if name == "core.mulacc":
            return f"{a[0]} * {a[1]} + {a[2]}"
        if name == "core.max":
            return f"{a[0]} > {a[1]} ? {a[0]} : {a[1]}"
        if name in ("core.idiv", "core.mod"):
            b = u.src[1]
            if b.op is C.CONST and b.dtype.count == 1 and int(b.arg) not in (0, -1):
                return f"{a[0]} {'/' if name == 'core.idiv' else '%'} {a[1]}"
            hname, helper = int_helper("idiv" if name == "core.idiv" else "mod", d)
            self.use(hname, helper)
            return f"{hname}({a[0]}, {a[1]})"
        if name in ("core.shl", "core.shr"):
            b = u.src[1]
            if b.op is C.CONST and b.dtype.count == 1:
                amt = str(int(b.arg) & (bits - 1))
            else:
                amt = f"((uint{bits}_t){a[1]} & {bits - 1}u)"
            if name == "core.shl":
                return f"(uint{bits}_t){a[0]} << {amt}"
            return f"{a[0]} >> {amt}"
        raise _error(u, f"the C backend cannot compute {name} on {d}")

    def cast(self, u: UOp, e: str) -> str:
        s, d = u.src[0].dtype.scalar, u.dtype.scalar
        if s is d:
            return e
        if d is dtypes.bool:
            return f"{self.up(e, s)} != 0"
        if s is dtypes.bool:
            return self.down(f"(float){e}", d) if d in (dtypes.float16, dtypes.bfloat16) else f"({ctype(d)}){e}"
        if d.is_float:
            if s.is_float:
                if d is dtypes.float16 and s is dtypes.float64:
                    self.use("f64_to_f16")
                    return f"f64_to_f16({e})"
                if d is dtypes.bfloat16 and s is dtypes.float64:
                    self.use("bf16_from_f64")
                    return f"bf16_from_f64({e})"
                x = self.up(e, s)
                if d in (dtypes.float16, dtypes.bfloat16):
                    return self.down(x, d)
                return f"({ctype(d)}){x}"
            # int -> float
            if d is dtypes.bfloat16:
                self.use("bf16_from_f64")
                if s.itemsize == 8:
                    self.use("f64_sticky")
                    return f"bf16_from_f64(f64_sticky_{'u' if s.kind == 'uint' else 'i'}64({e}))"
                return f"bf16_from_f64((double){e})"
            if d is dtypes.float16:  # exact in float below 2**24; beyond that f16 overflows to inf either way
                return self.down(f"(float){e}", d)
            return f"({ctype(d)}){e}"
        if s.is_float:  # float -> int: truncate, saturate, NaN -> 0
            hname, helper = int_helper("f2i", d)
            self.use(hname, helper)
            return f"{hname}((double){self.up(e, s)})"
        return f"({ctype(d)}){e}"  # int -> int wraps


# ---- the program walk ------------------------------------------------------------------------------------------------
_NO_VALUE = frozenset((C.SINK, C.GROUP, D.PROGRAM))
_UNSUPPORTED = {
    D.BARRIER: "barriers (device.barrier) need a gpu target; lower for target=cpu",
    D.WMMA: "tensor-core multiplies (device.wmma) need a gpu target",
    K.LOCAL: "local memory (kernel.local) needs a gpu target",
    K.RANGE: "a kernel.range is left: run kernel-to-device and device-linearize first",
    K.REDUCE: "a kernel.reduce is left: run kernel-to-device and device-linearize first",
    K.END: "a kernel.end is left: run kernel-to-device and device-linearize first",
}


def _uses(u: UOp) -> tuple[UOp, ...]:
    """The operands whose values u reads (the extra operands of structure ops only order them)."""
    if u.op in (D.ENDLOOP, D.ENDIF, D.IF, D.ACC, D.LOOP, D.BARRIER):
        return u.src[:1] if u.op in (D.IF, D.ACC, D.LOOP) else ()
    if u.op in (D.PROGRAM, C.SINK, C.GROUP):
        return ()
    return u.src


def _schedule(program: UOp) -> list[UOp]:
    """The program's ops in execution order: its operands, each preceded by any value it reads that the program
    does not list (consts, index math) in dependency order."""
    listed = set(program.src)
    placed: set[UOp] = set()
    order: list[UOp] = []
    for op in program.src:
        if op in placed:
            continue
        stack: list[tuple[UOp, bool]] = [(op, False)]
        while stack:  # iterative post-order over the unlisted values op reads
            u, ready = stack.pop()
            if u in placed:
                continue
            if ready:
                placed.add(u)
                order.append(u)
                continue
            stack.append((u, True))
            stack.extend((s, False) for s in reversed(_uses(u)) if s not in placed and (s not in listed or s is op))
            for s in _uses(u):
                if s in listed and s not in placed and s is not op:
                    raise _error(u, f"{u.op.name} reads a value that the program computes later ({s.op.name})")
                if s.op in (D.LOOP, D.ACC) and s not in placed:
                    raise _error(u, f"{u.op.name} reads a {s.op.name} that is not among the program's operands")
    return order


def _escaping(order: list[UOp]) -> set[UOp]:
    """Values read after the block (loop or if) that computes them has closed."""
    block: dict[UOp, int] = {}
    stack = [0]
    closed: set[int] = set()
    out: set[UOp] = set()
    n = 0
    for u in order:
        for s in _uses(u):
            b = block.get(s)
            if b is not None and b in closed:
                out.add(s)
        if u.op in (D.ENDLOOP, D.ENDIF):
            if len(stack) > 1:
                closed.add(stack.pop())
            block[u] = stack[-1]
            continue
        block[u] = stack[-1]
        if u.op in (D.LOOP, D.IF):
            n += 1
            stack.append(n)
            if u.op is D.LOOP:
                block[u] = n  # the counter lives inside its loop
    return out


class CRenderer(Renderer):
    """device.program -> C source text. `restrict=False` renders the variant for buffers that alias each other."""

    language = "c"

    def __init__(self, restrict: bool = True):
        self.restrict = restrict

    def render(self, program: UOp) -> str:
        sig = kernel_signature(program)
        em = _Emitter(self.restrict)
        order = _schedule(program)
        escaping = _escaping(order)
        open_blocks: list[UOp] = []
        for u in order:
            self._op(em, u, u in escaping, open_blocks)
        if open_blocks:
            raise _error(open_blocks[-1], f"{open_blocks[-1].op.name} is never closed (no "
                         f"{'device.endloop' if open_blocks[-1].op is D.LOOP else 'device.endif'} in the program)")
        args = []
        for i, d in enumerate(sig.params):
            if d is None:
                args.append(f"void* unused{i}")
            else:
                args.append(f"{em.ctype(d)}* {'restrict ' if self.restrict else ''}data{i}")
        args.extend(f"int64_t {var_name(v)}" for v in sig.vars)
        if sig.parallel:
            args.extend(("int64_t core_id", "int64_t core_count"))
        while em.depth > 1:  # the loops of global ids span the rest of the program
            em.depth -= 1
            em.emit("}")
        head = prelude(em.helpers)
        body = [*("  " + h for h in em.hoisted), *em.lines]
        return f"{head}\nvoid {sig.name}({', '.join(args) or 'void'}) {{\n" + "\n".join(body) + ("\n" if body else "") \
            + "}\n"

    # each op: its value (an expression or lanes) and its statements
    def _op(self, em: _Emitter, u: UOp, escapes: bool, blocks: list[UOp]) -> None:
        op = u.op
        if op in _UNSUPPORTED:
            raise _error(u, f"the C backend cannot render {op.name}: {_UNSUPPORTED[op]}")
        if op is C.CONST:
            if type(u.arg) is tuple and u.dtype.count == 1:
                raise _error(u, "a tensor-shaped const cannot be rendered: lower the program to the device level")
            lanes = u.arg if u.dtype.count > 1 and type(u.arg) is tuple else (u.arg,) * u.dtype.count
            em.vals[u] = _Lanes([_literal(u.dtype.scalar, v, em.use) for v in lanes])
        elif op is K.PARAM:
            em.vals[u] = _Ptr(f"data{u.arg}", "0", None, u.dtype)
        elif op is K.VAR:
            em.vals[u] = _Lanes([var_name(u.arg[0])])
        elif op is K.REGISTER:
            name = em.fresh("reg")
            em.hoisted.append(f"{em.ctype(u.dtype.base)} {name}[{max(u.dtype.size, 1)}] = {{0}};")
            em.vals[u] = _Ptr(name, "0", None, u.dtype)
        elif op is K.INDEX:
            p = em.vals[u.src[0]]
            assert isinstance(p, _Ptr)
            off = self._scalar(em, u.src[1])
            if p.off != "0":
                off = f"{p.off} + {off}"
            gate = p.gate
            if len(u.src) > 2:
                g = self._scalar(em, u.src[2])
                gate = g if gate is None else f"{gate} && {g}"
            em.vals[u] = _Ptr(p.base, off, gate, u.dtype)
        elif op is C.GEP:
            src = self._lanes(em, u.src[0])
            em.vals[u] = _Lanes([src.lane(i) for i in u.arg])
        elif op is C.VECTORIZE:
            em.vals[u] = _Lanes([self._scalar(em, s) for s in u.src])
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
            em.vals[u] = _Lanes([name])
        elif op is D.SPECIAL:
            self._special(em, u, blocks)
        elif op is D.IF:
            em.emit(f"if ({self._scalar(em, u.src[0])}) {{")
            em.depth += 1
            blocks.append(u)
        elif op in (D.ENDLOOP, D.ENDIF):
            opener = u.src[0]
            if not blocks or blocks[-1] is not opener:
                inner = f" (the innermost open block is a {blocks[-1].op.name})" if blocks else ""
                raise _error(u, f"{op.name} closes a {opener.op.name} that is not the innermost open block{inner}")
            blocks.pop()
            em.depth -= 1
            em.emit("}")
        elif op is D.ACC:
            init = self._lanes(em, u.src[0])
            if vector_ok(u.dtype):
                self._set_vector(em, u, em.pack(init, u.dtype), escapes, kind="acc", const=False)
                return
            names = self._define(em, u, [init.lane(i) for i in range(u.dtype.count)], escapes, kind="acc",
                                 const=False)
            em.vals[u] = _Lanes(names)
        elif op is D.ACCSTORE:
            acc, val = em.vals[u.src[0]], self._lanes(em, u.src[1])
            assert isinstance(acc, _Lanes)
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
            if op.name in _NATIVE_VECTOR and vector_ok(u.dtype):
                a = [em.pack(x, u.dtype) for x in srcs]
                self._set_vector(em, u, _NATIVE_VECTOR[op.name].format(*a), escapes)
                return
            if op is C.MAX and vector_ok(u.dtype):
                em.vtype(u.dtype)
                hname, helper = vector_max(u.dtype)
                em.use(hname, helper)
                self._set_vector(em, u, f"{hname}({em.pack(srcs[0], u.dtype)}, {em.pack(srcs[1], u.dtype)})", escapes)
                return
            self._set(em, u, [em.alu(u, [s.lane(i) for s in srcs]) for i in range(u.dtype.count)], escapes)
        elif op in _NO_VALUE:
            pass
        else:
            raise _error(u, f"the C backend cannot render {op.name}")

    def _special(self, em: _Emitter, u: UOp, blocks: list[UOp]) -> None:
        """A global (or group) id on a cpu: a loop over the rest of the program. The first one in the program is
        split across cores: core `core_id` of `core_count` runs its contiguous share of the ids."""
        kind, dim = u.arg
        if kind == "local_id":
            raise _error(u, "the C backend cannot render device.special {kind = local_id}: workgroups need a gpu "
                            "target; lower for target=cpu")
        if blocks:
            raise _error(u, f"a {kind} inside a {blocks[-1].op.name}: ids span the whole program")
        size = self._scalar(em, u.src[0])
        name = f"gidx{dim}"
        if name in em.ids:
            raise _error(u, f"two device.special ids on dim {dim}")
        em.ids.append(name)
        if len(em.ids) == 1:
            n = f"gsize{dim}"
            em.emit(f"const int64_t {n} = {size};")
            em.emit(f"for (int64_t {name} = {n} * core_id / core_count; {name} < {n} * (core_id + 1) / core_count; "
                    f"{name}++) {{")
        else:
            em.emit(f"for (int64_t {name} = 0; {name} < {size}; {name}++) {{")
        em.depth += 1
        em.vals[u] = _Lanes([name])

    def _lanes(self, em: _Emitter, u: UOp) -> _Lanes:
        v = em.vals.get(u)
        if v is None:
            raise _error(u, f"{u.op.name} is used before the program computes it")
        if not isinstance(v, _Lanes):
            raise _error(u, f"a pointer ({u.dtype}) cannot be used as a value here")
        return v

    def _scalar(self, em: _Emitter, u: UOp) -> str:
        return self._lanes(em, u).lane(0)

    def _define(self, em: _Emitter, u: UOp, exprs: list[str], escapes: bool, kind: str = "v",
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

    def _set(self, em: _Emitter, u: UOp, exprs: list[str], escapes: bool) -> None:
        em.vals[u] = _Lanes(self._define(em, u, exprs, escapes))

    def _set_vector(self, em: _Emitter, u: UOp, expr: str, escapes: bool, kind: str = "v",
                    const: bool = True) -> None:
        """A local of u's vector type assigned `expr` (hoisted to the function top when the value escapes)."""
        t = em.vtype(u.dtype)
        name = em.fresh(kind)
        if escapes:
            em.hoisted.append(f"{t} {name};")
            em.emit(f"{name} = {expr};")
        else:
            em.emit(f"{'const ' if const else ''}{t} {name} = {expr};")
        em.vals[u] = _Lanes.of_vector(name, u.dtype.count)

    def _ptr(self, em: _Emitter, u: UOp) -> _Ptr:
        p = em.vals.get(u)
        if not isinstance(p, _Ptr):
            raise _error(u, f"expected a pointer, got {u.op.name} : {u.dtype}")
        return p

    def _load(self, em: _Emitter, u: UOp, escapes: bool) -> None:
        p = self._ptr(em, u.src[0])
        gate = p.gate
        if len(u.src) == 3:
            g = self._scalar(em, u.src[2])
            gate = g if gate is None else f"{gate} && {g}"
        n = u.dtype.count
        if vector_ok(u.dtype):
            t = em.vtype(u.dtype)
            ld = f"load_{t}(&{p.at(0)})"
            if gate is not None:
                alt = self._lanes(em, u.src[1]) if len(u.src) == 3 else _Lanes([_literal(u.dtype.scalar, 0, em.use)])
                ld = f"{gate} ? {ld} : {em.pack(alt, u.dtype)}"
            self._set_vector(em, u, ld, escapes)
            return
        if gate is None:
            self._set(em, u, [p.at(i) for i in range(n)], escapes)
            return
        alt = self._lanes(em, u.src[1]) if len(u.src) == 3 else _Lanes(
            [_literal(u.dtype.scalar, 0, em.use)])
        if n == 1:
            self._set(em, u, [f"{gate} ? {p.at(0)} : {alt.lane(0)}"], escapes)
            return
        g = em.fresh("v")  # a vector load: the gate once, then every lane
        em.emit(f"const bool {g} = {gate};")
        self._set(em, u, [f"{g} ? {p.at(i)} : {alt.lane(i)}" for i in range(n)], escapes)

    def _store(self, em: _Emitter, u: UOp) -> None:
        p = self._ptr(em, u.src[0])
        val = self._lanes(em, u.src[1])
        gate = p.gate
        if len(u.src) == 3:
            g = self._scalar(em, u.src[2])
            gate = g if gate is None else f"{gate} && {g}"
        d = u.src[1].dtype
        if vector_ok(d):
            stmts = [f"store_{em.vtype(d)}(&{p.at(0)}, {em.pack(val, d)});"]
        else:
            stmts = [f"{p.at(i)} = {val.lane(i)};" for i in range(d.count)]
        if gate is None:
            for s in stmts:
                em.emit(s)
        else:
            em.emit(f"if ({gate}) {{ {' '.join(stmts)} }}")

    def _bitcast(self, em: _Emitter, u: UOp, escapes: bool) -> None:
        s, d = u.src[0].dtype, u.dtype
        src = self._lanes(em, u.src[0])
        if s.count == 1 and d.count == 1:
            if s is d:
                em.vals[u] = src
                return
            hname, helper = bitcast_helper(s, d)
            self.use_bitcast_types(em, s, d)
            em.use(hname, helper)
            self._set(em, u, [f"{hname}({src.exprs[0]})"], escapes)
            return
        if dtypes.bfloat16 in (s.scalar, d.scalar):
            raise _error(u, "the C backend does not bitcast vectors of bf16")
        em.use("f32_bits")  # string.h for memcpy
        tmp = em.fresh("v")
        em.emit(f"{em.ctype(s.scalar)} {tmp}[{s.count}] = {{{', '.join(src.lane(i) for i in range(s.count))}}};")
        out = em.fresh("v")
        em.emit(f"{em.ctype(d.scalar)} {out}[{d.count}];")
        em.emit(f"memcpy({out}, {tmp}, sizeof {out});")
        self._set(em, u, [f"{out}[{i}]" for i in range(d.count)], escapes)

    @staticmethod
    def use_bitcast_types(em: _Emitter, s: DType, d: DType) -> None:
        em.ctype(s)
        em.ctype(d)
