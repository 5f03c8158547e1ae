"""bench/real_models.py's command line and its profile's kind labels (the bench itself is timed, so it is not run
here): a bad argument is a usage error before anything runs, and a kernel is labelled by the node that computes it."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

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


def test_a_conv_is_labelled_by_its_own_node_before_a_pooled_one() -> None:
    # ResNet-18: the stem conv 7x7/2 (then a max pool to 64x56x56) and layer1's 3x3 convs (64x56x56) share the pooled
    # shape; a kernel of 64x56x56 outputs at a 3x3 conv's flop per output is that conv, not the stem recomputed
    table = [((64, 112, 112), "conv 7x7/s2", 2 * 3 * 49), ((64, 56, 56), "maxpool", 0),
             ((64, 56, 56), "conv 3x3", 2 * 64 * 9)]
    assert real_models.classify("r_64_56_56n1", 2 * 64 * 9 * 64 * 56 * 56, table) == "conv 3x3"
    # the stem fused into its 3x3/2 pool computes each conv output 2.25 times: no conv of that shape does that work
    assert real_models.classify("r_64_56_56", int(2.25 * 2 * 3 * 49) * 64 * 56 * 56, table).startswith(
        "conv 7x7/s2 +maxpool (x2.2")
