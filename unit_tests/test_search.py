"""Beam search (uopir.search): kernel-optimize{strategy=beam} and UOPIR_BEAM time candidates on the c device and keep
what is faster; a bad candidate is skipped with a note; the tuning cache answers a second compile without a search;
the printed winner replays. Searches here are tiny (small kernels, width 1-2, few runs) to stay quick."""
from __future__ import annotations

import numpy as np
import pytest

from uopir.backends import get_backend
from uopir.ir.diagnostics import IRError
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.passes.kernel.optimize import Opt, apply_opts, heuristic_opts
from uopir.passes.manager import PassManager
from uopir.passes.target import target
from uopir.search import beam as B
from uopir.search.cache import get_tuning_cache
from uopir.search.fingerprint import device_fingerprint
from uopir.search.job import Job, Measurement, run_job
from uopir.search.pool import LocalPool

pytestmark = pytest.mark.skipif(not get_backend("c").available, reason="no C compiler")


def matmul(m: int, n: int, k: int) -> str:
    """The kernel.def of an m x k @ k x n matmul (as tensor-to-kernel writes it)."""
    return f"""%0 = kernel.param {{idx = 0}} : ptr<f32, global>
%1 = core.const {m} : index
%2 = kernel.range %1 {{axis = 0}} : index
%n = core.const {n} : index
%3 = core.mul %2, %n : index
%4 = kernel.range %n {{axis = 1}} : index
%5 = core.add %3, %4 : index
%6 = kernel.index %0, %5 : ptr<f32, global>
%7 = kernel.param {{idx = 1}} : ptr<f32, global>
%8 = core.const {k} : index
%9 = core.mul %2, %8 : index
%10 = kernel.range %8 {{axis = 2, kind = reduce}} : index
%11 = core.add %9, %10 : index
%12 = kernel.index %7, %11 : ptr<f32, global>
%13 = kernel.load %12 : f32
%14 = kernel.param {{idx = 2}} : ptr<f32, global>
%15 = core.mul %10, %n : index
%16 = core.add %15, %4 : index
%17 = kernel.index %14, %16 : ptr<f32, global>
%18 = kernel.load %17 : f32
%19 = core.mul %13, %18 : f32
%20 = kernel.reduce %19, %10 {{op = add}} : f32
%21 = kernel.store %6, %20
%22 = kernel.end %21, %2, %4
kernel.def %22 {{name = "r_{m}_{n}"}}
"""


@pytest.fixture
def tuning_cache(tmp_path, monkeypatch):
    path = tmp_path / "tuning.sqlite"
    monkeypatch.setenv("UOPIR_TUNING_CACHE", str(path))
    return path


@pytest.fixture(scope="module")
def pool():
    p = LocalPool()
    yield p
    p.close()


def _opts(ms: tuple[str, ...]) -> list[Opt]:
    return [Opt.parse(o) for o in ms]


def test_neighbours_apply_and_differ():
    """Every neighbour applies to the kernel and gives another kernel than the opts it came from."""
    k = parse_ir(matmul(16, 16, 16))
    start = heuristic_opts(k, target("c"))
    ns = B.neighbours(k, start, threads=2)
    assert len(ns) > 10
    kernels = {apply_opts(k, list(c)) for c in ns}
    assert len(kernels) == len(ns) and apply_opts(k, start) not in kernels
    assert (Opt("upcast", 0, 4),) in B.neighbours(k, [])


def test_beam_climbs_a_deterministic_cost():
    """With a cost that only the opts decide (lanes of the register tile, an unroll worth a little), the beam walks
    from no opts to the best tile within its rounds: the search logic, independent of timing noise."""
    k = parse_ir(matmul(16, 16, 16))

    def cost(opts: tuple[str, ...]) -> float:
        lanes = 1
        for o in _opts(opts):
            lanes *= o.factor if o.kind == "upcast" and o.axis in (0, 1) else 1
        unroll = any(o.kind == "unroll" for o in _opts(opts))
        return 1.0 / min(lanes, 32) - (0.01 if unroll else 0) + 0.001 * len(opts)

    def measure(jobs: list[Job]) -> list[Measurement]:
        return [Measurement(j.opts, cost(j.opts), "fp", None, (np.zeros(1),)) for j in jobs]

    res = B.beam_search(k, "c", 2, measure, [], rounds=6)
    lanes = 1
    for o in res.opts:
        lanes *= o.factor if o.kind == "upcast" and o.axis in (0, 1) else 1
    assert lanes >= 32 and any(o.kind == "unroll" for o in res.opts)
    assert res.seconds is not None and res.baseline_seconds == cost(()) and res.seconds < 0.1


