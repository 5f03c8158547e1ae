"""Kernels that do little work compile with QUICK_FLAGS (-O1; a cold start waits for their compile) and big ones
with the default flags (-O2): the choice by estimated work, the wiring through the disk cache, and the -O1 code's
results bit for bit on the edge-value kernels of device_programs (test_backend_semantics runs them all on c at -O2).
"""
from __future__ import annotations

import numpy as np
import pytest
from device_programs import SEMANTICS_CASES, check_alu_ops, check_casts

from uopir.backends.c.backend import QUICK_WORK, CBackend, quick
from uopir.backends.c.compiler import BASE_FLAGS, QUICK_FLAGS, CCompiler, find_cc
from uopir.backends.cache import cache_get, cache_key
from uopir.backends.emit import programs
from uopir.backends.realize import cache_key as schedule_key
from uopir.dialects.semantics import values_equal
from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes

pytestmark = pytest.mark.skipif(find_cc() is None, reason="no C compiler ($CC, clang or cc) is installed")


def _programs(t: Tensor) -> list:
    """The device.programs realizing t on c would compile (lowered only, nothing compiled)."""
    key, *_ = schedule_key(t.uop)
    return programs(CBackend(CCompiler()).lower(key))


def test_quick_flags_are_the_default_ones_at_o1():
    assert QUICK_FLAGS[0] == "-O1" and BASE_FLAGS[0] == "-O2" and QUICK_FLAGS[1:] == BASE_FLAGS[1:]


def test_work_decides_the_flags():
    small = Tensor(np.ones((8, 8), np.float32), device="c")
    (p,) = _programs(small * 2 + 1)
    assert quick(p)
    n = 512  # 2 * 512^3 flops: far above QUICK_WORK
    assert 2 * n ** 3 > QUICK_WORK
    big = Tensor(np.ones((n, n), np.float32), device="c")
    (q,) = _programs(big @ big)
    assert not quick(q)
    wide = Tensor(np.ones((1 << 22,), np.float32), device="c")  # 16 MiB moved: above QUICK_WORK bytes
    (r,) = _programs(wide + 1)
    assert not quick(r)


def test_realize_compiles_small_kernels_with_quick_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    be = CBackend()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor(x, device="c")
    (p,) = _programs(t.sum(axis=1))
    prog = be.compile(p, "k")
    prog.entry.ready()
    src = be.renderer.render(p)
    name = be.compiler.name
    assert cache_get(name, cache_key(name, be.quick_compiler.flags, src)) == prog.binary
    assert cache_get(name, cache_key(name, be.compiler.flags, src)) is None  # not compiled at -O2 too
    out = be.allocator.from_numpy(np.zeros(3, np.float32), dtypes.float32)
    be.runtime.launch(prog, [out, be.allocator.from_numpy(x, dtypes.float32)])
    assert np.array_equal(out.numpy(), x.sum(axis=1))


@pytest.fixture(scope="module")
def quick_backend() -> CBackend:
    return CBackend(CCompiler(flags=QUICK_FLAGS))


@pytest.mark.parametrize("width", [1, 16], ids=lambda w: f"x{w}")
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.int32, dtypes.uint8],
                         ids=lambda d: d.name)
def test_alu_ops_at_o1_match_semantics_bit_for_bit(quick_backend: CBackend, d, width: int) -> None:
    check_alu_ops(quick_backend, d, width)


@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64, dtypes.int64], ids=lambda d: d.name)
def test_casts_at_o1_match_semantics_bit_for_bit(quick_backend: CBackend, src) -> None:
    check_casts(quick_backend, src, SEMANTICS_CASES["c"])


def test_small_cnn_forward_on_quick_kernels_matches_numpy():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import cnn

    params = cnn.init_params()
    x = np.random.default_rng(1).standard_normal((2, 1, 28, 28), dtype=np.float32)
    got = cnn.forward(Tensor(x, device="c"), {k: Tensor(v, device="c") for k, v in params.items()}).numpy()
    want = cnn.forward_numpy(x, params)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
    assert not values_equal(got, np.zeros_like(got))


# ---- compiling while lowering ---------------------------------------------------------------------------------------
def _cnn_like(device: str = "c") -> Tensor:
    rng = np.random.default_rng(3)
    x = Tensor(rng.standard_normal((2, 1, 9, 9), dtype=np.float32), device=device)
    w = Tensor(rng.standard_normal((3, 1, 3, 3), dtype=np.float32), device=device)
    h = x.conv2d(w).relu()
    return h.reshape(2, -1).sum(axis=1) + h.max()


def test_per_kernel_lowering_gives_the_same_schedule():
    from uopir.passes.manager import PassManager

    for t in (_cnn_like(), Tensor(np.ones((4, 5), np.float32), device="c").sum(axis=0) * 2):
        key, *_ = schedule_key(t.uop)
        flat = PassManager.parse("default{target=c}").run(key)
        nested = PassManager.parse("default{target=c per-kernel=true}").run(key)
        assert nested is flat
        assert len(programs(flat)) >= 1


def test_realize_starts_each_compile_while_lowering():
    from uopir.backends import realize as R

    be = CBackend()
    t = _cnn_like()
    key, *_ = schedule_key(t.uop)
    cache = R._Cache()
    lowered = be.lower(key, instruments=[R._CompileAhead(be, cache)])
    progs = programs(lowered)
    assert len(progs) >= 2 and set(cache.programs) == set(progs)  # each compile started during the lowering
    got = t.numpy()  # the whole realize path (its own caches) gives the interpreter's values
    want = _cnn_like("python").numpy()
    assert got.shape == (2,) and np.allclose(got, want, rtol=1e-5, atol=1e-5)
