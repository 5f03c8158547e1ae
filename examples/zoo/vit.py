"""A Vision Transformer (ViT) classifier with uopir.nn, with timm's state-dict names (patch_embed.proj, cls_token,
pos_embed, blocks.N.attn.qkv, blocks.N.mlp.fc1, norm, head); a torchvision vit_b_16 state dict (conv_proj,
encoder.layers.encoder_layer_N...) or a Hugging Face ViTForImageClassification one (vit.embeddings...,
vit.encoder.layer.N.attention.attention.query...) is renamed to those on load.

    python examples/zoo/vit.py --random                      # tiny random network, random image
    python examples/zoo/vit.py --weights vit.safetensors [--heads 12] [--image img.npy] [--top 5]

Real weights: timm's vit_base_patch16_224 (or vit_small/vit_tiny; class token pooling, no pre-logits layer) saved as
safetensors (the timm and Hugging Face hubs publish model.safetensors files; from torch, the safetensors package's
save_file(model.state_dict(), ...)), or Hugging Face's google/vit-base-patch16-224 model.safetensors. The width,
depth, patch size, image size and class count are read from the tensors' shapes; the head count is not stored, so it
is width / 64 (every standard ViT) unless --heads says otherwise. The image is a .npy array of shape (3, S, S) or
(S, S, 3), normalized as the checkpoint's preprocessing says (timm's augreg and Hugging Face's ViTs: mean 0.5, std
0.5 per channel). It prints the top classes as class indices and probabilities.
"""
from __future__ import annotations

import argparse
import math
import pathlib
import re
import sys
from dataclasses import dataclass

import numpy as np

try:
    import uopir  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
import zoo_common as zoo

from uopir import Tensor, nn


@dataclass(frozen=True)
class Config:
    image: int = 224
    patch: int = 16
    dim: int = 768
    depth: int = 12
    heads: int = 12
    mlp: int = 3072
    classes: int = 1000
    eps: float = 1e-6  # LayerNorm's (timm; Hugging Face's ViT uses 1e-12)


TINY = Config(image=8, patch=4, dim=16, depth=2, heads=2, mlp=32, classes=5)


def _param(*shape: int) -> Tensor:
    """A realized zero buffer (a parameter the state dict fills in place)."""
    return Tensor(np.zeros(shape, np.float32)).realize()