def test_a_lucky_timing_is_not_confirmed():
    """A candidate that timed fast once (the machine was quiet just then) but not when timed again beside the start
    does not replace it; the note says why."""
    k = parse_ir(matmul(8, 8, 8))
    seen: dict[tuple[str, ...], int] = {}

    def measure(jobs: list[Job]) -> list[Measurement]:
        out = []
        for j in jobs:
            seen[j.opts] = seen.get(j.opts, 0) + 1
            lucky = j.opts == ("upcast 0 by 2",) and seen[j.opts] == 1
            out.append(Measurement(j.opts, 0.5 if lucky else 1.0 if not j.opts else 2.0, "fp", None, (np.zeros(1),)))
        return out

    res = B.beam_search(k, "c", 1, measure, [], rounds=1)
    assert res.opts == [] and res.seconds == 1.0
    assert any("not confirmed" in n for n in res.notes)


def test_search_beats_a_bad_start_on_the_device(pool):
    """From no opts at all (scalar loops), a real search on the c device finds a faster opt set for a matmul."""
    k = parse_ir(matmul(64, 64, 64))
    # one round of real compiles and timings (a second one doubled this test's time; the rounds themselves are
    # checked above with a model timer)
    res = B.beam_search(k, "c", 2, lambda jobs: pool.measure(jobs, 30.0), [], threads=1, rounds=1, runs=5)
    assert res.opts and res.seconds is not None and res.baseline_seconds is not None
    assert res.seconds < res.baseline_seconds
    assert res.tried > 5


def test_bad_candidates_are_skipped(pool):
    """An opt that does not apply, a job over its time limit and a result that differs are each a note; the pool
    keeps working after a killed worker."""
    text = matmul(8, 8, 8)
    bad, good = Job("c", text, ("upcast 7 by 2",)), Job("c", text, ("upcast 0 by 4",), runs=2)
    m_bad, m_good = pool.measure([bad, good], 30.0)
    assert m_bad.error is not None and "axis 7" in m_bad.error and m_good.seconds is not None
    (slow,) = pool.measure([Job("c", text, (), runs=10 ** 9)], 2.0)  # never finishes its runs: killed
    assert slow.seconds is None and "time limit" in (slow.error or "")
    (again,) = pool.measure([good], 30.0)
    assert again.error is None and again.seconds is not None

    k = parse_ir(text)

    def measure(jobs: list[Job]) -> list[Measurement]:
        out = pool.measure(jobs, 30.0)  # a real run; the upcast of axis 1 then reports a corrupted result
        return [Measurement(m.opts, m.seconds, m.fingerprint, m.error,
                            tuple(o + 1 for o in m.outputs) if m.outputs and "upcast 1 by 8" in m.opts else m.outputs)
                for m in out]

    res = B.beam_search(k, "c", 1, measure, [], rounds=1, runs=2)
    assert any("upcast 1 by 8" in n and "differs" in n for n in res.notes)
    assert Opt("upcast", 1, 8) not in res.opts


