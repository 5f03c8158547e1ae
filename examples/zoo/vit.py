"""A Vision Transformer (Dosovitskiy et al. 2020) written with uopir.nn, with torchvision's vit_b_16 state-dict names,
so that torchvision's weights (a .pth checkpoint, or a safetensors file of the same keys) load as they are.

    python3 examples/zoo/vit.py [--weights vit_b_16.pth] [--device c]

Patches (a strided conv) plus a class token and learned positions, pre-norm encoder blocks (multi-head self-attention
and a GELU MLP), the class token's final LayerNorm -> the head. The defaults are ViT-B/16; the tests use a tiny one.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from zoo_weights import load_into, read_weights, run_main  # noqa: E402

from uopir import Tensor, nn  # noqa: E402


class SelfAttention:
    """torch.nn.MultiheadAttention's parameters: in_proj_weight (3 dim, dim) and in_proj_bias for q, k, v; out_proj."""

    def __init__(self, dim: int, heads: int) -> None:
        proj = nn.Linear(dim, 3 * dim)
        self.in_proj_weight, self.in_proj_bias, self.heads = proj.weight, proj.bias, heads
        self.out_proj = nn.Linear(dim, dim)

    def __call__(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        qkv = x.linear(self.in_proj_weight.transpose(), self.in_proj_bias)
        q, k, v = qkv.reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = q.scaled_dot_product_attention(k, v)  # (b, heads, n, head dim)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, d))


class EncoderBlock:
    """x + attention(ln_1(x)), then + mlp(ln_2(x)); the MLP's GELU is the exact (erf) one, as torch's nn.GELU."""

    def __init__(self, dim: int, heads: int, mlp_dim: int) -> None:
        self.ln_1, self.ln_2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = SelfAttention(dim, heads)
        # torchvision's MLPBlock is nn.Sequential(Linear, GELU, Dropout, Linear, Dropout): keys mlp.0.* and mlp.3.*
        self.mlp = [nn.Linear(dim, mlp_dim), None, None, nn.Linear(mlp_dim, dim)]

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.self_attention(self.ln_1(x))
        return x + self.mlp[3](self.mlp[0](self.ln_2(x)).gelu(approximate="none"))


class Encoder:
    def __init__(self, seq_len: int, layers: int, dim: int, heads: int, mlp_dim: int) -> None:
        self.pos_embedding = Tensor(np.random.default_rng(0).normal(0, 0.02, (1, seq_len, dim)).astype(np.float32))
        self.layers = {f"encoder_layer_{i}": EncoderBlock(dim, heads, mlp_dim) for i in range(layers)}
        self.ln = nn.LayerNorm(dim, eps=1e-6)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.pos_embedding
        for block in self.layers.values():
            x = block(x)
        return self.ln(x)


class ViT:
    """image (batch, 3, size, size) -> logits (batch, classes)."""

    def __init__(self, image_size: int = 224, patch_size: int = 16, num_layers: int = 12, num_heads: int = 12,
                 hidden_dim: int = 768, mlp_dim: int = 3072, num_classes: int = 1000) -> None:
        if image_size % patch_size or hidden_dim % num_heads:
            raise ValueError(f"ViT: patch_size {patch_size} must divide image_size {image_size}, and num_heads "
                             f"{num_heads} hidden_dim {hidden_dim}")
        self.conv_proj = nn.Conv2d(3, hidden_dim, patch_size, stride=patch_size)
        self.class_token = Tensor(np.zeros((1, 1, hidden_dim), np.float32))
        self.encoder = Encoder((image_size // patch_size) ** 2 + 1, num_layers, hidden_dim, num_heads, mlp_dim)
        self.heads = {"head": nn.Linear(hidden_dim, num_classes)}

    def __call__(self, x: Tensor) -> Tensor:
        x = self.conv_proj(x).flatten(2).transpose(1, 2)  # (batch, patches, dim)
        x = self.class_token.expand(x.shape[0], 1, x.shape[2]).cat(x, dim=1)
        return self.heads["head"](self.encoder(x)[:, 0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", help="a .pth/.pt checkpoint or .safetensors file with torchvision's keys")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    sd = read_weights(args.weights) if args.weights else None  # a bad file fails before the model is built
    model = ViT()
    if sd is not None:
        load_into(model, sd)
    x = Tensor(np.random.default_rng(0).standard_normal((1, 3, 224, 224), np.float32), device=args.device)
    probs = model(x).softmax().numpy()[0]
    print("top-5 classes:", ", ".join(f"{int(c)} ({probs[c]:.3f})" for c in np.argsort(-probs)[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
