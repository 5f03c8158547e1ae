"""The C backend: rendered C compiled by the system compiler reproduces the semantics module bit for bit.

Every core op on every dtype runs on edge values (NaN, +-inf, -0.0, subnormals, int min/max, division by zero,
shifts out of range, float -> int casts out of range) in one compiled elementwise kernel per dtype, and its output
is compared with `uopir.dialects.semantics` (the reference interpreter's and constant folding's arithmetic) with
`values_equal` (bits; any NaN equals any NaN). Hand-written device programs (loops, accumulators, gated loads and
stores, ifs, vectors, variables) are compared with numpy. Skipped when no C compiler is installed.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_device_lowering import _run, _WideGen
from test_tensor_to_kernel import _Gen, _input_arrays

from uopir.backends.c.backend import CBackend
from uopir.backends.c.compiler import BASE_FLAGS, CCompiler, find_cc
from uopir.backends.c.renderer import CRenderer, kernel_signature
from uopir.backends.cache import ENTRY_SUFFIX, USAGE_FILE, seal, unseal
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import alu, bf16_round, bitcast_array, cast_array, np_dtype, values_equal
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.ops import get_op
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.tensor_to_kernel import tensor_to_kernel

pytestmark = pytest.mark.skipif(find_cc() is None, reason="no C compiler ($CC, clang or cc) is installed")

FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
SINTS = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.index)
UINTS = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
ALL = (dtypes.bool, *SINTS, *UINTS, *FLOATS)
TRANSCENDENTAL = ("core.exp2", "core.log2", "core.sin")  # libm vs numpy's own: within a few ulp, see below


@pytest.fixture(scope="module")
def backend() -> CBackend:
    # an explicit compiler: every kernel at the default flags (-O2), small ones too (a CBackend() compiles kernels
    # that do little work at -O1; unit_tests/test_c_quick_compile.py checks those flags on the same edge values)
    return CBackend(CCompiler())


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


def elementwise(name: str, n: int, ins: list[DType], outs: list[tuple[DType, callable]], width: int = 1) -> UOp:
    """for i < n: out_k[i] = f_k(in_0[i], in_1[i], ...): param 0.. are the outputs, then the inputs. With a width,
    `width` consecutive elements at a time as vectors (n a multiple of it)."""
    loop = UOp(D.LOOP, dtypes.index, (idx(n // width),), 0)
    off = loop * idx(width) if width > 1 else loop
    ops: list[UOp] = [loop]
    loads = []
    for j, d in enumerate(ins):
        ld = load(param(len(outs) + j, d), off, d.vec(width) if width > 1 else d)
        loads.append(ld)
        ops.append(ld)
    for k, (d, f) in enumerate(outs):
        v = f(*loads)
        ops += [v, store(param(k, d), off, v)]
    ops.append(UOp(D.ENDLOOP, dtypes.void, (loop, *ops[-1:])))
    return program(name, *ops)


def run(backend: CBackend, prog: UOp, arrays: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    p = backend.compile(prog)
    backend.runtime.launch(p, arrays, var_vals=var_vals)


# ---- edge values per dtype -------------------------------------------------------------------------------------------
def edge_values(d: DType) -> np.ndarray:
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
    a, b = edge_values(d), edge_values(e or d)
    aa, bb = np.meshgrid(a, b, indexing="ij")
    return aa.reshape(-1).copy(), bb.reshape(-1).copy()


def _binary_ops(d: DType) -> list[str]:
    if d is dtypes.bool:
        return ["core.add", "core.mul", "core.max", "core.and", "core.or", "core.xor", "core.cmplt", "core.cmpne",
                "core.cmpeq"]
    ops = ["core.add", "core.sub", "core.mul", "core.max", "core.mod", "core.cmplt", "core.cmpne", "core.cmpeq"]
    if d.is_float:
        return ops + ["core.fdiv"]
    return ops + ["core.idiv", "core.and", "core.or", "core.xor", "core.shl", "core.shr"]


def _unary_ops(d: DType) -> list[str]:
    if d is dtypes.bool:
        return []
    if d.is_float:
        return ["core.neg", "core.recip", "core.sqrt", "core.trunc", *TRANSCENDENTAL]
    return ["core.neg"]


def _result(name: str, d: DType) -> DType:
    return dtypes.bool if name in ("core.cmplt", "core.cmpne", "core.cmpeq") else d


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between two float arrays of one dtype (NaN/NaN and equal infs: 0)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
    with np.errstate(all="ignore"):
        spacing = np.abs(np.spacing(np.maximum(np.abs(a), np.abs(b)))).astype(np.float64)
        d = np.abs(a64 - b64) / spacing
    return np.where(same, 0.0, np.nan_to_num(d, nan=np.inf))


def _vec(d: DType, w: int) -> DType:
    return d.vec(w) if w > 1 else d


@pytest.mark.parametrize("width", [1, 4, 16], ids=lambda w: f"x{w}")
@pytest.mark.parametrize("d", ALL, ids=lambda d: d.name)
def test_alu_ops_match_semantics_bit_for_bit(backend: CBackend, d: DType, width: int) -> None:
    """Every binary, unary, ternary op of dtype d on all pairs of edge values, in one kernel; on vectors of 4 and 16
    lanes too (native vector types for f32/f64, lane by lane for the others)."""
    a, b = pairs(d)
    n = a.size - a.size % width
    a, b = a[:n].copy(), b[:n].copy()
    w = width
    outs: list[tuple[str, DType, callable]] = []
    for name in _binary_ops(d):
        outs.append((name, _result(name, d), lambda x, y, name=name: UOp(get_op(name), _vec(_result(name, d), w),
                                                                          (x, y))))
    for name in _unary_ops(d):
        outs.append((name, d, lambda x, y, name=name: UOp(get_op(name), _vec(d, w), (x,))))
    if d is not dtypes.bool:
        outs.append(("core.mulacc", d, lambda x, y: UOp(C.MULACC, _vec(d, w), (x, y, x))))
    outs.append(("core.where", d, lambda x, y: UOp(C.WHERE, _vec(d, w), (UOp(C.CMPLT, _vec(dtypes.bool, w), (x, y)),
                                                                         x, y))))
    prog = elementwise(f"alu_{d.name}", n, [d, d], [(rd, f) for _, rd, f in outs], width)
    results = [np.zeros(n, np_dtype(rd)) for _, rd, _ in outs]
    run(backend, prog, [*results, a, b])
    for (name, rd, _), got in zip(outs, results, strict=True):
        if name == "core.mulacc":
            want = alu(name, d, [a, b, a])
        elif name == "core.where":
            want = alu(name, d, [alu("core.cmplt", dtypes.bool, [a, b]), a, b])
        elif name in _binary_ops(d):
            want = alu(name, rd, [a, b])
        else:
            want = alu(name, d, [a])
        if name in TRANSCENDENTAL:
            # libm and numpy's own loops may differ in the last bits (so f16/bf16 may round the other way at a
            # halfway point); special values (NaN, inf, 0) agree exactly
            tol = 4 if d in (dtypes.float32, dtypes.float64) else 1
            assert np.all(_ulps(got, want) <= tol), (name, d.name, a[_ulps(got, want) > tol])
            special = ~np.isfinite(a) | (a == 0)
            assert values_equal(got[special], want[special]), (name, d.name)
            continue
        assert values_equal(got, want), (name, d.name, [(x, y, g, w) for x, y, g, w in zip(a, b, got, want, strict=True)
                                                        if not values_equal(np.asarray(g), np.asarray(w))][:8])


@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_casts_match_semantics_bit_for_bit(backend: CBackend, src: DType) -> None:
    """core.cast from src to every dtype (saturating float -> int, NaN -> 0, exact rounding to f16/bf16)."""
    x = edge_values(src)
    if src.is_float:  # more values near the rounding boundaries of the narrow types
        extra = np.array([1 + 2.0**-8, 1 + 2.0**-9 + 2.0**-30, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-24, 2.0**-25,
                          3 * 2.0**-26, 2.0**24 + 1, 255.99, -0.99, 0.99, 127.5, -128.99, 4294967295.5,
                          9.2233720368547748e18, -9.2233720368547758e18, 1.8446744073709550e19, 1 + 2.0**-24],
                         np.float64)
        x = np.concatenate([x, cast_array(extra, dtypes.float64, src)])
    else:
        x = np.concatenate([x, cast_array(np.array([2**24 + 1, 2**53 + 1, 16777217, 65519, 65520, 257],
                                                   np.int64), dtypes.int64, src)])
    dsts = [d for d in ALL if d is not src]
    prog = elementwise(f"cast_{src.name}", x.size, [src],
                       [(d, lambda v, d=d: UOp(C.CAST, d, (v,))) for d in dsts])
    results = [np.zeros(x.size, np_dtype(d)) for d in dsts]
    run(backend, prog, [*results, x])
    for d, got in zip(dsts, results, strict=True):
        want = cast_array(x, src, d)
        assert values_equal(got, want), (src.name, d.name, [(v, g, w) for v, g, w in zip(x, got, want, strict=True)
                                                            if not values_equal(np.asarray(g), np.asarray(w))][:8])


def test_f16_conversions_in_portable_bit_code() -> None:
    """The prelude's portable f16 <-> f32 code (used where the compiler has no _Float16) rounds like the semantics."""
    be = CBackend(CCompiler(flags=BASE_FLAGS + ("-DUOPIR_SOFT_F16",)))
    assert "UOPIR_SOFT_F16" in CRenderer().render(elementwise("k", 1, [dtypes.float32], [(dtypes.float16, lambda v: UOp(
        C.CAST, dtypes.float16, (v,)))]))
    for src in (dtypes.float32, dtypes.float64):
        x = np.concatenate([edge_values(src), cast_array(np.linspace(-70000, 70000, 4099), dtypes.float64, src),
                            cast_array(np.ldexp(1.0, np.arange(-30, 17)) * 1.37, dtypes.float64, src)])
        h = np.zeros(x.size, np.float16)
        back = np.zeros(x.size, np_dtype(src))
        prog = elementwise(f"f16_{src.name}", x.size, [src], [
            (dtypes.float16, lambda v: UOp(C.CAST, dtypes.float16, (v,))),
            (src, lambda v, src=src: UOp(C.CAST, src, (UOp(C.CAST, dtypes.float16, (v,)),)))])
        run(be, prog, [h, back, x])
        assert values_equal(h, cast_array(x, src, dtypes.float16)), src.name
        assert values_equal(back, cast_array(cast_array(x, src, dtypes.float16), dtypes.float16, src)), src.name