def test_winner_is_recorded_and_replayed(tuning_cache):
    """kernel-optimize{strategy=beam}: the first compile searches and records the winner; a second one takes the
    cached opts without a search; the printed kernel computes what the heuristic's does."""
    text = matmul(16, 32, 8)
    k = parse_ir(text)
    pm = PassManager.parse("kernel-optimize{strategy=beam width=1 target=c}")
    first = pm.run(k)
    cached = get_tuning_cache().lookup(k, "c", device_fingerprint("c"))
    assert cached is not None and apply_opts(k, cached) is first
    # a different winner planted in the cache is what the next compile applies
    planted = [Opt("upcast", 1, 2)]
    get_tuning_cache().record(k, "c", device_fingerprint("c"), planted, 1e-6)
    assert PassManager.parse("kernel-optimize{strategy=beam width=1 target=c}").run(k) is apply_opts(k, planted)
    # the printed winner reads back and, lowered with no more opts, gives the heuristic's result
    printed = print_ir(first)
    assert parse_ir(printed) is first
    ref = run_job(Job("c", text, tuple(map(str, heuristic_opts(k, target("c")))), runs=1, want_output=True))
    got = run_job(Job("c", printed, (), runs=1, want_output=True))
    assert ref.outputs is not None and got.outputs is not None
    np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-5)


def test_errors_are_located():
    k = parse_ir(matmul(8, 8, 8))
    with pytest.raises(IRError, match="target 'cpu' has no device"):
        PassManager.parse("kernel-optimize{strategy=beam target=cpu}").run(k)
    with pytest.raises(IRError, match="width=0"):
        PassManager.parse("kernel-optimize{strategy=beam width=0 target=c}")


def test_uopir_beam_env(tuning_cache, monkeypatch):
    """UOPIR_BEAM=N searches the kernels of a Tensor program (the result still right); a bad value is one clear
    error."""
    from uopir import Tensor

    a = np.arange(48, dtype=np.float32).reshape(6, 8)
    monkeypatch.setenv("UOPIR_BEAM", "x")
    with pytest.raises(IRError, match=r"\$UOPIR_BEAM must be a beam width, an integer >= 0, got 'x'"):
        (Tensor(a, device="c") * 3).numpy()
    monkeypatch.setenv("UOPIR_BEAM", "1")
    k = parse_ir(matmul(8, 8, 8))  # a target with no device to time on keeps the heuristic under UOPIR_BEAM
    assert PassManager.parse("kernel-optimize{target=cpu}").run(k) is apply_opts(k, heuristic_opts(k, target("cpu")))
    np.testing.assert_array_equal((Tensor(a, device="c") * 2 + 1).numpy(), a * 2 + 1)
    cache = get_tuning_cache()
    assert cache is not None and cache.path == tuning_cache
    assert len(cache.entries()) >= 1


def test_candidates_the_lowering_rejects_are_not_sent():
    """A candidate kernel-expand rejects (a register tile of 8192 lanes) is dropped with a note before any job is
    sent; the jobs that are sent all lower."""
    from uopir.search.job import lower_candidate

    k = parse_ir(matmul(64, 64, 64))
    start = heuristic_opts(k, target("c"))
    sent: list[tuple[str, ...]] = []
    unchecked: list[tuple[str, ...]] = []

    def measuring(into: list[tuple[str, ...]]) -> B.Measure:
        def measure(jobs: list[Job]) -> list[Measurement]:
            into.extend(j.opts for j in jobs)
            return [Measurement(j.opts, 1.0 + 0.01 * len(j.opts), "fp", None, (np.zeros(1),)) for j in jobs]
        return measure

    res = B.beam_search(k, "c", 1, measuring(sent), start, rounds=1, check=B.lowering_check(k, "c"))
    assert res.filtered >= 1 and any("not sent" in n and "lanes" in n for n in res.notes)
    for opts in sent:
        lower_candidate(k, opts, "c")  # raises if a rejected candidate got through
    B.beam_search(k, "c", 1, measuring(unchecked), start, rounds=1)
    dropped = set(unchecked) - set(sent)  # without the check the same search sends exactly those more
    assert len(dropped) == res.filtered
    for opts in dropped:
        with pytest.raises(Exception, match="kernel-expand"):
            lower_candidate(k, opts, "c")


def test_budget_bounds_the_search():
    """budget=S: a search whose candidates take 0.1 s each stops sending them once its budget is spent."""
    import time

    k = parse_ir(matmul(16, 16, 16))

    def measure(jobs: list[Job]) -> list[Measurement]:
        time.sleep(0.1 * len(jobs))
        return [Measurement(j.opts, 1.0 / (1 + len(j.opts)), "fp", None, (np.zeros(1),)) for j in jobs]

    t0 = time.perf_counter()
    res = B.beam_search(k, "c", 2, measure, [], rounds=4, budget=1.0)
    assert time.perf_counter() - t0 < 2.5 and 0 < res.tried <= 12
    assert B.beam_search(k, "c", 2, measure, [], rounds=1, budget=100.0).tried > 12


