"""Device programs the backend tests share: builders (elementwise kernels, the hand-written MATMUL, GATED, VECTOR and
PARALLEL programs, the packed matmul, GPU id and local-memory programs), the edge values per dtype, the edge-value
kernels of every core op, cast and bitcast with their checks against `uopir.dialects.semantics`, and which compiled
devices can run here. One home for them, so that no test file imports another test file.

What each device runs of the edge-value checks (vector widths, extra cast inputs, bitcast pairs) is the table
SEMANTICS_CASES; unit_tests/test_backend_semantics.py runs it, test_c_quick_compile.py and test_c_tiered.py run the
C row's kernels at -O1 and on tier 0.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from uopir.backends.interface import Backend
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import alu, bitcast_array, cast_array, np_dtype, values_equal
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import get_op
from uopir.ir.parser import parse_ir
from uopir.ir.uop import UOp

FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
SINTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.index)
UINTS = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
ALL = (dtypes.bool, *SINTS, *UINTS, *FLOATS)
TRANSCENDENTAL = ("core.exp2", "core.log2", "core.sin")  # libm vs numpy's own: within a few ulp, see check_alu_ops


# ---- the compiled devices --------------------------------------------------------------------------------------------
def missing_reason(device: str) -> str | None:
    """Why `device` (c, llvm or opencl) cannot run here; None when it can."""
    if device == "c":
        from uopir.backends.c.compiler import find_cc

        return None if find_cc() is not None else "no C compiler ($CC, clang or cc) is installed"
    if device == "llvm":
        from uopir.backends.llvm.compiler import llvm_host

        return None if llvm_host() is not None else "llvmlite is not installed"
    from uopir.backends.registry import get_backend

    be = get_backend(device)
    return None if be.available else f"the {device} device is unavailable: {be.reason}"


def on_device(device: str, *values: object, id: str | None = None) -> object:
    """A pytest param (device, *values) with id `device-id`, skipped with the device's reason where it cannot run
    here."""
    why = missing_reason(device)
    return pytest.param(device, *values, marks=pytest.mark.skipif(why is not None, reason=why or ""),
                        id=f"{device}-{id}" if id else device)


def on_devices(*names: str) -> list:
    """pytest params of the devices `names`, each skipped with its reason where it cannot run here."""
    return [on_device(n) for n in names]


def fresh_backend(device: str) -> Backend:
    """A new backend of a host device (c or llvm) a test may set up (threads) without touching the shared one."""
    from uopir.backends.c.backend import CBackend
    from uopir.backends.llvm.backend import LLVMBackend

    return {"c": CBackend, "llvm": LLVMBackend}[device]()


@functools.cache
def shared_backend(device: str) -> Backend:
    """The backend the device suites share: c compiles every kernel at the default flags (-O2; a plain CBackend()
    compiles kernels that do little work at -O1, which test_c_quick_compile checks on the same edge values)."""
    if device == "c":
        from uopir.backends.c.backend import CBackend
        from uopir.backends.c.compiler import CCompiler

        return CBackend(CCompiler())
    if device == "llvm":
        from uopir.backends.llvm.backend import LLVMBackend

        return LLVMBackend()
    from uopir.backends.registry import get_backend

    return get_backend(device)


def run(backend: Backend, prog: UOp, arrays: list[np.ndarray], var_vals: dict[str, int] | None = None,
        **launch: object) -> None:
    """Compile `prog` on `backend`, launch it on `arrays` and wait for it."""
    p = backend.compile(prog)
    backend.runtime.launch(p, arrays, var_vals=var_vals, **launch)
    backend.runtime.synchronize()


# ---- building device programs ----------------------------------------------------------------------------------------
def idx(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def program(name: str, *ops: UOp) -> UOp:
    """A device.program listing `ops` (loops, loads, values, stores, ends) in execution order."""
    return UOp(D.PROGRAM, dtypes.void, ops, name)


def param(i: int, d: DType) -> UOp:
    return UOp(K.PARAM, d.ptr(), (), i)


def load(p: UOp, off: UOp, d: DType | None = None) -> UOp:
    return UOp(K.LOAD, d or p.dtype.base, (UOp(K.INDEX, p.dtype, (p, off)),))


def store(p: UOp, off: UOp, v: UOp) -> UOp:
    return UOp(K.STORE, dtypes.void, (UOp(K.INDEX, p.dtype, (p, off)), v))


def vec(d: DType, w: int) -> DType:
    """d with w lanes (d itself for one)."""
    return d.vec(w) if w > 1 else d


def elementwise(name: str, n: int, ins: list[DType], outs: list[tuple[DType, Callable[..., UOp]]],
                width: int = 1) -> UOp:
    """for i < n: out_k[i] = f_k(in_0[i], in_1[i], ...): param 0.. are the outputs, then the inputs. With a width,
    `width` consecutive elements at a time as vectors (n a multiple of it)."""
    loop = UOp(D.LOOP, dtypes.index, (idx(n // width),), 0)
    off = loop * idx(width) if width > 1 else loop
    ops: list[UOp] = [loop]
    loads = []
    for j, d in enumerate(ins):
        ld = load(param(len(outs) + j, d), off, vec(d, width))
        loads.append(ld)
        ops.append(ld)
    for k, (d, f) in enumerate(outs):
        v = f(*loads)
        ops += [v, store(param(k, d), off, v)]
    ops.append(UOp(D.ENDLOOP, dtypes.void, (loop, *ops[-1:])))
    return program(name, *ops)


def parse_program(text: str) -> UOp:
    """The device.program of IR text (under its core.sink)."""
    root = parse_ir(text)
    return root.src[0] if root.op is C.SINK else root


def escape_program() -> UOp:
    """out[0] = the last i * i of a loop over i < 5, read after the loop ends."""
    out = param(0, dtypes.int64)
    loop = UOp(D.LOOP, dtypes.index, (idx(5),), 0)
    sq = loop * loop
    end = UOp(D.ENDLOOP, dtypes.void, (loop, sq))
    st = store(out, idx(0), sq)
    return program("escape", loop, sq, end, st)


def shift_add_program() -> UOp:
    """out[i + 1] = x[i] + 1 for i < 63: with out and x one buffer, each iteration reads the previous one's store."""
    out, x = param(0, dtypes.int32), param(1, dtypes.int32)
    loop = UOp(D.LOOP, dtypes.index, (idx(63),), 0)
    ld = load(x, loop)
    v = ld + UOp.const(dtypes.int32, 1)
    st = store(out, loop + idx(1), v)
    return program("shift_add", loop, ld, v, st, UOp(D.ENDLOOP, dtypes.void, (loop, st)))


