"""The C backend: what its renderer prints (signatures, restrict, core ranges, kernel.local scratch, pragmas for huge
kernels), its compiler and disk cache, the portable f16 code of its prelude, its pooled allocator, and tensor
programs through the optimized pipeline (default{target=c}) against the reference interpreter at every level.

Every core op, cast and bitcast on edge values, and the hand-written device programs, run on c beside the other
compiled devices in test_backend_semantics and test_backend_programs (builders in device_programs). Skipped when no
C compiler is installed.
"""
from __future__ import annotations

import numpy as np
import pytest
from device_programs import (
    GATED,
    MATMUL,
    PARALLEL,
    TRANSCENDENTAL,
    edge_values,
    elementwise,
    escape_program,
    idx,
    load,
    packed_matmul_program,
    param,
    parse_program,
    program,
    run,
    sequential_matmul,
    shared_backend,
    store,
)
from fuzz_lowered import on_c
from hypothesis import given, settings
from hypothesis import strategies as st
from test_device_lowering import _run, _WideGen
from test_tensor_to_kernel import _Gen, _input_arrays

from uopir.backends.c.backend import CBackend
from uopir.backends.c.compiler import _OBJ, _OUT, BASE_FLAGS, CCompiler, CompileError, _link_plan, find_cc, is_gcc
from uopir.backends.c.renderer import CRenderer, kernel_signature
from uopir.backends.cache import ENTRY_SUFFIX, USAGE_FILE, seal, unseal
from uopir.backends.python.magnitude import reorder_magnitudes
from uopir.backends.tolerance import op_class
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects.semantics import bitcast_array, cast_array, np_dtype, values_equal
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import dtypes
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.tensor_to_kernel import tensor_to_kernel

pytestmark = pytest.mark.skipif(find_cc() is None, reason="no C compiler ($CC, clang or cc) is installed")


@pytest.fixture(scope="module")
def backend() -> CBackend:
    return shared_backend("c")  # every kernel at the default flags (-O2), small ones too


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


@pytest.mark.parametrize("shape", [(128, 48, 64), (128, 160, 128)], ids=["stack-scratch", "heap-scratch"])
def test_packed_matmul_scratch_is_heap_over_64k_and_never_zeroed(shape: tuple[int, int, int]) -> None:
    """The packed panels' kernel.local: a stack array, or over 64 KiB aligned heap memory freed at return; neither
    is zeroed (the copy writes the panel first: a calloc was a pass over it per launch). test_backend_programs runs
    it."""
    m, k, n = shape
    src = CRenderer().render(packed_matmul_program(m, k, n))
    heap = k * n * 4 > 65536
    assert ("aligned_alloc(64, " in src) == heap and ("free(" in src) == heap
    assert "calloc" not in src and "memset" not in src and "= {0}" not in src


@pytest.mark.parametrize("shapes", [((1000, 1000), (1000, 1000)), ((33, 65), (65, 17)), ((3, 40, 24), (3, 24, 96)),
                                    ((256, 256), (256, 256))], ids=["1000", "33x65x17", "batched", "256"])
def test_realized_matmul_is_bit_identical(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    """Through Tensor on device c (the host's opts: packed panels on an AVX-512 machine): each output a sequential
    sum in k order, of multiply-adds fused or not (device-contract fuses a kernel with enough independent sums, on a
    host with FMA). Of the 1000x1000 product, bit for bit the first, middle and last 24 rows (three row tiles each:
    every column block, tail and thread's share; the reference's exact fma costs ~15 numpy passes per k), the rest
    within rounding of a float64 product."""
    from uopir.frontend.tensor import Tensor

    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    got = (Tensor(a, device="c") @ Tensor(b, device="c")).numpy()
    rows = np.r_[0:24, 488:512, 976:1000] if a.shape[0] == 1000 else np.arange(a.shape[-2])
    fused, plain = sequential_matmul(a[..., rows, :], b, fused=True), sequential_matmul(a[..., rows, :], b)
    assert values_equal(got[..., rows, :], fused) or values_equal(got[..., rows, :], plain)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=0, atol=1e-4 * np.sqrt(a.shape[-1]))


