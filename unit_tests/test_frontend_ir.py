"""The MLP printout in lit_tests/frontend/mlp-forward.uop is what the frontend builds today, and it runs."""
from __future__ import annotations

import pathlib
import re

import numpy as np

from uopir import Tensor, parse_ir, print_ir
from uopir.backends.python import evaluate

LIT = pathlib.Path(__file__).resolve().parents[1] / "lit_tests" / "frontend" / "mlp-forward.uop"


def _renumber_buffers(text: str) -> str:
    """Buffer ids come from a process-wide counter: number them 0, 1, ... in order of appearance."""
    ids: dict[str, str] = {}
    return re.sub(r"\{id = (\d+),", lambda m: "{id = " + ids.setdefault(m[1], str(len(ids))) + ",", text)


def _mlp(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor) -> Tensor:
    return x.linear(w1, b1).relu().linear(w2).softmax()


def test_frontend_builds_the_committed_printout() -> None:
    y = _mlp(*(Tensor.randn(*s, device="python") for s in ((2, 4), (4, 3), (3,), (3, 2))))  # as committed
    committed = "".join(line + "\n" for line in LIT.read_text().splitlines() if not line.startswith("//"))
    assert _renumber_buffers(print_ir(y.uop)) == committed, \
        "the frontend's IR for the MLP changed: regenerate lit_tests/frontend/mlp-forward.uop"


def test_committed_printout_runs_like_numpy() -> None:
    g = parse_ir(LIT.read_text(), str(LIT))
    rng = np.random.default_rng(0)
    x, w1, b1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4), (4, 3), (3,), (3, 2)))
    got = evaluate(g, {0: x, 1: w1, 2: b1, 3: w2})
    logits = np.maximum(x @ w1 + b1, 0) @ w2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert print_ir(g) == "".join(line + "\n" for line in LIT.read_text().splitlines() if not line.startswith("//"))