def gated_empty_program(width: int) -> UOp:
    """out[i] = x[i] if i < n else -1.0 for i < 4 (f32; `width` lanes per i): a gated load that may read nothing."""
    out, x = param(0, dtypes.float32), param(1, dtypes.float32)
    loop = UOp(D.LOOP, dtypes.index, (idx(4),), 0)
    gate = UOp(C.CMPLT, dtypes.bool, (loop, UOp(K.VAR, dtypes.index, (), ("n", 0, 4))))
    off = loop * idx(width) if width > 1 else loop
    vd = vec(dtypes.float32, width)
    ld = UOp(K.LOAD, vd, (UOp(K.INDEX, x.dtype, (x, off)), UOp.const(vd, -1.0), gate))
    st = store(out, off, ld)
    return program("gated_empty", loop, gate, ld, st, UOp(D.ENDLOOP, dtypes.void, (loop, st)))


def global_ids_program(n: UOp, m: int) -> UOp:
    """out[i * m + j] = x[i * m + j] * 2 + i over global ids (i on dim 1, j on dim 0)."""
    out, x = param(0, dtypes.int32), param(1, dtypes.int32)
    i = UOp(D.SPECIAL, dtypes.index, (n,), ("global_id", 1))
    j = UOp(D.SPECIAL, dtypes.index, (idx(m),), ("global_id", 0))
    off = i * idx(m) + j
    v = load(x, off) * UOp.const(dtypes.int32, 2) + UOp(C.CAST, dtypes.int32, (i,))
    return program("gids", out, x, n, i, j, off, v, store(out, off, v))


