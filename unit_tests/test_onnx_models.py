"""Two real-shaped models through uopir.onnx against onnxruntime (float32, rtol 1e-4, atol 1e-5): a small CNN (conv,
batchnorm, relu, maxpool, grouped strided conv, global average pool, gemm) and a transformer encoder block
(layernorm, Q/K/V matmuls, multi-head softmax attention, gelu MLP, residuals). uopir/onnx/testmodels.py builds them
with onnx.helper and random initializers.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from uopir.onnx import from_onnx  # noqa: E402
from uopir.onnx.testmodels import small_cnn, transformer_block  # noqa: E402


@pytest.mark.parametrize("build", [small_cnn, transformer_block], ids=["small_cnn", "transformer_block"])
def test_model_matches_onnxruntime(build) -> None:  # noqa: ANN001
    m, feeds = build()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = from_onnx(m).run(feeds)
    for o, w in zip(m.graph.output, want, strict=True):
        g = got[o.name]
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.abs(w).max() > 0.1  # not a degenerate (all-zero) output
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