def test_int64_to_bf16_rounds_once(backend: CBackend) -> None:
    """Regression: 2**53 + 2**45 + 1 is just above a bf16 halfway point; a double rounding through f32 lands even."""
    x = np.array([2**53 + 2**45 + 1, -(2**53 + 2**45 + 1), 2**62 + 2**54 + 1, 2**63 - 1, -(2**63)], np.int64)
    got = np.zeros(x.size, np.float32)
    run(backend, elementwise("i64_bf16", x.size, [dtypes.int64], [(dtypes.bfloat16, lambda v: UOp(
        C.CAST, dtypes.bfloat16, (v,)))]), [got, x])
    assert values_equal(got, cast_array(x, dtypes.int64, dtypes.bfloat16))
    assert got[0] == np.float32(2.0**53 + 2**46)


_SAME_WIDTH = [(s, d) for s, d in itertools.permutations(ALL, 2) if s.itemsize == d.itemsize and dtypes.bool
               not in (s, d) and dtypes.index not in (s, d)]


@pytest.mark.parametrize("bits", [16, 32, 64])
def test_bitcasts_match_semantics(backend: CBackend, bits: int) -> None:
    pairs_ = [(s, d) for s, d in _SAME_WIDTH if s.itemsize * 8 == bits]
    srcs = sorted({s for s, _ in pairs_}, key=lambda d: d.name)
    for s in srcs:
        x = edge_values(s)
        dsts = [d for ss, d in pairs_ if ss is s]
        prog = elementwise(f"bitcast_{s.name}", x.size, [s], [(d, lambda v, d=d: UOp(C.BITCAST, d, (v,)))
                                                              for d in dsts])
        results = [np.zeros(x.size, np_dtype(d)) for d in dsts]
        run(backend, prog, [*results, x])
        for d, got in zip(dsts, results, strict=True):
            assert values_equal(got, bitcast_array(x, s, d)), (s.name, d.name)


