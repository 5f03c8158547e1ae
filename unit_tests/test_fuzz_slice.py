"""The CI slice of the standing fuzz target (unit_tests/fuzz.py): a fixed seed and a fixed number of cases per
target, so the result never depends on luck. A developer runs the same code for minutes with `make fuzz`."""
from __future__ import annotations

import random

import fuzz
import numpy as np
import pytest

# cases per target in CI: the cache target runs three subprocesses per case (3-5 s on a busy machine), so it gets two
# (test_compile_cache.py runs every deterministic fault on every device); the lowered target compiles C for every
# case: `make fuzz` only
SLICE = {"text": 150, "pipeline": 150, "tensor": 150, "names": 40, "cache": 2, "lowered": 0}


@pytest.mark.parametrize("target", fuzz.TARGETS)
def test_fuzz_slice_finds_nothing(target, tmp_path):
    n = SLICE[target]
    if n == 0:
        pytest.skip(f"the {target} target compiles for every case: make fuzz runs it")
    report = fuzz.run((target,), seed=20261202, iterations=n, timeout=60, out_dir=tmp_path)
    assert report.cases[target] == n
    assert not report.failures, "\n\n".join(f"{f.why}\n{f.input}" for f in report.failures[:3])


def test_fuzz_catches_a_wrong_answer(tmp_path, monkeypatch):
    """The tensor target really compares with numpy: a frontend that negates the result is reported."""
    from uopir.frontend.tensor import Tensor

    orig_numpy = Tensor.numpy
    monkeypatch.setattr(Tensor, "numpy", lambda self: np.asarray(orig_numpy(self)) + 1)
    report = fuzz.run(("tensor",), seed=1, iterations=20, timeout=60, out_dir=tmp_path)
    assert len(report.failures) >= 15  # programs whose result is empty cannot show the error
    files = sorted(tmp_path.iterdir())
    assert len(files) == len(report.failures) and "differ from numpy" in files[0].read_text()


def test_fuzz_reports_a_hang_as_a_timeout(monkeypatch, tmp_path):
    def hang(rng: random.Random):
        while True:
            pass

    monkeypatch.setattr(fuzz, "tensor_case", hang)
    report = fuzz.run(("tensor",), seed=1, iterations=1, timeout=0.2, out_dir=tmp_path)
    assert len(report.failures) == 1 and "ran past" in report.failures[0].why
