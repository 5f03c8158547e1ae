"""bench/real_models.py's command line and its profile's kind labels (the bench itself is timed, so it is not run
here): a bad argument is a usage error before anything runs, and a kernel is labelled from its own IR."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "real_models.py")
_spec = importlib.util.spec_from_file_location("bench_real_models", _PATH)
real_models = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = real_models
_spec.loader.exec_module(real_models)


@pytest.mark.parametrize("args,says", [(["--models", "mobilenetv3"], "unknown model(s) mobilenetv3"),
                                       (["--devices", "gpu"], "unknown device(s) gpu"),
                                       (["--repeat", "0"], "--repeat must be >= 1")])
def test_bad_arguments_are_usage_errors(args: list[str], says: str) -> None:
    p = subprocess.run([sys.executable, _PATH, *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr
    assert p.stdout == ""  # nothing ran


def test_kernels_are_labelled_from_their_own_ir(monkeypatch: pytest.MonkeyPatch) -> None:
    # a depthwise conv with a fused scale/shift and SiLU does more flop per output than its 9 taps (the old labels,
    # matched by flop, called such kernels "pointwise 1x1"); the kind comes from the reduction's ranges instead
    from uopir.backends import available
    from uopir.backends.interface import Backend

    dev = next((d for d in ("llvm", "c") if d in available()), None)
    if dev is None:
        pytest.skip("no compiled host backend (the python one runs no kernel-optimize)")
    monkeypatch.setattr(Backend, "lower", Backend.lower)  # capture_kernel_defs wraps it; restored after the test
    kdefs = real_models.capture_kernel_defs()
    from uopir import Tensor

    rng = np.random.default_rng(0)

    def t(*shape: int) -> Tensor:
        return Tensor(rng.standard_normal(shape, dtype=np.float32), device=dev)

    y = t(1, 8, 10, 10).conv2d(t(8, 1, 3, 3), groups=8, padding=1) * 0.5 + 0.1
    y = (y * y.sigmoid()).realize()
    z = y.conv2d(t(16, 8, 1, 1)).relu().realize()
    z.conv2d(t(8, 16, 3, 3), stride=2, padding=1).realize().mean(axis=(2, 3)).realize()
    (t(1, 8) @ t(8, 4)).realize()
    kinds = {real_models.kernel_kind(n, k, False) for n, k in kdefs.items()}
    assert kinds == {"depthwise 3x3", "pointwise 1x1", "conv 3x3/s2", "pool / row reduce",
                     "FC / SE conv (1x1 spatial)"}, kinds