def test_signature_params_in_index_order_then_vars_by_name() -> None:
    sig = kernel_signature(parse_program(GATED))
    assert sig.name == "gated" and sig.params == (dtypes.int32, dtypes.int32) and sig.vars == ("n",)
    src = CRenderer().render(parse_program(GATED))
    assert "void gated(int32_t* restrict data0, int32_t* restrict data1, int64_t n)" in src


def test_value_used_after_its_loop_is_declared_at_the_function_top() -> None:
    """A value computed inside a loop and read after it (test_backend_programs runs it) is declared before the loop."""
    src = CRenderer().render(escape_program())
    assert src.index("int64_t v0;") < src.index("for (")


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


def test_global_id_splits_across_cores_renders_a_core_range() -> None:
    """Each core runs its share of gidx0 (test_backend_programs runs it on 1, 2, 3 and 7 cores)."""
    src = CRenderer().render(parse_program(PARALLEL))
    assert "int64_t core_id, int64_t core_count)" in src
    assert "for (int64_t gidx0 = gsize0 * core_id / core_count; gidx0 < gsize0 * (core_id + 1) / core_count;" in src


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
    assert '#pragma GCC' not in CRenderer().render(parse_program(MATMUL))
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
    out = capsys.readouterr().err
    np.testing.assert_array_equal(y, np.array([1.0, 2.0, 3.0], np.float32) * np.float32(4321.5))
    assert "// device program of kernel" in out and "device.program" in out
    assert "// C source of kernel" in out and "4321.5f" in out and "void " in out
    assert out.rstrip().splitlines()[-1].startswith("*** c")
    prog = CBackend().compile(parse_program(MATMUL))
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


def test_large_host_buffers_start_on_a_cache_line() -> None:
    """numpy puts a large array 16 bytes past a page start: every 64-byte vector load would span two cache lines.
    A Tensor's copy of it, a kernel's output and pooled memory start on 64 bytes; pooled memory whose byte block a
    view still holds is never handed out again."""
    from uopir.backends.buffers import buffer_of
    from uopir.backends.c.runtime import PooledHostAllocator
    from uopir.backends.interface import ALIGN_MIN_BYTES
    from uopir.frontend.tensor import Tensor

    n = ALIGN_MIN_BYTES // 4 + 3
    x = np.arange(n, dtype=np.float32)
    t = Tensor(x, device="c")
    y = (t + 1).realize()
    for h in (buffer_of(t.uop).handle, buffer_of(y.uop).handle):
        assert h.ctypes.data % 64 == 0 and h.shape == (n,)
    np.testing.assert_array_equal(y.numpy(), x + 1)
    al = PooledHostAllocator("c", budget=1 << 20)
    b = al.alloc(dtypes.float32, (n,))
    addr = b.handle.ctypes.data
    assert addr % 64 == 0
    del b
    b = al.alloc(dtypes.float32, (n,))
    assert b.handle.ctypes.data == addr  # reused
    view = b.handle.base[64:]  # the byte block behind it, held elsewhere
    del b
    assert al.held == 0 and al.alloc(dtypes.float32, (n,)).handle.ctypes.data != addr
    del view


# ---- the full optimized pipeline: tensor programs through default{target=c} ------------------------------------------
def _on_c(backend: CBackend, root: UOp, bufs: dict[int, np.ndarray]) -> tuple[list[np.ndarray], UOp]:
    """The outputs of tensor-level root lowered by `default{target=c}` (kernel-optimize and kernel-expand included)
    and run kernel by kernel on the C backend; and the lowered schedule."""
    from uopir.passes.manager import PassManager
    lowered = PassManager.parse("default{target=c}").run(root)
    return on_c(backend, lowered, bufs), lowered