class PatchEmbed:
    def __init__(self, cfg: Config) -> None:
        self.proj = nn.Conv2d(3, cfg.dim, cfg.patch, stride=cfg.patch)

    def __call__(self, x: Tensor) -> Tensor:
        """(B, 3, S, S) -> (B, patches, dim): one stride-`patch` convolution, the grid flattened row by row."""
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention:
    def __init__(self, cfg: Config) -> None:
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)

    def __call__(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        return self.proj(q.scaled_dot_product_attention(k, v).transpose(1, 2).reshape(b, n, d))


class Mlp:
    def __init__(self, cfg: Config) -> None:
        self.fc1, self.fc2 = nn.Linear(cfg.dim, cfg.mlp), nn.Linear(cfg.mlp, cfg.dim)

    def __call__(self, x: Tensor) -> Tensor:
        return self.fc2(self.fc1(x).gelu(approximate="none"))  # the exact (erf) GELU, as torch's nn.GELU


class Block:
    """Pre-norm transformer block: x + attn(norm1(x)), then + mlp(norm2(.))."""

    def __init__(self, cfg: Config) -> None:
        self.norm1, self.attn = nn.LayerNorm(cfg.dim, eps=cfg.eps), Attention(cfg)
        self.norm2, self.mlp = nn.LayerNorm(cfg.dim, eps=cfg.eps), Mlp(cfg)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT:
    """Patches plus a class token, learned position embeddings, `depth` blocks, a final norm, and the head applied to
    the class token."""

    def __init__(self, cfg: Config) -> None:
        if cfg.image % cfg.patch or cfg.dim % cfg.heads:
            raise zoo.ZooError(f"ViT: image {cfg.image} must be a multiple of patch {cfg.patch} and width {cfg.dim} of "
                           f"heads {cfg.heads}")
        self.cfg = cfg
        self.cls_token = _param(1, 1, cfg.dim)
        self.pos_embed = _param(1, (cfg.image // cfg.patch) ** 2 + 1, cfg.dim)
        self.patch_embed = PatchEmbed(cfg)
        self.blocks = [Block(cfg) for _ in range(cfg.depth)]
        self.norm = nn.LayerNorm(cfg.dim, eps=cfg.eps)
        self.head = nn.Linear(cfg.dim, cfg.classes)

    def __call__(self, x: Tensor) -> Tensor:
        p = self.patch_embed(x)
        x = self.cls_token.expand(p.shape[0], 1, self.cfg.dim).cat(p, dim=1) + self.pos_embed
        x = self.norm(x.sequential(self.blocks))
        return self.head(x[:, 0])


# Hugging Face's names, as (pattern, timm's name); query/key/value are concatenated into qkv separately
_HF_NAMES = [
    (r"vit\.embeddings\.cls_token", "cls_token"),
    (r"vit\.embeddings\.position_embeddings", "pos_embed"),
    (r"vit\.embeddings\.patch_embeddings\.projection\.", "patch_embed.proj."),
    (r"vit\.encoder\.layer\.(\d+)\.layernorm_before\.", r"blocks.\1.norm1."),
    (r"vit\.encoder\.layer\.(\d+)\.layernorm_after\.", r"blocks.\1.norm2."),
    (r"vit\.encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"blocks.\1.attn.proj."),
    (r"vit\.encoder\.layer\.(\d+)\.intermediate\.dense\.", r"blocks.\1.mlp.fc1."),
    (r"vit\.encoder\.layer\.(\d+)\.output\.dense\.", r"blocks.\1.mlp.fc2."),
    (r"vit\.layernorm\.", "norm."),
    (r"classifier\.", "head."),
]
_HF_QKV = re.compile(r"vit\.encoder\.layer\.(\d+)\.attention\.attention\.(query|key|value)\.(weight|bias)")


def _renamed(k: str, table: list[tuple[str, str]]) -> str:
    """k under timm's name by the first row of `table` that matches it; a key no row knows is kept, so the load names
    it."""
    for pat, new in table:
        if re.match(pat, k):
            return re.sub(pat, new, k, count=1)
    return k


def from_hf(sd: zoo.StateDict) -> zoo.StateDict:
    """A Hugging Face ViT state dict under timm's names (query, key and value stacked into one qkv, in that order);
    a key neither knows is kept, so the load names it."""
    out: zoo.StateDict = {}
    qkv: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for k, v in sd.items():
        m = _HF_QKV.fullmatch(k)
        if m:
            qkv.setdefault((m[1], m[3]), {})[m[2]] = zoo.numpy_of(v)
            continue
        out[_renamed(k, _HF_NAMES)] = v
    for (layer, kind), parts in qkv.items():
        if set(parts) != {"query", "key", "value"}:
            raise zoo.ZooError(f"layer {layer}: the attention {kind} has only {sorted(parts)} of query, key, value")
        out[f"blocks.{layer}.attn.qkv.{kind}"] = np.concatenate([parts["query"], parts["key"], parts["value"]])
    return out


# torchvision's vit_*_16 names, as (pattern, timm's name); its in_proj already stacks query, key, value in that order
_TORCHVISION_NAMES = [
    (r"class_token$", "cls_token"),
    (r"conv_proj\.", "patch_embed.proj."),
    (r"encoder\.pos_embedding$", "pos_embed"),
    (r"encoder\.layers\.encoder_layer_(\d+)\.ln_1\.", r"blocks.\1.norm1."),
    (r"encoder\.layers\.encoder_layer_(\d+)\.ln_2\.", r"blocks.\1.norm2."),
    (r"encoder\.layers\.encoder_layer_(\d+)\.self_attention\.in_proj_(weight|bias)$", r"blocks.\1.attn.qkv.\2"),
    (r"encoder\.layers\.encoder_layer_(\d+)\.self_attention\.out_proj\.", r"blocks.\1.attn.proj."),
    (r"encoder\.layers\.encoder_layer_(\d+)\.mlp\.(0|linear_1)\.", r"blocks.\1.mlp.fc1."),
    (r"encoder\.layers\.encoder_layer_(\d+)\.mlp\.(3|linear_2)\.", r"blocks.\1.mlp.fc2."),
    (r"encoder\.ln\.", "norm."),
    (r"heads\.head\.", "head."),
]


def from_torchvision(sd: zoo.StateDict) -> zoo.StateDict:
    """A torchvision ViT state dict (vit_b_16 and its kin) under timm's names."""
    return {_renamed(k, _TORCHVISION_NAMES): v for k, v in sd.items()}


def config_of(sd: zoo.StateDict, heads: int | None = None, eps: float = 1e-6) -> Config:
    """The configuration whose tensors sd holds (timm's names); heads defaults to width / 64."""
    need = ("pos_embed", "patch_embed.proj.weight", "blocks.0.mlp.fc1.weight", "head.weight")
    if any(k not in sd for k in need):
        lacks = [k for k in need if k not in sd]
        raise zoo.ZooError(f"not a timm-, torchvision- or Hugging Face-style ViT state dict (it lacks "
                           f"{', '.join(lacks)})")
    dim, _, patch, _ = zoo.shape_of(sd["patch_embed.proj.weight"])
    grid = math.isqrt(zoo.shape_of(sd["pos_embed"])[1] - 1)
    depth = 1 + max(int(m[1]) for k in sd if (m := re.match(r"blocks\.(\d+)\.", k)))
    mlp, classes = zoo.shape_of(sd["blocks.0.mlp.fc1.weight"])[0], zoo.shape_of(sd["head.weight"])[0]
    return Config(image=grid * patch, patch=patch, dim=dim, depth=depth, heads=heads or max(dim // 64, 1), mlp=mlp,
                  classes=classes, eps=eps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter)
    zoo.weights_args(ap)
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default: width / 64)")
    ap.add_argument("--image", metavar="FILE.npy", help="a normalized (3, S, S) or (S, S, 3) image (default: random)")
    ap.add_argument("--top", type=int, default=5, help="how many classes to print (default 5)")
    args = ap.parse_args(argv)
    zoo.use_device(args.device)
    if args.heads is not None and args.heads < 1:
        raise zoo.ZooError(f"--heads must be at least 1, got {args.heads}")
    if args.weights:
        sd = zoo.read_weights(args.weights)
        hf = any(k.startswith("vit.") for k in sd)
        sd = from_hf(sd) if hf else from_torchvision(sd) if "conv_proj.weight" in sd else sd
        cfg = config_of(sd, args.heads, eps=1e-12 if hf else 1e-6)
    else:
        sd, cfg = None, TINY
    model = ViT(cfg)
    zoo.load(model, sd if sd is not None else zoo.random_state_dict(model, args.seed))
    x = zoo.read_image(args.image, cfg.image, args.seed)
    logits = model(Tensor(x)).numpy()[0]
    print(f"ViT {cfg.image}px patch {cfg.patch}, width {cfg.dim}, depth {cfg.depth}, {cfg.heads} heads, "
          f"{cfg.classes} classes; top {args.top}:")
    for c, p in zoo.top_k(logits, args.top):
        print(f"  class {c:5d}  p = {p:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(zoo.run_main(main))