def test_search_settings_are_checked(monkeypatch):
    """A bad budget option, UOPIR_BEAM_BUDGET or UOPIR_BEAM_RAY is one located error naming it; so is Ray missing."""
    import sys

    from uopir.search import ray_pool

    k = parse_ir(matmul(8, 8, 8))
    for bad in ("-1", "0.0e0x"):
        with pytest.raises((IRError, ValueError), match="budget"):
            PassManager.parse(f"kernel-optimize{{strategy=beam budget={bad} target=c}}")
    pm = PassManager.parse("kernel-optimize{strategy=beam width=1 target=c}")
    monkeypatch.setenv("UOPIR_BEAM_BUDGET", "soon")
    with pytest.raises(IRError, match=r"\$UOPIR_BEAM_BUDGET must be a search budget, .* got 'soon'"):
        pm.run(k)
    monkeypatch.delenv("UOPIR_BEAM_BUDGET")
    monkeypatch.setenv("UOPIR_PROGRESS", "sometimes")
    with pytest.raises(IRError, match=r"\$UOPIR_PROGRESS must be 0"):
        pm.run(k)
    monkeypatch.delenv("UOPIR_PROGRESS")
    monkeypatch.setenv("UOPIR_BEAM_RAY", "yes please")
    with pytest.raises(IRError, match=r"\$UOPIR_BEAM_RAY must be local, auto, .* got 'yes please'"):
        pm.run(k)
    monkeypatch.setenv("UOPIR_BEAM_RAY", "local")
    monkeypatch.setattr(ray_pool, "_POOLS", {})
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    monkeypatch.setenv("UOPIR_TUNING_CACHE", "off")
    with pytest.raises(IRError, match=r"UOPIR_BEAM_RAY=local runs the search's jobs on Ray, which is not installed: "
                                      r"pip install 'uopir\[search\]'"):
        pm.run(k)


def test_progress_counts_a_programs_kernels(tuning_cache, monkeypatch, capsys):
    """UOPIR_BEAM over a program of two kernels: one progress line (a pipe) counts both, with the candidates tried."""
    from uopir import Tensor

    monkeypatch.setenv("UOPIR_BEAM", "1")
    monkeypatch.setenv("UOPIR_BEAM_BUDGET", "3")
    monkeypatch.setenv("UOPIR_PROGRESS", "lines")
    a = np.arange(48, dtype=np.float32).reshape(6, 8)
    np.testing.assert_allclose((Tensor(a, device="c") * 2).sum(axis=1).numpy(), (a * 2).sum(axis=1))
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("beam search: ")]
    assert lines and all("\r" not in x for x in lines)
    assert any(x.startswith("beam search: 1/1 (100%) tried=") or x.startswith("beam search: 2/2 (100%) tried=")
               for x in lines), lines


def test_timings_of_another_device_do_not_count():
    """Only timings with the fingerprint of the machine the kernel is compiled for compare: a faster candidate timed
    on another machine (a Ray cluster's other node) is a note, and a start timed elsewhere means no search."""
    k = parse_ir(matmul(8, 8, 8))

    def measure(jobs: list[Job]) -> list[Measurement]:
        return [Measurement(j.opts, 0.1 if j.opts else 1.0, "other" if j.opts == ("upcast 0 by 8",) else "mine", None,
                            (np.zeros(1),)) for j in jobs]

    res = B.beam_search(k, "c", 1, measure, [], rounds=1, fingerprint="mine")
    assert Opt("upcast", 0, 8) not in res.opts and res.opts  # another, equally fast candidate of this machine won
    assert any("upcast 0 by 8" in n and "timed on another device (other)" in n for n in res.notes)
    res = B.beam_search(k, "c", 1, measure, [], rounds=1, fingerprint="elsewhere")
    assert res.opts == [] and res.tried == 0 and "not on the one the kernel is compiled for" in res.notes[0]