# ---- hand-written programs -------------------------------------------------------------------------------------------
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


def _program(text: str) -> UOp:
    root = parse_ir(text)
    return root.src[0] if root.op is C.SINK else root


def test_matmul_bias_relu_matches_numpy(backend: CBackend) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8), np.float32), rng.standard_normal((8, 3), np.float32)
    bias = rng.standard_normal(3, np.float32)
    out = np.full((4, 3), np.nan, np.float32)
    run(backend, _program(MATMUL), [out, a, b, bias])
    want = np.zeros((4, 3), np.float32)  # the same order of float additions as the program: k ascending from 0
    for k in range(8):
        want = want + a[:, k:k + 1] * b[k:k + 1, :]
    np.testing.assert_array_equal(out, np.maximum(want + bias, np.float32(0)))


def sequential_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in f32 with each output's products added in k order from 0, rounding every product and sum (what the
    reference interpreter computes, and what a kernel must match bit for bit)."""
    want = np.zeros(a.shape[:-1] + b.shape[-1:], np.float32)
    for k in range(a.shape[-1]):
        want = want + a[..., k:k + 1] * b[..., k:k + 1, :]
    return want


def packed_matmul_program(m: int, k: int, n: int) -> UOp:
    """The device program of an m x k @ k x n f32 matmul lowered for an AVX-512-like 2-thread target whatever the
    host: an 8 x 32 register tile, the column blocks across threads, each block's B panel packed into a
    kernel.local (on the heap when over 64 KiB)."""
    from uopir.frontend.tensor import Tensor
    from uopir.passes.manager import PassManager
    from uopir.passes.target import CPU, register_target

    register_target(CPU.derive(name="test-rich", max_vector_bytes=64, max_upcast=256, threads=2), replace=True)
    t = Tensor(np.zeros((m, k), np.float32), device="python") @ Tensor(np.zeros((k, n), np.float32), device="python")
    from uopir.ir.regions import map_regions

    out = PassManager.parse("default{target=test-rich}").run(UOp.sink(t.uop))
    progs: list[UOp] = []
    map_regions(out, lambda r: r.op is D.PROGRAM, lambda r: progs.append(r) or r)
    (prog,) = progs
    assert any(u.op is K.LOCAL for u in prog.src)
    return prog


@pytest.mark.parametrize("shape", [(64, 48, 64), (40, 160, 128)], ids=["stack-scratch", "heap-scratch"])
def test_packed_matmul_is_bit_identical(backend: CBackend, shape: tuple[int, int, int]) -> None:
    m, k, n = shape
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    out = np.full((m, n), np.nan, np.float32)
    prog = packed_matmul_program(m, k, n)
    src = CRenderer().render(prog)
    assert ("calloc(" in src) == (k * n * 4 > 65536) and ("free(" in src) == ("calloc(" in src)
    run(backend, prog, [out, a, b])
    np.testing.assert_array_equal(out, sequential_matmul(a, b))
    three = CBackend()
    three.runtime.threads = 3  # the column blocks split unevenly: each core packs the panels it computes
    out[:] = np.nan
    run(three, prog, [out, a, b])
    np.testing.assert_array_equal(out, sequential_matmul(a, b))


@pytest.mark.parametrize("shapes", [((1000, 1000), (1000, 1000)), ((33, 65), (65, 17)), ((3, 40, 24), (3, 24, 96)),
                                    ((256, 256), (256, 256))], ids=["1000", "33x65x17", "batched", "256"])
def test_realized_matmul_is_bit_identical(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    """Through Tensor on device c (the host's opts: packed panels on an AVX-512 machine)."""
    from uopir.frontend.tensor import Tensor

    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    got = (Tensor(a, device="c") @ Tensor(b, device="c")).numpy()
    np.testing.assert_array_equal(got, sequential_matmul(a, b))


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


@pytest.mark.parametrize(("n", "want"), [(8, 36), (3, 6 - 5000), (5, 15 - 3000), (0, None)])
def test_variable_gated_load_and_if(backend: CBackend, n: int, want: int | None) -> None:
    x = np.arange(1, 9, dtype=np.int32)
    out = np.array([12345], np.int32)
    run(backend, _program(GATED), [out, x[:max(n, 1)].copy() if n < 8 else x], {"n": n})
    assert out[0] == (12345 if want is None or want <= 0 else want)


def test_signature_params_in_index_order_then_vars_by_name() -> None:
    sig = kernel_signature(_program(GATED))
    assert sig.name == "gated" and sig.params == (dtypes.int32, dtypes.int32) and sig.vars == ("n",)
    src = CRenderer().render(_program(GATED))
    assert "void gated(int32_t* restrict data0, int32_t* restrict data1, int64_t n)" in src


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


def test_vector_load_alu_gep_vectorize_store(backend: CBackend) -> None:
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    run(backend, _program(VECTOR), [out, x])
    m = x.reshape(2, 4) * np.array([2, 3, 4, 5], np.float32)
    np.testing.assert_array_equal(out.reshape(2, 4), np.stack([m[:, 3], m[:, 0], m[:, 3], m[:, 0]], axis=1))


def test_value_used_after_its_loop_keeps_the_last_iteration(backend: CBackend) -> None:
    """A value computed inside a loop and read after it is declared at the function top."""
    out = param(0, dtypes.int64)
    loop = UOp(D.LOOP, dtypes.index, (idx(5),), 0)
    sq = loop * loop
    end = UOp(D.ENDLOOP, dtypes.void, (loop, sq))
    st = store(out, idx(0), sq)
    prog = program("escape", loop, sq, end, st)
    src = CRenderer().render(prog)
    assert src.index("int64_t v0;") < src.index("for (")
    got = np.zeros(1, np.int64)
    run(backend, prog, [got])
    assert got[0] == 16


def test_in_place_update_with_aliased_buffers_runs_the_no_restrict_variant(backend: CBackend) -> None:
    """out[i] = x[i-1] + 1 with out and x the same memory: without restrict the loop carries the dependency."""
    out, x = param(0, dtypes.int32), param(1, dtypes.int32)
    loop = UOp(D.LOOP, dtypes.index, (idx(63),), 0)
    ld = load(x, loop)
    v = ld + UOp.const(dtypes.int32, 1)
    st = store(out, loop + idx(1), v)
    prog = program("shift_add", loop, ld, v, st, UOp(D.ENDLOOP, dtypes.void, (loop, st)))
    buf = np.zeros(64, np.int32)
    run(backend, prog, [buf, buf])
    np.testing.assert_array_equal(buf, np.arange(64, dtype=np.int32))


def test_bad_programs_are_located_errors(backend: CBackend) -> None:
    text = """%c = core.const 4 : index
%s = device.special %c {kind = local_id, dim = 0} : index
%p = device.program %s {name = "k"}
core.sink %p
"""
    root = parse_ir(text)  # alive while the error is formatted: its parse holds the locations
    with pytest.raises(IRError) as e:
        CRenderer().render(root.src[0])
    assert "<string>:2:1" in e.value.diagnostics[0].format() and "device.special" in str(e.value)
    loop = UOp(D.LOOP, dtypes.index, (idx(4),), 0)
    with pytest.raises(IRError, match="never closed"):
        CRenderer().render(program("open", loop))


def test_compile_cache_hits_on_disk(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    cc = CCompiler()
    src = "int f(int x) { return x + 1; }\n"
    first = cc.compile_cached(src)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != USAGE_FILE]
    key = files[0].name.removesuffix(ENTRY_SUFFIX)
    assert len(files) == 1 and unseal(key, files[0].read_bytes()) == first
    files[0].write_bytes(seal(key, b"marker"))  # a second compile of the same source and flags reads the cache
    assert cc.compile_cached(src) == b"marker"
    assert CCompiler(flags=("-O1", "-fPIC", "-shared")).compile_cached(src) != b"marker"


def test_compile_error_names_the_compiler_output() -> None:
    from uopir.backends.c.compiler import CompileError

    with pytest.raises(CompileError, match="error"):
        CCompiler().compile("this is not C;\n")


# row sums of a 1000 x 37 matrix, one global id per row: the C backend splits the ids across cores
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


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_global_id_splits_across_cores(threads: int) -> None:
    be = CBackend()
    be.runtime.threads = threads
    prog = _program(PARALLEL)
    src = CRenderer().render(prog)
    assert "int64_t core_id, int64_t core_count)" in src
    assert "for (int64_t gidx0 = gsize0 * core_id / core_count; gidx0 < gsize0 * (core_id + 1) / core_count;" in src
    x = np.arange(37000, dtype=np.int64)
    out = np.full(1000, -1, np.int64)
    run(be, prog, [out, x])
    np.testing.assert_array_equal(out, x.reshape(1000, 37).sum(axis=1))


def test_bf16_loads_round_the_carrier(backend: CBackend) -> None:
    """A bf16 buffer filled from outside may hold any float32: what a kernel reads is that value rounded to bf16
    (as the reference interpreter reads it), never the raw carrier."""
    x = np.array([1.0 + 2**-9, 1.0 + 2**-8 + 2**-9, np.nan, -3.0000002, 1e-40], np.float32)
    out = np.zeros(x.size, np.float32)
    run(backend, elementwise("bf16_copy", x.size, [dtypes.bfloat16], [(dtypes.bfloat16, lambda v: v)]), [out, x])
    assert values_equal(out, bf16_round(x))
    assert out[0] == 1.0 and out[1] == np.float32(1.0 + 2**-7)


def test_cold_compiles_run_in_the_background_until_the_first_launch(tmp_path, monkeypatch) -> None:
    """On a cache miss compile returns at once (the compiler runs on a worker thread); the first launch waits for it
    and fills Program.binary; the next compile of the same source is a cache hit, loaded at once."""
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    be = CBackend()
    progs = [elementwise(f"k{i}", 8, [dtypes.int32], [(dtypes.int32, lambda v, i=i: v + UOp.const(dtypes.int32, i))])
             for i in range(3)]
    compiled = [be.compile(p) for p in progs]
    x = np.arange(8, dtype=np.int32)
    for i, p in enumerate(compiled):
        out = np.zeros(8, np.int32)
        be.runtime.launch(p, [out, x])
        np.testing.assert_array_equal(out, x + i)
        assert p.binary is not None and p.source is not None and p.program is progs[i]
    again = be.compile(progs[0])
    assert again.binary == compiled[0].binary  # read from the disk cache, loaded right away


def test_gated_load_of_an_empty_buffer_reads_nothing(backend: CBackend) -> None:
    """A branch-free gated load reads element 0 where its gate is off: an empty buffer is passed as a scratch
    element, so even a kernel whose gate is never on runs safely on one."""
    out, x = param(0, dtypes.float32), param(1, dtypes.float32)
    loop = UOp(D.LOOP, dtypes.index, (idx(4),), 0)
    gate = UOp(C.CMPLT, dtypes.bool, (loop, UOp(K.VAR, dtypes.index, (), ("n", 0, 4))))
    ld = UOp(K.LOAD, dtypes.float32, (UOp(K.INDEX, x.dtype, (x, loop)), UOp.const(dtypes.float32, -1.0), gate))
    st = store(out, loop, ld)
    prog = program("gated_empty", loop, gate, ld, st, UOp(D.ENDLOOP, dtypes.void, (loop, st)))
    got = np.zeros(4, np.float32)
    run(backend, prog, [got, np.zeros(0, np.float32)], {"n": 0})
    np.testing.assert_array_equal(got, [-1.0] * 4)
    run(backend, prog, [got, np.array([5.0, 6.0], np.float32)], {"n": 2})
    np.testing.assert_array_equal(got, [5.0, 6.0, -1.0, -1.0])


def _chain_program(n: int) -> UOp:
    """out[i] = x[i] passed n times through v*3 + k (int32, wrapping): a kernel of about 2n statements."""
    x = param(1, dtypes.int32)
    loop = UOp(D.LOOP, dtypes.index, (idx(4),), 0)
    v = load(x, loop)
    ops = [loop, v]
    for i in range(n):
        v = v * UOp.const(dtypes.int32, 3) + UOp.const(dtypes.int32, i)
        ops += [v.src[0], v]
    st = store(param(0, dtypes.int32), loop, v)
    return program("huge", *ops, st, UOp(D.ENDLOOP, dtypes.void, (loop, st)))


def test_a_huge_kernel_compiles_at_o1_with_cheap_register_allocation() -> None:
    """GCC is superlinear in a function's size: a kernel over HUGE_KERNEL statements gets -O1 with one-region IRA
    (its -O0 code ran 6-20x slower than the LLVM tier 0 it replaces), one over GIANT_KERNEL -O0; the values are the
    same."""
    from uopir.backends.c.renderer import GIANT_KERNEL, HUGE_KERNEL, HUGE_PRAGMA

    n = HUGE_KERNEL // 2 + 1
    prog = _chain_program(n)
    src = CRenderer().render(prog)
    assert HUGE_PRAGMA in src and '"O0"' not in src
    assert '#pragma GCC' not in CRenderer().render(_program(MATMUL))
    assert '#pragma GCC optimize ("O0")' in CRenderer().render(_chain_program(GIANT_KERNEL // 2 + 1))
    backend = CBackend()
    if not backend.available:
        pytest.skip("no C compiler")
    x = np.array([1, -7, 2**30, 12345], np.int32)
    ref = x.astype(np.int64)
    for i in range(n):
        ref = (ref * 3 + i + 2**31) % 2**32 - 2**31  # int32 wrap-around (-fwrapv)
    got = np.zeros(4, np.int32)
    run(backend, prog, [got, x])
    np.testing.assert_array_equal(got, ref.astype(np.int32))


def test_debug_levels_print_source_and_device_program(monkeypatch, capsys) -> None:
    """UOPIR_DEBUG=2: a line per kernel run; =4: the C source of each kernel compiled; =6: its device program too;
    and each compiled program exposes its name, source and device program."""
    from uopir import Tensor
    from uopir.backends.realize import clear_schedule_cache

    clear_schedule_cache()
    monkeypatch.setenv("UOPIR_DEBUG", "6")
    capsys.readouterr()
    y = (Tensor([1.0, 2.0, 3.0], device="c") * 4321.5).numpy()
    out = capsys.readouterr().out
    np.testing.assert_array_equal(y, np.array([1.0, 2.0, 3.0], np.float32) * np.float32(4321.5))
    assert "// device program of kernel" in out and "device.program" in out
    assert "// C source of kernel" in out and "4321.5f" in out and "void " in out
    assert out.rstrip().splitlines()[-1].startswith("*** c")
    prog = CBackend().compile(_program(MATMUL))
    assert prog.name == "r_4_3" and "void r_4_3(" in prog.source and prog.program.op is D.PROGRAM


def test_pooled_allocator_reuses_only_memory_nobody_holds() -> None:
    from uopir.backends.c.runtime import PooledHostAllocator

    al = PooledHostAllocator("c", budget=64)
    b = al.alloc(dtypes.float32, (4,))
    addr = b.handle.ctypes.data
    del b
    assert al.held == 16
    b2 = al.alloc(dtypes.float32, (2, 2))  # same element type and size: the same memory, reshaped in place
    assert b2.handle.ctypes.data == addr and b2.handle.shape == (2, 2) and al.held == 0
    view = b2.handle[:1]
    del b2
    assert al.held == 0  # a live view of it: never handed out again
    del view
    big = [al.alloc(dtypes.float64, (4,)) for _ in range(3)]  # 32 bytes each, budget 64
    del big
    assert al.held == 64
    other = al.alloc(dtypes.int32, (3,))
    assert other.handle.dtype == np.int32 and other.handle.shape == (3,)


# ---- the full optimized pipeline: tensor programs through default{target=c} ------------------------------------------
def _on_c(backend: CBackend, root: UOp, bufs: dict[int, np.ndarray]) -> tuple[list[np.ndarray], UOp]:
    """The outputs of tensor-level root lowered by `default{target=c}` (kernel-optimize and kernel-expand included)
    and run kernel by kernel on the C backend; and the lowered schedule."""
    from uopir.backends.python import evaluate
    from uopir.dialects import tensor as T
    from uopir.passes.manager import PassManager
    lowered = PassManager.parse("default{target=c}").run(root)
    order = lowered.toposort()
    host = {k: v.copy() for k, v in bufs.items()}
    for u in order:
        if u.op is T.BUFFER and u.arg[0] not in host:
            host[u.arg[0]] = np.full(u.arg[2], 7, np_dtype(u.dtype))  # garbage: every element must be written
    # an output that reads no call's result (a buffer as it was before the schedule) is read before the calls run
    outs = list(lowered.src) if lowered.op is C.SINK else [lowered]
    before = {i: np.asarray(evaluate(UOp.sink(o), host)[0]).copy() for i, o in enumerate(outs)
              if not any(u.op is T.AFTER for u in o.toposort())}
    for u in order:
        if u.op is T.CALL:
            run(backend, u.arg[0], [host[x.arg[0]] for x in u.src if x.op is T.BUFFER])
    # the calls have run: the other outputs are read from the buffers as they are now
    done = {u: u.src[0] for u in order if u.op is T.AFTER}
    after = evaluate(UOp.sink(*outs).substitute(done) if done else UOp.sink(*outs), host)
    return [before[i] if i in before else np.asarray(a) for i, a in enumerate(after)], lowered


def _same(got: list[np.ndarray], want: list, exact: bool) -> bool:
    """Bit for bit; with exact=False (programs using exp2/log2/sin, where libm and numpy differ in the last bits)
    within the float tolerance of uop-run --check."""
    from uopir.tools.uop_run import compare
    want = [np.asarray(w) for w in want]
    return len(got) == len(want) and all(compare(g, w, dtypes.float32, exact, "transcendental")[0]
                                         if g.dtype.kind == "f" and not exact else values_equal(g, w)
                                         for g, w in zip(got, want, strict=True))


def check_levels(backend: CBackend, root: UOp, seed: int = 0, tensor_level: bool = True) -> None:
    """tensor level (with tensor_level) == kernel level == device level (the lowered schedule on the reference
    interpreter) == C, on random inputs."""
    bufs = _input_arrays(root, np.random.default_rng(seed))
    got, lowered = _on_c(backend, root, bufs)
    exact = not any(u.op.name in TRANSCENDENTAL for u in root.toposort())
    levels = {"tensor": root} if tensor_level else {}
    levels |= {"kernel": tensor_to_kernel(root), "device": lowered}
    for name, g in levels.items():
        want = _run(g, bufs)[0]
        assert _same(got, want, exact), f"C differs from the {name} level\nprogram:\n{print_ir(root)}\n" \
                                        f"want {want}\ngot {got}"


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 3), st.booleans())
def test_random_programs_through_the_optimized_pipeline_match_the_interpreter(r, seed: int, wide: bool) -> None:
    backend = CBackend()
    check_levels(backend, (_WideGen if wide else _Gen)(r).program(), seed, tensor_level=False)


def _t(*shape: int):  # noqa: ANN202 - a frontend Tensor
    from uopir.frontend.tensor import Tensor
    return Tensor(np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32))