def local_sum_program(groups: int, size: int) -> UOp:
    """Per group: each local item writes x[g*size + l] to local memory, a barrier, item 0 sums the group's values."""
    out, x = param(0, dtypes.float32), param(1, dtypes.float32)
    g = UOp(D.SPECIAL, dtypes.index, (idx(groups),), ("group_id", 0))
    lid = UOp(D.SPECIAL, dtypes.index, (idx(size),), ("local_id", 0))
    lmem = UOp(K.LOCAL, dtypes.float32.ptr("local", size), (), 0)
    ld = load(x, g * idx(size) + lid)
    st = UOp(K.STORE, dtypes.void, (UOp(K.INDEX, lmem.dtype, (lmem, lid)), ld))
    bar = UOp(D.BARRIER, dtypes.void, (st,))
    first = UOp(C.CMPEQ, dtypes.bool, (lid, idx(0)))
    iff = UOp(D.IF, dtypes.void, (first, bar))
    acc = UOp(D.ACC, dtypes.float32, (UOp.const(dtypes.float32, 0.0),), 0)
    k = UOp(D.LOOP, dtypes.index, (idx(size),), 0)
    v = UOp(K.LOAD, dtypes.float32, (UOp(K.INDEX, lmem.dtype, (lmem, k)),))
    upd = UOp(D.ACCSTORE, dtypes.float32, (acc, acc + v))
    endk = UOp(D.ENDLOOP, dtypes.void, (k, upd))
    so = store(out, g, upd)
    return program("local_sum", out, x, g, lid, lmem, ld, st, bar, first, iff, acc, k, v, upd, endk, so,
                   UOp(D.ENDIF, dtypes.void, (iff, so)))


# out[i, j] = relu(sum_k a[i, k] * b[k, j] + bias[j]) for a 4 x 8 @ 8 x 3 f32 matmul
MATMUL = """
%out = kernel.param {idx = 0} : ptr<f32, global>
%a = kernel.param {idx = 1} : ptr<f32, global>
%b = kernel.param {idx = 2} : ptr<f32, global>
%bias = kernel.param {idx = 3} : ptr<f32, global>
%c4 = core.const 4 : index
%c3 = core.const 3 : index
%c8 = core.const 8 : index
%zero = core.const 0.0 : f32
%i = device.loop %c4 {id = 0} : index
%j = device.loop %c3 {id = 1} : index
%acc = device.acc %zero {id = 0} : f32
%k = device.loop %c8 {id = 2} : index
%i8 = core.mul %i, %c8 : index
%ak = core.add %i8, %k : index
%pa = kernel.index %a, %ak : ptr<f32, global>
%va = kernel.load %pa : f32
%k3 = core.mul %k, %c3 : index
%bk = core.add %k3, %j : index
%pb = kernel.index %b, %bk : ptr<f32, global>
%vb = kernel.load %pb : f32
%prod = core.mul %va, %vb : f32
%sum = core.add %acc, %prod : f32
%upd = device.accstore %acc, %sum : f32
%endk = device.endloop %k, %upd
%pbias = kernel.index %bias, %j : ptr<f32, global>
%vbias = kernel.load %pbias : f32
%r = core.add %upd, %vbias : f32
%relu = core.max %r, %zero : f32
%i3 = core.mul %i, %c3 : index
%o = core.add %i3, %j : index
%po = kernel.index %out, %o : ptr<f32, global>
%st = kernel.store %po, %relu
%endj = device.endloop %j, %st
%endi = device.endloop %i, %endj
%prog = device.program %out, %a, %b, %bias, %c4, %c3, %c8, %zero, %i, %j, %acc, %k, %i8, %ak, %pa, %va, %k3, %bk, \
%pb, %vb, %prod, %sum, %upd, %endk, %pbias, %vbias, %r, %relu, %i3, %o, %po, %st, %endj, %endi {name = "r_4_3"}
core.sink %prog
""".replace("\\\n", "")

# sum of x[i] over i < n (a variable), stored only where the sum is positive; a gated load past the end reads alt
GATED = """
%out = kernel.param {idx = 0} : ptr<i32, global>
%x = kernel.param {idx = 1} : ptr<i32, global>
%n = kernel.var {name = "n", min = 0, max = 100} : index
%c8 = core.const 8 : index
%zero = core.const 0 : i32
%alt = core.const -1000 : i32
%acc = device.acc %zero {id = 0} : i32
%i = device.loop %c8 {id = 0} : index
%inb = core.cmplt %i, %n : bool
%p = kernel.index %x, %i : ptr<i32, global>
%v = kernel.load %p, %alt, %inb : i32
%s = core.add %acc, %v : i32
%u = device.accstore %acc, %s : i32
%e = device.endloop %i, %u
%pos = core.cmplt %zero, %u : bool
%if = device.if %pos, %e
%c0 = core.const 0 : index
%po = kernel.index %out, %c0 : ptr<i32, global>
%st = kernel.store %po, %u
%endif = device.endif %if, %st
%prog = device.program %n, %acc, %i, %inb, %p, %v, %s, %u, %e, %pos, %if, %po, %st, %endif {name = "gated"}
core.sink %prog
"""

