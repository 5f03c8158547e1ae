"""bench/core_ops.py's accounting: the flops and bytes each workload counts, and the ratio line it prints (the bench
itself is timed, so it is not run here; these are the parts a wrong figure would come from)."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "core_ops.py")
_spec = importlib.util.spec_from_file_location("bench_core_ops", _PATH)
core_ops = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = core_ops  # dataclasses look their module up there
_spec.loader.exec_module(core_ops)


def _kv(line: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in line.split() if "=" in p)


def test_workloads_count_the_issue_table() -> None:
    ws = {w.name: w for w in core_ops.workloads()}
    assert set(ws) == {"matmul1024", "matmul2048", "conv3x3", "softmax", "layernorm", "sum", "gelu"}
    assert ws["matmul1024"].work == 2 * 1024**3 and ws["matmul1024"].limit == "fma"
    assert ws["conv3x3"].work == 2 * 16 * 64 * 56 * 56 * 64 * 9
    assert ws["softmax"].work == ws["layernorm"].work == 8 * 4096 * 1024  # read once, write once
    assert ws["sum"].work == 4 * (1 << 24) and ws["sum"].limit == "read"
    assert ws["gelu"].work == 8 * (1 << 24) and ws["gelu"].unit == "gbps"


@pytest.mark.parametrize("quick", [True, False])
def test_inputs_match_the_shapes(quick: bool) -> None:
    for w in core_ops.workloads(quick):
        if not quick and w.kind in ("matmul", "softmax", "layernorm"):
            continue  # keep the test fast: the quick shapes exercise the same code
        xs = core_ops.inputs(w)
        assert all(x.dtype.name == "float32" for x in xs)
        if w.kind == "conv":
            n_, ci, co, hw = w.shape
            assert [x.shape for x in xs] == [(n_, ci, hw, hw), (co, ci, 3, 3)]


def test_numpy_impls_are_right_on_small_shapes() -> None:
    import numpy as np

    w = core_ops.Workload("conv3x3", "conv", (1, 2, 3, 5), "gflops", 1.0, "fma")
    x, k = core_ops.inputs(w)
    got = core_ops._numpy(w, [x, k])()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 3, 5, 5), np.float32)
    for o in range(3):
        for i in range(5):
            for j in range(5):
                want[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * k[o]).sum()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    g = core_ops.Workload("gelu", "gelu", (7,), "gbps", 1.0, "copy")
    (v,) = core_ops.inputs(g)
    ref = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))
    np.testing.assert_allclose(core_ops._numpy(g, [v])(), ref, rtol=1e-5, atol=1e-6)


def test_ratio_line_picks_best_device_and_peer() -> None:
    w = core_ops.Workload("matmul1024", "matmul", (1024,), "gflops", 2.0 * 1024**3, "fma")
    line = core_ops.ratio_line(w, {"c": 100.0, "llvm": 150.0, "numpy": 200.0, "torch": 300.0},
                               {"fma_gflops": 600.0, "copy_gbps": 40.0})
    kv = _kv(line)
    assert line.startswith("core_ops ratio workload=matmul1024 unit=gflops")
    assert kv["uopir"] == "llvm:150.00" and kv["best_peer"] == "torch:300.00"
    assert kv["uopir_over_peer"] == "0.500" and kv["limit"] == "fma:600.00"
    assert kv["uopir_over_limit"] == "0.250" and kv["peer_over_limit"] == "0.500"


def test_ratio_line_without_peers_or_limits_says_na() -> None:
    w = core_ops.Workload("sum", "sum", (16,), "gbps", 64.0, "read")
    kv = _kv(core_ops.ratio_line(w, {"c": 5.0}, {}))
    assert kv["uopir"] == "c:5.00" and kv["best_peer"] == "n/a" and kv["uopir_over_peer"] == "n/a"
    assert kv["limit"] == "read:n/a" and kv["uopir_over_limit"] == "n/a"


def test_rate() -> None:
    w = core_ops.Workload("gelu", "gelu", (8,), "gbps", 8e9, "copy")
    assert core_ops.rate(w, 0.5) == pytest.approx(16.0)


def test_only_names_known_workloads() -> None:
    # a mistyped workload is an error line naming the known ones, before anything runs
    with pytest.raises(SystemExit, match=r"unknown workload 'conv' for --only \(known: matmul1024, .*conv3x3"):
        core_ops.main(["--only", "conv"])
    with pytest.raises(SystemExit, match="missing value for '--only'"):
        core_ops.main(["--only"])
