"""examples/train_digits.py in CI: a few epochs of the jitted MLP training step on scikit-learn's digits must make
the loss fall and the test accuracy beat a threshold (the example itself reaches 95% with more epochs)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from uopir import Tensor

pytest.importorskip("sklearn")
if not hasattr(Tensor, "backward"):  # the training step needs autograd (issue 13 item 1)
    pytest.skip("Tensor.backward is not there yet", allow_module_level=True)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_digits.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_digits", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mlp_loss_falls_and_accuracy_beats_threshold() -> None:
    ex = _example()
    training = Tensor.training
    try:
        losses, accs = ex.train("mlp", epochs=3, batch=64, lr=3e-3, seed=0, verbose=False)
    finally:
        Tensor.training = training
    assert losses[-1] < 0.5 * losses[0], losses
    assert accs[-1] >= 0.85, accs