# out[4i:4i+4] = (x[4i:4i+4] * [2, 3, 4, 5]) lanes 3, 0, 3, 0 for i < 2: vector loads, gep and vectorize
VECTOR = """
%out = kernel.param {idx = 0} : ptr<f32, global>
%x = kernel.param {idx = 1} : ptr<f32, global>
%c4 = core.const 4 : index
%c2 = core.const 2 : index
%i = device.loop %c2 {id = 0} : index
%off = core.mul %i, %c4 : index
%p = kernel.index %x, %off : ptr<f32, global>
%v = kernel.load %p : vector<4xf32>
%two = core.const [2.0, 3.0, 4.0, 5.0] : vector<4xf32>
%m = core.mul %v, %two : vector<4xf32>
%l0 = core.gep %m {idx = [3]} : f32
%l1 = core.gep %m {idx = [0]} : f32
%sw = core.vectorize %l0, %l1, %l0, %l1 : vector<4xf32>
%q = kernel.index %out, %off : ptr<f32, global>
%st = kernel.store %q, %sw
%e = device.endloop %i, %st
%prog = device.program %i, %off, %p, %v, %m, %l0, %l1, %sw, %q, %st, %e {name = "vec"}
core.sink %prog
"""

# row sums of a 1000 x 37 matrix, one global id per row: the host backends split the ids across cores
PARALLEL = """
%out = kernel.param {idx = 0} : ptr<i64, global>
%x = kernel.param {idx = 1} : ptr<i64, global>
%rows = core.const 1000 : index
%c37 = core.const 37 : index
%zero = core.const 0 : i64
%g = device.special %rows {kind = global_id, dim = 0} : index
%acc = device.acc %zero {id = 0} : i64
%k = device.loop %c37 {id = 0} : index
%g37 = core.mul %g, %c37 : index
%off = core.add %g37, %k : index
%p = kernel.index %x, %off : ptr<i64, global>
%v = kernel.load %p : i64
%s = core.add %acc, %v : i64
%u = device.accstore %acc, %s
%e = device.endloop %k
%q = kernel.index %out, %g : ptr<i64, global>
%st = kernel.store %q, %acc
%prog = device.program %out, %x, %rows, %c37, %zero, %g, %acc, %k, %g37, %off, %p, %v, %s, %u, %e, %q, %st \
{name = "rowsum"}
core.sink %prog
""".replace("\\\n", "")


def sequential_matmul(a: np.ndarray, b: np.ndarray, fused: bool = False) -> np.ndarray:
    """a @ b in f32 with each output's products added in k order from 0, rounding every product and sum (what the
    reference interpreter computes, and what a kernel must match bit for bit); `fused`: each `sum + a*b` rounded once
    (what a target that contracts, device-contract, computes: a sequential sum of fmas)."""
    from uopir.dialects.semantics import fma_f32
    want = np.zeros(a.shape[:-1] + b.shape[-1:], np.float32)
    for k in range(a.shape[-1]):
        x, y = np.broadcast_arrays(a[..., k:k + 1], b[..., k:k + 1, :])
        want = fma_f32(x, y, want) if fused else want + x * y
    return want


def packed_matmul_program(m: int, k: int, n: int) -> UOp:
    """The device program of an m x k @ k x n f32 matmul lowered for an AVX-512-like 2-thread target whatever the
    host: an 8 x 32 register tile, the column blocks across threads, each block's B panel packed into a
    kernel.local (on the heap when over 64 KiB; m at least 128: 16 row blocks read each panel, PACK_MIN_REUSE)."""
    from uopir.frontend.tensor import Tensor
    from uopir.ir.regions import map_regions
    from uopir.passes.manager import PassManager
    from uopir.passes.target import CPU, register_target

    register_target(CPU.derive(name="test-rich", max_vector_bytes=64, max_upcast=256, threads=2), replace=True)
    t = Tensor(np.zeros((m, k), np.float32), device="python") @ Tensor(np.zeros((k, n), np.float32), device="python")
    out = PassManager.parse("default{target=test-rich}").run(UOp.sink(t.uop))
    progs: list[UOp] = []
    map_regions(out, lambda r: r.op is D.PROGRAM, lambda r: progs.append(r) or r)
    (prog,) = progs
    assert any(u.op is K.LOCAL for u in prog.src)
    return prog


