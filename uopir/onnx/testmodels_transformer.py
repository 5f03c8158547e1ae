"""The transformer models of issue 26 (a ViT with 6 layers of width 384, torch.nn.TransformerEncoder with 4 layers of
d_model 256, a BERT-tiny encoder with its 30522-word embedding) built with onnx.helper and random weights (fixed
seed), for the bench (bench/real_models.py) and the model tests (unit_tests/test_onnx_transformer_models.py), since
torch and torchvision are not installed here.

Faithful to what torch's exporter emits at opset 17 for eval mode (constants folded): a Linear on a 3-d input is
MatMul by the transposed weight (an (in, out) initializer) + Add of the bias, one on a 2-d input is Gemm(transB=1);
nn.MultiheadAttention takes its slow path (F.multi_head_attention_forward with need_weights=False, as both callers
ask): batch_first swaps the first two axes with a Transpose, the packed in-projection is one MatMul to 3*E split by
Reshape, Unsqueeze, Transpose, Squeeze and three Gathers, the heads by Reshape/Transpose/Reshape,
scaled_dot_product_attention as q*sqrt(s) @ (k^T*sqrt(s)), Softmax, @ v, the heads merged by Transpose(2, 0, 1, 3)
+ Reshape to 2-d, the out-projection a Gemm and a Reshape back to 3-d; LayerNorm is LayerNormalization; the exact
GELU is Div by sqrt 2, Erf, Add 1, Mul x, Mul 0.5 (Gelu is an op only from opset 20). The ViT is torchvision's
VisionTransformer: a 16x16/16 Conv patch embedding, Reshape and Transpose to tokens, the class token Expanded and
Concatenated in front, the position embedding Added, pre-norm encoder blocks (LayerNorm eps 1e-6), the final
LayerNorm, the class token taken by Gather and a Gemm head. Simplified: random weights (scaled so that the signal
stays O(1) through the depth), Dropout omitted (an identity in eval mode), sizes are parameters (the tests use less).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from uopir.onnx.testmodels import _finish, _helpers
from uopir.onnx.testmodels_cnn import _Net


class _Tx(_Net):
    """A transformer graph under construction: _Net plus constants, Linear layers and attention as torch exports."""

    def const(self, v: Any, dtype: Any = np.int64) -> str:
        n = self.name("c")
        self.inits[n] = np.asarray(v, dtype)
        return n

    def linear(self, x: str, cin: int, cout: int, rank2: bool = False, gain: float = 1.0) -> str:
        """nn.Linear: Gemm(transB=1) on a 2-d input, MatMul by the folded transposed weight + Add on more dims."""
        w = (self.r.standard_normal((cout, cin)) * np.sqrt(gain / cin)).astype(np.float32)
        b = (self.r.standard_normal(cout) * 0.05).astype(np.float32)
        if rank2:
            return self.node("Gemm", [x, self.const(w, np.float32), self.const(b, np.float32)], transB=1)
        return self.node("Add", [self.node("MatMul", [x, self.const(w.T.copy(), np.float32)]),
                                 self.const(b, np.float32)])

    def layernorm(self, x: str, dim: int, eps: float) -> str:
        s = (1 + 0.1 * self.r.standard_normal(dim)).astype(np.float32)
        b = (0.05 * self.r.standard_normal(dim)).astype(np.float32)
        return self.node("LayerNormalization", [x, self.const(s, np.float32), self.const(b, np.float32)], axis=-1,
                         epsilon=eps)

    def gelu(self, x: str) -> str:
        """F.gelu(approximate='none') at opset 17: x * (erf(x / sqrt 2) + 1) * 0.5."""
        e = self.node("Erf", [self.node("Div", [x, self.const(np.sqrt(2.0), np.float32)])])
        h = self.node("Mul", [x, self.node("Add", [e, self.const(1.0, np.float32)])])
        return self.node("Mul", [h, self.const(0.5, np.float32)])

    def attention(self, x: str, seq: int, batch: int, dim: int, heads: int, batch_first: bool) -> str:
        """nn.MultiheadAttention(x, x, x, need_weights=False) in eval mode, F.multi_head_attention_forward's slow
        path: (seq, batch, dim) in and out, or (batch, seq, dim) with batch_first."""
        hd = dim // heads
        if batch_first:
            x = self.node("Transpose", [x], perm=[1, 0, 2])
        proj = self.linear(x, dim, 3 * dim)  # _in_projection_packed: unflatten, unsqueeze(0), transpose, squeeze
        proj = self.node("Reshape", [proj, self.const([seq, batch, 3, dim])])
        proj = self.node("Unsqueeze", [proj, self.const([0])])
        proj = self.node("Transpose", [proj], perm=[3, 1, 2, 0, 4])
        proj = self.node("Squeeze", [proj, self.const([3])])
        qkv = []
        for i in range(3):  # proj[i]; view(seq, batch*heads, hd).transpose(0, 1); view(batch, heads, seq, hd)
            t = self.node("Gather", [proj, self.const(i)], axis=0)
            t = self.node("Transpose", [self.node("Reshape", [t, self.const([seq, batch * heads, hd])])],
                          perm=[1, 0, 2])
            qkv.append(self.node("Reshape", [t, self.const([batch, heads, seq, hd])]))
        q, k, v = qkv
        s = self.const(np.sqrt(1 / np.sqrt(hd)), np.float32)  # scaled_dot_product_attention's symbolic
        kt = self.node("Mul", [self.node("Transpose", [k], perm=[0, 1, 3, 2]), s])
        att = self.node("Softmax", [self.node("MatMul", [self.node("Mul", [q, s]), kt])], axis=-1)
        o = self.node("Transpose", [self.node("MatMul", [att, v])], perm=[2, 0, 1, 3])
        o = self.linear(self.node("Reshape", [o, self.const([seq * batch, dim])]), dim, dim, rank2=True)
        o = self.node("Reshape", [o, self.const([seq, batch, dim])])
        return self.node("Transpose", [o], perm=[1, 0, 2]) if batch_first else o


def vit(batch: int = 1, size: int = 224, patch: int = 16, layers: int = 6, dim: int = 384, heads: int = 6,
        mlp: int = 1536, classes: int = 1000, seed: int = 0) -> tuple[Any, dict]:
    """(model, inputs): torchvision's VisionTransformer (x: (batch, 3, size, size) -> logits (batch, classes)),
    by default 6 layers of width 384, 6 heads, MLP 1536: 197 tokens at 224x224."""
    onnx, helper, _ = _helpers()
    g = _Tx(seed)
    n = (size // patch) ** 2
    x = g.conv("x", 3, dim, patch, stride=patch, pad=0, gain=1.0)
    x = g.node("Transpose", [g.node("Reshape", [x, g.const([batch, dim, n])])], perm=[0, 2, 1])
    cls = g.node("Expand", [g.const(0.02 * g.r.standard_normal((1, 1, dim)), np.float32),
                            g.const([batch, 1, dim])])
    x = g.node("Concat", [cls, x], axis=1)
    x = g.node("Add", [x, g.const(0.02 * g.r.standard_normal((1, n + 1, dim)), np.float32)])
    for _ in range(layers):  # EncoderBlock: x + attn(ln_1(x)); y + mlp(ln_2(y))
        x = g.node("Add", [g.attention(g.layernorm(x, dim, 1e-6), n + 1, batch, dim, heads, True), x])
        h = g.gelu(g.linear(g.layernorm(x, dim, 1e-6), dim, mlp))
        x = g.node("Add", [x, g.linear(h, mlp, dim, gain=2.0)])
    x = g.node("Gather", [g.layernorm(x, dim, 1e-6), g.const(0)], axis=1)
    out = g.linear(x, dim, classes, rank2=True)
    assert g.nodes[-1].output[0] == out
    g.nodes[-1].output[0] = "logits"
    f = onnx.TensorProto.FLOAT
    m = _finish(g.nodes, [helper.make_tensor_value_info("x", f, [batch, 3, size, size])],
                [helper.make_tensor_value_info("logits", f, [batch, classes])], g.inits, "vit", 17)
    return m, {"x": g.r.standard_normal((batch, 3, size, size)).astype(np.float32)}


def transformer_encoder(batch: int = 1, seq: int = 64, layers: int = 4, dim: int = 256, heads: int = 8,
                        ff: int = 1024, seed: int = 0) -> tuple[Any, dict]:
    """(model, inputs): torch.nn.TransformerEncoder of nn.TransformerEncoderLayer(dim, heads, ff) with its defaults
    (ReLU, post-norm, LayerNorm eps 1e-5, batch_first=False): src (seq, batch, dim) -> (seq, batch, dim)."""
    onnx, helper, _ = _helpers()
    g = _Tx(seed)
    x = "src"
    for _ in range(layers):  # x = norm1(x + sa(x)); x = norm2(x + linear2(relu(linear1(x))))
        x = g.layernorm(g.node("Add", [x, g.attention(x, seq, batch, dim, heads, False)]), dim, 1e-5)
        h = g.node("Relu", [g.linear(x, dim, ff)])
        x = g.layernorm(g.node("Add", [x, g.linear(h, ff, dim, gain=2.0)]), dim, 1e-5)
    g.nodes[-1].output[0] = "out"
    f = onnx.TensorProto.FLOAT
    m = _finish(g.nodes, [helper.make_tensor_value_info("src", f, [seq, batch, dim])],
                [helper.make_tensor_value_info("out", f, [seq, batch, dim])], g.inits, "transformer_encoder", 17)
    return m, {"src": g.r.standard_normal((seq, batch, dim)).astype(np.float32)}


def bert_tiny(batch: int = 1, seq: int = 128, vocab: int = 30522, layers: int = 2, dim: int = 128, heads: int = 2,
              ff: int = 512, positions: int = 512, seed: int = 0) -> tuple[Any, dict]:
    """(model, inputs): a BERT encoder the size of google's BERT-tiny (input_ids (batch, seq) int64 -> hidden
    states (batch, seq, dim)): word, position and token-type embeddings read by Gather (the position ids a constant
    0..seq-1, the token types zeros), added and layer-normed (eps 1e-12), then post-norm encoder layers with the
    exact GELU. What makes it slow or fast is the word embedding: one row of a vocab x dim table per token."""
    onnx, helper, _ = _helpers()
    g = _Tx(seed)
    table = g.const(0.05 * g.r.standard_normal((vocab, dim)), np.float32)
    x = g.node("Gather", [table, "input_ids"], axis=0)
    pos = g.node("Gather", [g.const(0.05 * g.r.standard_normal((positions, dim)), np.float32),
                            g.const(np.arange(seq)[None].repeat(batch, 0))], axis=0)
    typ = g.node("Gather", [g.const(0.05 * g.r.standard_normal((2, dim)), np.float32),
                            g.const(np.zeros((batch, seq)))], axis=0)
    x = g.layernorm(g.node("Add", [g.node("Add", [x, typ]), pos]), dim, 1e-12)
    for _ in range(layers):  # x = norm1(x + attention(x)); x = norm2(x + linear2(gelu(linear1(x))))
        x = g.layernorm(g.node("Add", [x, g.attention(x, seq, batch, dim, heads, True)]), dim, 1e-12)
        h = g.gelu(g.linear(x, dim, ff))
        x = g.layernorm(g.node("Add", [x, g.linear(h, ff, dim, gain=2.0)]), dim, 1e-12)
    g.nodes[-1].output[0] = "hidden"
    f = onnx.TensorProto.FLOAT
    m = _finish(g.nodes, [helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, [batch, seq])],
                [helper.make_tensor_value_info("hidden", f, [batch, seq, dim])], g.inits, "bert_tiny", 17)
    return m, {"input_ids": g.r.integers(0, vocab, (batch, seq)).astype(np.int64)}


MODELS: dict[str, Callable[..., tuple[Any, dict]]] = {"vit": vit, "transformer_encoder": transformer_encoder,
                                                      "bert_tiny": bert_tiny}
