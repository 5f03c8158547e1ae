"""Seeing what was compiled (tinygrad's DEBUG): the work counted in a compiled kernel (uopir.backends.estimates), the
UOPIR_DEBUG=2 line per kernel run (time, GFLOP/s, GB/s, the counts), and the compiled programs a tensor's realize
runs (name, source, device program), on the reference interpreter and on c."""
from __future__ import annotations

import re

import numpy as np
import pytest

from uopir import Tensor, Variable
from uopir.backends import available
from uopir.backends.estimates import estimate
from uopir.backends.realize import DEBUG_ENV, clear_schedule_cache
from uopir.dialects import device as D
from uopir.dialects import kernel as K

DEVICES = [d for d in ("python", "c") if d in available()]
LINE = re.compile(r"^\*\*\* (\w+)\s+\d+ (\w+)\s+arg\s+(\d+)\s+tm\s+([\d.]+)us\s+([\d.]+) GFLOP/s\s+([\d.]+) GB/s"
                  r"\s+\((\d+) flop, (\d+) B\)$")


def _f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("dev", DEVICES)
def test_a_matmul_counts_two_flops_per_multiply_add_and_each_buffer_once(dev: str) -> None:
    m, k, n = 24, 40, 16
    a, b = Tensor(_f32(m, k), device=dev), Tensor(_f32(k, n, seed=1), device=dev)
    (prog,) = (a @ b).programs()
    assert prog.program.op is (D.PROGRAM if dev == "c" else K.DEF)
    est = estimate(prog.program, {}, [4 * m * n, 4 * m * k, 4 * k * n])
    assert est.flops == 2 * m * k * n
    assert est.bytes == 4 * (m * n + m * k + k * n)  # each buffer moved once at most (capped at its size)
    uncapped = estimate(prog.program)
    if dev == "c":  # the device program's loop nest: every load the loops execute counts; register tiles reuse
        # loaded values across the tile, so fewer than the naive loop's 2 loads per multiply-add, more than once each
        assert 4 * (m * n + m * k + k * n) < uncapped.bytes < 4 * (m * n + 2 * m * n * k)
    else:  # a kernel.def has no loop order: a load counts once per index it depends on
        assert uncapped.bytes == 4 * (m * n + m * k + k * n)


@pytest.mark.parametrize("dev", DEVICES)
def test_elementwise_and_reduce_work(dev: str) -> None:
    x = Tensor(_f32(8, 32), device=dev)
    (prog,) = ((x * 3 + 1).max(1)).programs()
    est = estimate(prog.program, {}, [4 * 8, 4 * 8 * 32])
    assert est.flops == 3 * 8 * 32  # mul, add, and the max reduction once per element
    assert est.bytes == 4 * (8 + 8 * 32)


@pytest.mark.parametrize("dev", DEVICES)
def test_symbolic_sizes_are_counted_at_the_bound_values(dev: str) -> None:
    a = Tensor(_f32(4, 10), device=dev)
    t = (a[:, :Variable("i", 1, 10).bind(6)] + 1).sum(1)
    progs = t.programs()
    flops = [estimate(p.program, {"i": 6}).flops for p in progs]
    assert sum(flops) == 2 * 4 * 6  # one add and one reduction step per element of the 4x6 slice
    assert sum(estimate(p.program, {"i": 3}).flops for p in progs) == 2 * 4 * 3


@pytest.mark.parametrize("dev", DEVICES)
def test_debug_2_line_figures_are_the_counted_work_over_the_time(dev: str, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    m, k, n = 32, 48, 20
    a, b = Tensor(_f32(m, k), device=dev), Tensor(_f32(k, n, seed=2), device=dev)
    monkeypatch.setenv(DEBUG_ENV, "2")
    capsys.readouterr()
    got = (a @ b).numpy()
    lines = capsys.readouterr().err.splitlines()
    np.testing.assert_allclose(got, a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-5)
    assert len(lines) == 1, lines
    hit = LINE.match(lines[0])
    assert hit is not None, lines[0]
    device, name, nargs, us, gflops, gbs, flops, nbytes = hit.groups()
    assert (device, int(nargs)) == (dev, 3) and name == f"r_{m}_{n}"
    assert int(flops) == 2 * m * k * n and int(nbytes) == 4 * (m * n + m * k + k * n)
    secs = float(us) * 1e-6
    assert float(gflops) == pytest.approx(int(flops) / secs / 1e9, rel=1e-2, abs=2e-3)
    assert float(gbs) == pytest.approx(int(nbytes) / secs / 1e9, rel=1e-2, abs=2e-3)


@pytest.mark.skipif("c" not in available(), reason="no C compiler")
def test_debug_4_prints_the_c_source_and_6_the_device_program(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture) -> None:
    clear_schedule_cache()
    x = Tensor(_f32(5, seed=3), device="c")
    for level, want, not_want in (("4", "// C source of kernel", "device.program"),
                                  ("6", "// device program of kernel", None)):
        clear_schedule_cache()
        monkeypatch.setenv(DEBUG_ENV, level)
        capsys.readouterr()
        (x * 2.5).numpy()
        out = capsys.readouterr().err
        assert want in out and "void E_5(" in out
        if not_want:
            assert not_want not in out


@pytest.mark.skipif("c" not in available(), reason="no C compiler")
def test_programs_expose_name_source_and_device_program_without_running() -> None:
    from uopir.backends.realize import STATS

    a, b = Tensor(_f32(6, 4), device="c"), Tensor(_f32(4, 3, seed=4), device="c")
    t = (a @ b).relu().sum(0)
    before = STATS.kernels
    progs = t.programs()
    assert STATS.kernels == before  # nothing ran
    assert [p.name for p in progs] == [item.name for item in t.schedule()]
    for p in progs:
        assert p.program.op is D.PROGRAM and p.program.arg == p.name
        assert f"void {p.name}(" in p.source
    np.testing.assert_allclose(t.numpy(), np.maximum(a.numpy() @ b.numpy(), 0).sum(0), rtol=1e-5)