# ---- edge values per dtype -------------------------------------------------------------------------------------------
def edge_values(d: DType) -> np.ndarray:
    """NaN, +-inf, -0.0, subnormals, halfway points, values out of every int range (floats); min, max, 0, +-1 and the
    shift amounts around the bit width (ints)."""
    if d is dtypes.bool:
        return np.array([False, True])
    if d.is_float:
        vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, 3.0, -7.25, 1e-3, 100.0, 255.5, -128.5, 300.0,
                65504.0, 65519.0, 65520.0, 70000.0, 2.0**31, -(2.0**31), 2.0**31 - 1, 2.0**63, -(2.0**63), 2.0**64,
                1e30, -1e30, 3.4e38, 1e300, 1e-40, 1e-310, 5e-8, math.pi, -math.e, 1 / 3,
                math.inf, -math.inf, math.nan]
        return cast_array(np.array(vals, np.float64), dtypes.float64, d)
    lo, hi = d.min, d.max
    vals = {0, 1, 2, 3, 7, lo, hi, lo + 1, hi - 1, 100, d.itemsize * 8 - 1, d.itemsize * 8, d.itemsize * 8 + 1}
    if lo < 0:
        vals |= {-1, -2, -3, -7, -100, -(d.itemsize * 8)}
    return np.array(sorted(v for v in vals if lo <= v <= hi), dtype=np_dtype(d))


