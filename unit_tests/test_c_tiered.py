"""The C backend's tiered compile (uopir.backends.c.tiered): a kernel not in the disk cache first runs compiled in
process by LLVM (tier 0) while the C compiler builds its binary in a detached process; a later launch switches to it.

Both tiers must compute the same bits: the ALU and cast edge-value kernels of device_programs and a few realized
programs run on each tier and their outputs are compared byte for byte (NaN payloads and signed zeros included).
The switch is tested with a pending binary this test completes itself (a Future), so it never depends on how fast
the compiler is. Skipped without a C compiler or without llvmlite.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from concurrent.futures import Future

import numpy as np
import pytest
from device_programs import ALL, SEMANTICS_CASES, alu_kernel, cast_inputs, cast_kernel, elementwise

from uopir.backends import realize as R
from uopir.backends.c.backend import CBackend
from uopir.backends.c.compiler import CCompiler, DetachedCompile, find_cc
from uopir.backends.c.renderer import kernel_signature
from uopir.backends.c.runtime import CKernel, TieredKernel
from uopir.backends.c.tiered import TIERED_ENV, llvm_available, tier0_address, tiered_enabled
from uopir.backends.cache import ENTRY_SUFFIX, USAGE_FILE, cache_key, cache_path, unseal
from uopir.dialects.semantics import np_dtype
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

pytestmark = pytest.mark.skipif(find_cc() is None or not llvm_available(),
                                reason="needs a C compiler and llvmlite (the test extra)")


class Tier0Only(CBackend):
    """Every kernel runs on tier 0 (its C binary never arrives: the pending compile is a Future left unset)."""

    def compile(self, program: UOp, name: str | None = None):
        src = self.renderer.render(program)
        addr = tier0_address(program)
        assert addr is not None, f"LLVM could not compile kernel {program.arg}"
        prog = self.runtime.load_tiered(name or program.arg, program, src, Future(), lambda: addr)
        return prog


@pytest.fixture(scope="module")
def c_backend() -> CBackend:
    return CBackend(CCompiler())  # an explicit compiler: C binaries only (-O2), never tier 0


@pytest.fixture(scope="module")
def tier0() -> Tier0Only:
    return Tier0Only(CCompiler())


def _same_bits(prog: UOp, arrays: list[np.ndarray], c_backend: CBackend, tier0: Tier0Only, n_out: int) -> None:
    """Run prog on both tiers on copies of `arrays` (the first n_out are outputs) and compare every byte."""
    got_c = [a.copy() for a in arrays]
    got_0 = [a.copy() for a in arrays]
    p_c, p_0 = c_backend.compile(prog), tier0.compile(prog)
    c_backend.runtime.launch(p_c, got_c)
    tier0.runtime.launch(p_0, got_0)
    assert p_0.entry.tier == "llvm" and p_c.binary is not None
    for k in range(n_out):
        bad = np.flatnonzero(got_c[k].view(np.uint8) != got_0[k].view(np.uint8))
        assert bad.size == 0, (prog.arg, k, got_c[k].view(np.uint8)[bad[:8]], got_0[k].view(np.uint8)[bad[:8]])


WIDE = (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.int32, dtypes.uint8)  # 16-lane vectors too


@pytest.mark.parametrize(("d", "width"), [*((d, 1) for d in ALL), *((d, 16) for d in WIDE)],
                         ids=lambda v: v.name if isinstance(v, DType) else f"x{v}")
def test_alu_ops_same_bits_on_both_tiers(c_backend, tier0, d: DType, width: int) -> None:
    """Every binary, unary and ternary op of the ALU edge-value kernel (transcendentals too) on all pairs of edge
    values, lane by lane and (some dtypes) on 16-lane vectors: tier 0 writes the very bytes the C binary writes."""
    prog, outs, a, b = alu_kernel(d, width)
    results = [np.zeros(a.size, np_dtype(rd)) for _, rd in outs]
    _same_bits(prog, [*results, a, b], c_backend, tier0, len(results))


@pytest.mark.parametrize("src", ALL, ids=lambda d: d.name)
def test_casts_same_bits_on_both_tiers(c_backend, tier0, src: DType) -> None:
    x = cast_inputs(src, SEMANTICS_CASES["c"])  # the C row's inputs: the same kernel, a compile cache hit there
    prog, dsts = cast_kernel(src, x.size)
    results = [np.zeros(x.size, np_dtype(d)) for d in dsts]
    _same_bits(prog, [*results, x], c_backend, tier0, len(results))


def _programs():
    from uopir.frontend.tensor import Tensor

    rng = np.random.default_rng(5)
    a = rng.standard_normal((33, 70), dtype=np.float32)
    a[3, 4], a[7, 1] = np.nan, -0.0
    b = rng.standard_normal((70, 17), dtype=np.float32)
    x = rng.standard_normal((2, 3, 9, 9), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    i = rng.integers(-1000, 1000, (64,), dtype=np.int32)
    return [
        lambda: Tensor(a, device="c") @ Tensor(b, device="c"),
        lambda: Tensor(a, device="c").softmax(axis=1),
        lambda: Tensor(x, device="c").conv2d(Tensor(w, device="c"), padding=1).relu().max(axis=(2, 3)),
        lambda: (Tensor(i, device="c") // 7 + Tensor(i, device="c") % -5) << 3,
        lambda: Tensor(a, device="c").sum(axis=0).exp2() + Tensor(a, device="c").max(axis=0).sin(),
    ]


@pytest.mark.parametrize("k", range(5))
def test_realized_programs_same_bits_on_both_tiers(c_backend, tier0, k: int) -> None:
    """Whole schedules (matmul, softmax, conv + relu + max, integer division/modulo/shift, reduces into
    transcendentals) realized on each tier: the same bytes."""
    t = _programs()[k]()
    got_c = R.realize(c_backend, t.uop).numpy()
    got_0 = R.realize(tier0, t.uop).numpy()
    assert got_c.shape == got_0.shape and got_c.dtype == got_0.dtype
    assert np.array_equal(got_c.view(np.uint8), got_0.view(np.uint8))


def _adder(i: int) -> UOp:
    return elementwise(f"tier_add{i}", 64, [dtypes.int32],
                       [(dtypes.int32, lambda v, i=i: v * UOp.const(dtypes.int32, 3) + UOp.const(dtypes.int32, i))])


def test_launches_switch_to_the_c_binary_once_it_is_built() -> None:
    """Launches before the binary is built run tier 0 (counted); the first launch after switches for good and fills
    Program.binary; results are the same throughout."""
    be = CBackend(CCompiler())
    prog = _adder(1)
    src = be.renderer.render(prog)
    pending: Future[bytes] = Future()
    p = be.runtime.load_tiered("k", prog, src, pending, lambda: tier0_address(prog))
    x = np.arange(-32, 32, dtype=np.int32)
    want = x * 3 + 1
    for _ in range(3):
        out = np.zeros(64, np.int32)
        be.runtime.launch(p, [out, x])
        np.testing.assert_array_equal(out, want)
    assert isinstance(p.entry, TieredKernel) and p.entry.tier == "llvm" and p.binary is None
    assert p.entry.tier0_launches == 2  # the first launch loaded tier 0, two more ran on it
    pending.set_result(be.compiler.compile(src))
    out = np.zeros(64, np.int32)
    be.runtime.launch(p, [out, x])
    np.testing.assert_array_equal(out, want)
    assert p.entry.tier == "c" and p.binary == pending.result()


def test_finish_waits_for_the_c_binary() -> None:
    be = CBackend(CCompiler())
    prog = _adder(2)
    src = be.renderer.render(prog)
    done: Future[bytes] = Future()
    done.set_result(be.compiler.compile(src))
    p = be.runtime.load_tiered("k", prog, src, done, lambda: tier0_address(prog))
    be.runtime.ready(p)  # the binary is built already: no tier 0
    assert p.entry.tier == "c"
    be.runtime.finish(p)
    assert p.binary == done.result()


def test_a_cold_compile_is_tiered_and_fills_the_cache(tmp_path, monkeypatch) -> None:
    """CBackend() on an empty cache: the kernel's compile is detached (its binary lands in the cache, atomically:
    no temporary file is left), the program runs right away; a second backend then loads the C binary directly."""
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(TIERED_ENV, "1")
    be = CBackend()
    prog = _adder(3)
    p = be.compile(prog)
    assert isinstance(p.entry, TieredKernel)
    pending = p.entry._binary  # noqa: SLF001
    assert isinstance(pending, DetachedCompile)
    x = np.arange(64, dtype=np.int32)
    out = np.zeros(64, np.int32)
    be.runtime.launch(p, [out, x])
    np.testing.assert_array_equal(out, x * 3 + 3)
    be.runtime.finish(p)
    assert p.entry.tier == "c"
    src = be.renderer.render(prog)
    cc = be.quick_compiler
    entry = cache_path(cc.name, cache_key(cc.name, cc.flags, src))
    assert unseal(entry.name.removesuffix(ENTRY_SUFFIX), entry.read_bytes()) == p.binary  # a checked entry
    assert [f.name for f in entry.parent.iterdir()] == [entry.name]
    again = CBackend().compile(prog)
    assert type(again.entry) is CKernel and again.binary == p.binary


def test_tiering_is_off_when_asked(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(TIERED_ENV, "0")
    assert not tiered_enabled()
    p = CBackend().compile(_adder(4))
    assert type(p.entry) is CKernel
    monkeypatch.setenv(TIERED_ENV, "1")
    assert tiered_enabled()
    p = CBackend(CCompiler()).compile(_adder(5))  # an explicit compiler: its binaries from the first launch
    assert type(p.entry) is CKernel


def test_exit_abandons_the_compile_and_the_entry_appears_whole(tmp_path) -> None:
    """A process that exits right after its first (tier 0) launch does not wait for the C compiler; the detached
    compile still puts a complete binary in the cache, and no temporary file stays."""
    code = (
        "import numpy as np\n"
        "from uopir.frontend.tensor import Tensor\n"
        "t = Tensor(np.arange(4096, dtype=np.float32), device='c')\n"
        "print(((t * 3 + 1).sqrt()).numpy()[:2])\n"
        "from uopir.backends.c import compiler\n"
        "print('running', len(compiler._RUNNING))\n"
    )
    env = {**os.environ, "UOPIR_CACHE_DIR": str(tmp_path), TIERED_ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for _ in range(600):  # the detached compile finishes on its own
        files = [f for f in tmp_path.rglob("*") if f.is_file() and f.name != USAGE_FILE]
        if files and not any(f.name.startswith(".tmp-") for f in files):
            break
        time.sleep(0.1)
    files = [f for f in tmp_path.rglob("*") if f.is_file() and f.name != USAGE_FILE]
    assert len(files) == 1 and files[0].name.endswith(ENTRY_SUFFIX)
    assert unseal(files[0].name.removesuffix(ENTRY_SUFFIX), files[0].read_bytes())[:4] == b"\x7fELF"


def test_detached_compiles_run_at_most_one_per_core(tmp_path, monkeypatch) -> None:
    """Many cold kernels at once: their compiles queue and start at most one per core; each binary arrives whole and
    runs."""
    from uopir.backends.c import compiler as cc_mod
    from uopir.backends.c.runtime import load_library

    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    cc = CCompiler()
    be = CBackend(cc)
    progs = [_adder(10 + i) for i in range(6)]
    jobs = [cc.compile_detached(be.renderer.render(p)) for p in progs]
    assert all(isinstance(j, DetachedCompile) for j in jobs)
    limit = max(1, os.cpu_count() or 1)
    while not all(j.done() for j in jobs):
        assert len(cc_mod._RUNNING) <= limit
        time.sleep(0.005)
    x = np.arange(64, dtype=np.int32)
    for i, (p, j) in enumerate(zip(progs, jobs, strict=True)):
        fn = getattr(load_library(j.result()), kernel_signature(p).name)
        out = np.zeros(64, np.int32)
        fn(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(x.ctypes.data))
        np.testing.assert_array_equal(out, x * 3 + 10 + i)


def test_wait_background_leaves_every_queued_compile_sealed(tmp_path) -> None:
    """More cold kernels than cores: wait_background returns only when the queued compiles have run too, so the next
    process finds every binary (a process exiting without it drops the compiles still queued)."""
    code = (
        "import numpy as np\n"
        "from uopir.frontend.tensor import Tensor\n"
        "from uopir.backends.c.compiler import wait_background\n"
        "t = Tensor(np.arange(256, dtype=np.float32), device='c')\n"
        "for k in range(6):\n"
        "    (t * (k + 2) + k).numpy()\n"
        "wait_background()\n"
    )
    env = {**os.environ, "UOPIR_CACHE_DIR": str(tmp_path), TIERED_ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    files = [f for f in tmp_path.rglob("*") if f.is_file() and f.name != USAGE_FILE]  # at once: nothing still running
    assert len(files) >= 6 and all(f.name.endswith(ENTRY_SUFFIX) for f in files), sorted(f.name for f in files)
    for f in files:
        assert unseal(f.name.removesuffix(ENTRY_SUFFIX), f.read_bytes())[:4] == b"\x7fELF"


def test_the_llvm_prefetch_thread_imports_no_uopir_module():
    """The prefetch thread runs beside the main thread's imports; if it imported uopir modules (the llvm backend),
    two threads could each hold a module lock the other waits for and Python raises _DeadlockError in one of them (it
    did: `available()` in a fresh process with an empty cache failed about one run in three)."""
    code = ("import sys; from uopir.backends.c import tiered; before = set(sys.modules); tiered._load_llvm(); "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith('uopir')), 'llvmlite.binding' in "
            "sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True"]


def test_a_jit_replays_natively_once_slow_binaries_arrive(tmp_path, monkeypatch) -> None:
    """A TinyJit replays the Python way while its kernels' C binaries are still compiling (tier 0), however many
    replays that takes, and goes to the native launch graph as soon as they are built (a slow compiler: a real one
    behind a sleep)."""
    import shlex

    from uopir import Tensor, TinyJit
    from uopir.backends import registry
    from uopir.backends.cpu import graph as G
    from uopir.frontend.jit import _NativeReplay

    if G.native() is None:
        pytest.skip("no native launch graph")
    slow = tmp_path / "slow-cc"
    slow.write_text(f'#!/bin/sh\nsleep 2\nexec {shlex.join(find_cc())} "$@"\n')
    slow.chmod(0o755)
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(TIERED_ENV, "1")
    monkeypatch.setenv("CC", str(slow))
    be = CBackend()
    monkeypatch.setitem(registry._INSTANCES, "c", be)  # noqa: SLF001 - this test's backend serves device "c"
    f = TinyJit(lambda x: ((x * 3.0).realize() + 1.0).realize())
    x = np.arange(64, dtype=np.float32)
    for i in range(100):  # more replays than the old limit of 64 attempts, well within the compiler's 2 s
        np.testing.assert_array_equal(f(Tensor(x + i, device="c")).numpy(), (x + i) * 3 + 1)
    kernels = [st.program.entry for s in f.steps for st in s.launch.plan.steps]
    if all(k._binary.done() for k in kernels if isinstance(k, TieredKernel)):  # noqa: SLF001
        pytest.skip("the binaries were built before the replays ended (a very slow machine)")
    assert not isinstance(f._graph, _NativeReplay)  # noqa: SLF001
    for k in kernels:
        k._binary.result()  # noqa: SLF001 - wait for the compiler
    np.testing.assert_array_equal(f(Tensor(x, device="c")).numpy(), x * 3 + 1)
    assert isinstance(f._graph, _NativeReplay)  # noqa: SLF001