def test_optimized_kernels_on_c_match_at_every_level(backend: CBackend) -> None:
    """matmul (register-tiled, unrolled, split across the cores), conv with padding, reductions over each axis,
    softmax and gated pads: tensor == kernel == device == C level."""
    a, b = _t(64, 96), _t(96, 80)
    mm = UOp.sink((a @ b).uop)
    src = emit_c(mm)
    assert "core_id" in src and "f32x" in src  # split across the cores, vector types
    check_levels(backend, mm)
    img, w, bias = _t(2, 8, 18, 18), _t(16, 8, 3, 3), _t(16)
    check_levels(backend, UOp.sink(img.conv2d(w, bias, padding=1).relu().uop))
    x = _t(24, 40, 36)
    check_levels(backend, UOp.sink(x.sum(0).uop, x.sum(1).uop, x.sum(2).uop, x.max(0).uop, x.max(2).uop,
                                   x.sum((0, 2)).uop))
    check_levels(backend, UOp.sink(_t(32, 100).softmax().uop))
    p = _t(30, 45)
    check_levels(backend, UOp.sink(p.pad(((3, 5), (1, 17))).uop, (p.pad(((0, 2), (7, 0))) * 2.0).sum(0).uop))


def emit_c(root: UOp) -> str:
    """The C of every kernel of tensor-level root lowered by `default{target=c}`."""
    from uopir.ir.regions import regions_of
    from uopir.passes.manager import PassManager
    lowered = PassManager.parse("default{target=c}").run(root)
    return "\n".join(CRenderer().render(r) for u in lowered.toposort() for r in regions_of(u))