def pairs(d: DType, e: DType | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values of d (and e), as two flat arrays."""
    a, b = edge_values(d), edge_values(e or d)
    aa, bb = np.meshgrid(a, b, indexing="ij")
    return aa.reshape(-1).copy(), bb.reshape(-1).copy()


def binary_ops(d: DType) -> list[str]:
    if d is dtypes.bool:
        return ["core.add", "core.mul", "core.max", "core.and", "core.or", "core.xor", "core.cmplt", "core.cmpne",
                "core.cmpeq"]
    ops = ["core.add", "core.sub", "core.mul", "core.max", "core.mod", "core.cmplt", "core.cmpne", "core.cmpeq"]
    if d.is_float:
        return ops + ["core.fdiv"]
    return ops + ["core.idiv", "core.and", "core.or", "core.xor", "core.shl", "core.shr"]


def unary_ops(d: DType) -> list[str]:
    if d is dtypes.bool:
        return []
    if d.is_float:
        return ["core.neg", "core.recip", "core.sqrt", "core.trunc", *TRANSCENDENTAL]
    return ["core.neg"]


def result_dtype(name: str, d: DType) -> DType:
    """The scalar dtype of op `name` on operands of d."""
    return dtypes.bool if name in ("core.cmplt", "core.cmpne", "core.cmpeq") else d


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between two float arrays of one dtype (NaN/NaN and equal infs: 0)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
    with np.errstate(all="ignore"):
        spacing = np.abs(np.spacing(np.maximum(np.abs(a), np.abs(b)))).astype(np.float64)
        d = np.abs(a64 - b64) / spacing
    return np.where(same, 0.0, np.nan_to_num(d, nan=np.inf))


def _mismatches(xs: tuple[np.ndarray, ...], got: np.ndarray, want: np.ndarray) -> list[tuple]:
    """The first 8 (inputs..., got, want) rows where got and want differ, for an assertion message."""
    return [row for row in zip(*xs, got, want, strict=True)
            if not values_equal(np.asarray(row[-2]), np.asarray(row[-1]))][:8]


# ---- the edge-value kernels ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SemanticsCases:
    """What a device runs of the edge-value checks: the vector widths of the ALU kernels and of the cast kernels,
    the inputs a cast kernel adds to the edge values (floats near the narrow types' rounding boundaries; ints just
    past the float mantissas), and the (source, destination) pairs of the bitcast kernels."""

    alu_widths: tuple[int, ...]
    cast_widths: tuple[int, ...]
    cast_floats: tuple[float, ...]
    cast_ints: tuple[int, ...]
    bitcasts: tuple[tuple[DType, DType], ...]


# every same-width bitcast of two different dtypes (bool and index have no fixed bits)
SAME_WIDTH = tuple((s, d) for s, d in itertools.permutations(ALL, 2) if s.itemsize == d.itemsize
                   and dtypes.bool not in (s, d) and dtypes.index not in (s, d))
_CAST_FLOATS = (1 + 2.0**-8, 1 + 2.0**-9 + 2.0**-30, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-24, 2.0**-25, 3 * 2.0**-26,
                2.0**24 + 1, 255.99, -0.99, 0.99, 127.5, -128.99, 4294967295.5, 9.2233720368547748e18,
                -9.2233720368547758e18, 1.8446744073709550e19, 1 + 2.0**-24)

# The rows differ where a device does more (llvm: every cast on 4-lane vectors too, f32 subnormals and 64-bit ints
# just above a bf16 halfway point) or less (opencl: ALU vectors of 4 lanes only, shorter cast lists, a bitcast per
# kind of pair). c renders f32/f64 vectors as native vector types and the others lane by lane; llvm renders every
# vector natively; opencl renders lane by lane.
SEMANTICS_CASES: dict[str, SemanticsCases] = {
    "c": SemanticsCases(alu_widths=(1, 4, 16), cast_widths=(1,), cast_floats=_CAST_FLOATS,
                        cast_ints=(2**24 + 1, 2**53 + 1, 16777217, 65519, 65520, 257), bitcasts=SAME_WIDTH),
    "llvm": SemanticsCases(alu_widths=(1, 4, 16), cast_widths=(1, 4),
                           cast_floats=(*_CAST_FLOATS, 1e-45, 2.0**-149 * 3, -(2.0**-133)),
                           cast_ints=(2**24 + 1, 2**53 + 1, 2**53 + 2**45 + 1, -(2**62 + 2**54 + 1), 16777217, 65519,
                                      65520, 257),
                           bitcasts=SAME_WIDTH),
    "opencl": SemanticsCases(alu_widths=(1, 4), cast_widths=(1,),
                             cast_floats=(1 + 2.0**-8, 1 + 2.0**-9 + 2.0**-30, 1 + 2.0**-11, 1 + 3 * 2.0**-11,
                                          2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**24 + 1, 255.99, -0.99, 127.5,
                                          -128.99, 4294967295.5, 9.2233720368547748e18, -9.2233720368547758e18,
                                          1.8446744073709550e19),
                             cast_ints=(2**24 + 1, 2**53 + 1, 65519, 65520, 257),
                             bitcasts=((dtypes.float16, dtypes.int16), (dtypes.bfloat16, dtypes.uint16),
                                       (dtypes.int16, dtypes.bfloat16), (dtypes.float32, dtypes.int32),
                                       (dtypes.uint32, dtypes.float32), (dtypes.float64, dtypes.int64),
                                       (dtypes.int64, dtypes.float64))),
}


def alu_kernel(d: DType, width: int) -> tuple[UOp, list[tuple[str, DType]], np.ndarray, np.ndarray]:
    """Every binary, unary and ternary (mulacc, where) op of dtype d on all pairs of edge values in one kernel, on
    `width`-lane vectors: the program, its outputs' (op name, scalar dtype) in param order, and its inputs a, b."""
    a, b = pairs(d)
    n = a.size - a.size % width
    a, b = a[:n].copy(), b[:n].copy()
    w = width
    outs: list[tuple[str, DType, Callable[..., UOp]]] = []
    for name in binary_ops(d):
        rd = result_dtype(name, d)
        outs.append((name, rd, lambda x, y, name=name, rd=rd: UOp(get_op(name), vec(rd, w), (x, y))))
    for name in unary_ops(d):
        outs.append((name, d, lambda x, y, name=name: UOp(get_op(name), vec(d, w), (x,))))
    if d is not dtypes.bool:
        outs.append(("core.mulacc", d, lambda x, y: UOp(C.MULACC, vec(d, w), (x, y, x))))
    outs.append(("core.where", d, lambda x, y: UOp(C.WHERE, vec(d, w), (UOp(C.CMPLT, vec(dtypes.bool, w), (x, y)),
                                                                        x, y))))
    prog = elementwise(f"alu_{d.name}", n, [d, d], [(rd, f) for _, rd, f in outs], width)
    return prog, [(name, rd) for name, rd, _ in outs], a, b


def check_alu_ops(backend: Backend, d: DType, width: int) -> None:
    """alu_kernel(d, width) on `backend` equals the semantics bit for bit (any NaN equals any NaN); exp2, log2 and sin
    within a few ulp, their special values (NaN, inf, 0) exactly."""
    prog, outs, a, b = alu_kernel(d, width)
    results = [np.zeros(a.size, np_dtype(rd)) for _, rd in outs]
    run(backend, prog, [*results, a, b])
    for (name, rd), got in zip(outs, results, strict=True):
        if name == "core.mulacc":
            want = alu(name, d, [a, b, a])
        elif name == "core.where":
            want = alu(name, d, [alu("core.cmplt", dtypes.bool, [a, b]), a, b])
        elif name in binary_ops(d):
            want = alu(name, rd, [a, b])
        else:
            want = alu(name, d, [a])
        if name in TRANSCENDENTAL:
            # the device's math library and numpy's own loops may differ in the last bits (so f16/bf16 may round
            # the other way at a halfway point); special values agree exactly
            tol = 4 if d in (dtypes.float32, dtypes.float64) else 1
            assert np.all(ulps(got, want) <= tol), (name, d.name, width, a[ulps(got, want) > tol])
            special = ~np.isfinite(a) | (a == 0)
            assert values_equal(got[special], want[special]), (name, d.name, width)
            continue
        assert values_equal(got, want), (name, d.name, width, _mismatches((a, b), got, want))


def cast_inputs(src: DType, cases: SemanticsCases, width: int = 1) -> np.ndarray:
    """The edge values of src and the row's extra cast inputs (as src), cut to a multiple of `width`."""
    if src.is_float:
        extra = cast_array(np.array(cases.cast_floats, np.float64), dtypes.float64, src)
    else:
        extra = cast_array(np.array(cases.cast_ints, np.int64), dtypes.int64, src)
    x = np.concatenate([edge_values(src), extra])
    return x[:x.size - x.size % width].copy()


def cast_kernel(src: DType, n: int, width: int = 1) -> tuple[UOp, list[DType]]:
    """core.cast of n values of src to every other dtype in one kernel (`width`-lane vectors): the program and its
    outputs' dtypes in param order."""
    dsts = [d for d in ALL if d is not src]
    prog = elementwise(f"cast_{src.name}", n, [src], [(d, lambda v, d=d: UOp(C.CAST, vec(d, width), (v,)))
                                                      for d in dsts], width)
    return prog, dsts


def check_casts(backend: Backend, src: DType, cases: SemanticsCases, width: int = 1) -> None:
    """core.cast from src to every dtype on `backend` equals the semantics bit for bit (saturating float -> int,
    NaN -> 0, one exact rounding to f16/bf16)."""
    x = cast_inputs(src, cases, width)
    prog, dsts = cast_kernel(src, x.size, width)
    results = [np.zeros(x.size, np_dtype(d)) for d in dsts]
    run(backend, prog, [*results, x])
    for d, got in zip(dsts, results, strict=True):
        want = cast_array(x, src, d)
        assert values_equal(got, want), (src.name, d.name, width, _mismatches((x,), got, want))


def check_bitcasts(backend: Backend, bitcasts: tuple[tuple[DType, DType], ...], bits: int) -> None:
    """core.bitcast of the edge values for the `bits`-wide pairs of `bitcasts` (one kernel per source, writing every
    destination) on `backend` equals numpy's view of the bits."""
    of_width = [(s, d) for s, d in bitcasts if s.itemsize * 8 == bits]
    assert of_width, f"no {bits}-bit bitcast in {bitcasts}"
    for s in sorted({s for s, _ in of_width}, key=lambda d: d.name):
        x = edge_values(s)
        dsts = [d for ss, d in of_width if ss is s]
        prog = elementwise(f"bitcast_{s.name}", x.size, [s], [(d, lambda v, d=d: UOp(C.BITCAST, d, (v,)))
                                                              for d in dsts])
        results = [np.zeros(x.size, np_dtype(d)) for d in dsts]
        run(backend, prog, [*results, x])
        for d, got in zip(dsts, results, strict=True):
            assert values_equal(got, bitcast_array(x, s, d)), (s.name, d.name)
