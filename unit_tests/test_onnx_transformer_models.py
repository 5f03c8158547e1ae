"""The transformer models of issue 26 built by uopir/onnx/testmodels_transformer.py (a ViT, a
torch.nn.TransformerEncoder and a BERT-tiny encoder): each builds at full size with the structure and parameter count
of its torch original and passes onnx.checker; the ViT and the encoder run through uopir's c device at a reduced size
matching onnxruntime (float32, 1e-4 relative). BERT's run is the bench's (bench/real_models.py checks its output
against onnxruntime); its Gathers are pinned by unit_tests/test_gather_fold.py at a fraction of the cost."""
from __future__ import annotations

import collections

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from uopir.onnx import from_onnx  # noqa: E402
from uopir.onnx.testmodels_transformer import MODELS  # noqa: E402

# op counts as torch exports them at opset 17: per layer 4 Linears (MatMul+Add, the out-projection a Gemm), one
# Softmax and two attention MatMuls; the ViT adds an exact GELU (Erf) per layer, its patch Conv and a Gemm head
STRUCTURE = {
    "vit": {"Conv": 1, "MatMul": 30, "Gemm": 7, "Softmax": 6, "LayerNormalization": 13, "Erf": 6, "Concat": 1,
            "Expand": 1, "Gather": 19},
    "transformer_encoder": {"MatMul": 20, "Gemm": 4, "Softmax": 4, "LayerNormalization": 8, "Relu": 4, "Gather": 12},
    "bert_tiny": {"MatMul": 10, "Gemm": 2, "Softmax": 2, "LayerNormalization": 5, "Erf": 2, "Gather": 9},
}
# torch's parameter counts: torchvision's VisionTransformer(224, 16, 6 layers, 6 heads, 384, 1536) and
# nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 8, 1024), 4); BERT-tiny (google/bert_uncased_L-2_H-128_A-2)
# without its pooler
PARAMS = {"vit": 11_403_880, "transformer_encoder": 3_159_040, "bert_tiny": 4_369_408}
SMALL = {"vit": dict(size=32, layers=2, dim=64, heads=4, mlp=128, classes=10),
         "transformer_encoder": dict(seq=8, layers=2, dim=32, heads=4, ff=64),
         "bert_tiny": dict(seq=8, vocab=300, layers=1, dim=32, heads=2, ff=64, positions=16)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_builds(name: str) -> None:
    m, feeds = MODELS[name]()
    onnx.checker.check_model(m, full_check=True)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    assert {k: ops[k] for k in STRUCTURE[name]} == STRUCTURE[name]
    assert {k: v.shape for k, v in feeds.items()} == {"vit": {"x": (1, 3, 224, 224)},
                                                      "transformer_encoder": {"src": (64, 1, 256)},
                                                      "bert_tiny": {"input_ids": (1, 128)}}[name]
    floats = [i for i in m.graph.initializer if i.data_type == onnx.TensorProto.FLOAT and len(i.dims) > 0]
    assert sum(int(np.prod(i.dims)) for i in floats) == PARAMS[name]


@pytest.mark.parametrize("name", ["transformer_encoder", "vit"])
def test_model_matches_onnxruntime(name: str) -> None:
    m, feeds = MODELS[name](**SMALL[name])
    (key, x), = feeds.items()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    # the output follows the input (random weights that let the signal vanish would make any kernel pass)
    other = sess.run(None, {key: x[::-1].copy() if name != "vit" else x[:, :, ::-1].copy()})[0]
    assert np.abs(other - want).max() > 0.05 * np.abs(want).max()
    got = from_onnx(m, device="c").run(feeds)[m.graph.output[0].name]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