@pytest.mark.parametrize("src, dst", [("bfloat16", "uint16"), ("uint16", "bfloat16"), ("float32", "int32"),
                                      ("float16", "int16")])
def test_vector_bitcasts_lane_by_lane(src: str, dst: str) -> None:
    """kernel-expand makes the bitcast of an elementwise kernel a vector op; bf16 rides as a float carrier, so its
    lanes are bitcast one by one (a memcpy of the carrier would move the wrong bits)."""
    from uopir import Tensor
    from uopir.ir.dtype import dtypes as dt
    s, d = getattr(dt, src), getattr(dt, dst)
    x = edge_values(s)
    x = np.resize(x, 64)
    got = Tensor(x, dtype=s, device="c").bitcast(d).numpy()
    assert values_equal(got, bitcast_array(x, s, d))


def test_gcc_slp_workaround(tmp_path) -> None:
    """A kernel GCC 12's SLP vectorizer got wrong with -march=native on AVX-512 (bool lanes built into vectors):
    with the backend's default flags it must give what -O0 gives."""
    import ctypes
    from pathlib import Path

    cc = CCompiler()
    if not cc.available:
        pytest.skip("no C compiler")
    source = (Path(__file__).parent / "data" / "gcc_slp_bool_lanes.c").read_text()
    ranks = np.arange(5, dtype=np.int32)
    x = np.array([(-1.0 if i % 5 % 2 else 1.0) * i for i in range(20)], dtype=np.float32)

    def run(compiler: CCompiler, name: str) -> np.ndarray:
        so = tmp_path / f"{name}.so"
        so.write_bytes(compiler.compile(source))
        fn = ctypes.CDLL(str(so)).r_4_5
        out = np.zeros(20, dtype=np.float32)
        ptr = ctypes.c_void_p
        fn.argtypes = [ptr, ptr, ptr, ptr]
        fn(out.ctypes.data, ranks.ctypes.data, ranks.ctypes.data, x.ctypes.data)
        return out

    reference = run(CCompiler(cc.cmd, ("-O0", "-fPIC", "-shared", "-std=gnu11", "-w")), "o0")
    assert np.count_nonzero(reference[5:]) > 10  # the rows the miscompile zeroed are not zero
    np.testing.assert_array_equal(run(cc, "default"), reference)