def _same(got: list[np.ndarray], want: list, cls: str, root: UOp | None = None,
          mags: list[np.ndarray] | None = None) -> bool:
    """Bit for bit under op class "exact"; else within the float tolerance of uop-run --check for that class
    (programs using exp2/log2/sin, where libm and numpy differ in the last bits; float sums the target may reorder,
    measured against each element's reorder magnitude `mags` when given) in the dtype of root's output."""
    from uopir.tools.uop_run import compare
    want = [np.asarray(w) for w in want]
    outs = (list(root.src) if root.op is C.SINK else [root]) if root is not None else []
    dts = [o.dtype for o in outs] if len(outs) == len(got) else [dtypes.float32] * len(got)
    return len(got) == len(want) and all(
        compare(g, w, d if d.is_float else dtypes.float32, cls == "exact", cls, None if mags is None else m)[0]
        if g.dtype.kind == "f" and cls != "exact" else values_equal(g, w)
        for g, w, d, m in zip(got, want, dts, mags or [None] * len(got), strict=True))


def check_levels(backend: CBackend, root: UOp, seed: int = 0, tensor_level: bool = True) -> None:
    """tensor level (with tensor_level) == kernel level == device level (the lowered schedule on the reference
    interpreter) == C, on random inputs."""
    bufs = _input_arrays(root, np.random.default_rng(seed))
    got, lowered = _on_c(backend, root, bufs)
    trans = any(u.op.name in TRANSCENDENTAL for u in root.toposort())
    # the device level runs the kernels as lowered (a float sum in the order kernel-optimize chose): C matches it bit
    # for bit but for libm; the levels above sum in index order, which partial accumulators change within tolerance
    above = op_class(root)
    mags = reorder_magnitudes(root, bufs) if above != "exact" else None
    levels = {"tensor": root} if tensor_level else {}
    levels |= {"kernel": tensor_to_kernel(root), "device": lowered}
    for name, g in levels.items():
        want = _run(g, bufs)[0]
        cls = ("transcendental" if trans else "exact") if name == "device" else above
        assert _same(got, want, cls, root, None if name == "device" else mags), \
            f"C differs from the {name} level\nprogram:\n{print_ir(root)}\nwant {want}\ngot {got}"


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
    a, b = _t(64, 96), _t(96, 96)  # 589,824 iterations: above the host's parallel_min_work (1 << 19)
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


def test_clang_compiles_in_two_steps_and_links_what_one_step_links(tmp_path) -> None:
    """With clang the compile is `clang -c` then the linker command of clang's own `-###` plan (a second clang start
    cost ~20 ms a kernel): libgcc (128-bit division) and libm still resolve, and a C error is still reported."""
    import ctypes

    cmd = find_cc()
    if cmd is None or is_gcc(cmd):
        pytest.skip("the two-step compile is clang's (GCC compiles and links in one step)")
    cc = CCompiler(cmd)
    plan = _link_plan(tuple(cc.cmd), cc.flags)
    assert plan is not None and plan.count(_OBJ) == 1 and plan.count(_OUT) == 1 and "-lm" in plan
    src = ("#include <math.h>\nlong long f(long long a, long long b, float x) {\n"
           "  return (long long)((__int128)a * 1000000007 / b) + (long long)sinf(x);\n}\n")
    lib_path = tmp_path / "k.so"
    lib_path.write_bytes(cc.compile(src))
    fn = ctypes.CDLL(str(lib_path)).f
    fn.restype, fn.argtypes = ctypes.c_longlong, [ctypes.c_longlong, ctypes.c_longlong, ctypes.c_float]
    assert fn(10**12, 3000, 0.5) == 10**12 * 1000000007 // 3000  # the product needs 128 bits
    with pytest.raises(CompileError, match="-c"):
        cc.compile("int f( {")
