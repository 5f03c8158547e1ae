"""examples/zoo: ResNet-18, ViT and GPT-2 load random weights from a file and agree with the same network written
out layer by layer in numpy (float64) below, reading the same weights by their torchvision / Hugging Face names.

Each model is tiny (width 4, 2 layers, 8-wide embeddings) so the reference device runs it in about a second; each
goes through a different file kind: a torch zip checkpoint wrapped as {"model": sd, "epoch": 1} (with torchvision's
0-d num_batches_tracked), a safetensors file, and a legacy-stream checkpoint with the keys GPT-2 files carry that the
model skips. The command lines are checked once: a bad weight file is one `error:` line and exit status 2.
"""
from __future__ import annotations

import collections
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch_checkpoints as tc

from uopir import Tensor
from uopir.nn.state import get_state_dict, safe_save

ZOO = Path(__file__).resolve().parent.parent / "examples" / "zoo"
sys.path.insert(0, str(ZOO))
import gpt2  # noqa: E402
import resnet18  # noqa: E402
import vit  # noqa: E402
from zoo_weights import load_into, read_weights  # noqa: E402

Weights = dict[str, np.ndarray]


def _random_weights(model: object, seed: int) -> Weights:
    """A value for every key of the model: fan-in scaled matrices, norms near 1, positive running variances."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, t in get_state_dict(model).items():
        shape = tuple(t.shape)
        if k.endswith("num_batches_tracked"):
            continue
        if k.endswith("running_var"):
            v = rng.uniform(0.5, 1.5, shape)
        elif len(shape) >= 2 and not k.endswith(("class_token", "pos_embedding")):
            v = rng.normal(0, 1 / math.sqrt(math.prod(shape[1:]) if "c_" not in k else shape[0]), shape)
        elif k.endswith("weight") and len(shape) == 1:
            v = 1 + 0.2 * rng.standard_normal(shape)
        else:
            v = 0.2 * rng.standard_normal(shape)
        out[k] = v.astype(np.float32)
    return out


def _loaded(model: object, path: Path, skip: tuple[str, ...] = ()) -> object:
    load_into(model, read_weights(path), skip=skip)
    return model


# ---- the numpy reference ----------------------------------------------------------------------------------------
def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, stride: int = 1, pad: int = 0) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    out = np.einsum("ncyxij,ocij->noyx", win, w)
    return out if b is None else out + b[None, :, None, None]


def _bn(x: np.ndarray, p: Weights, name: str) -> np.ndarray:
    c = (None, slice(None), None, None)
    inv = 1 / np.sqrt(p[f"{name}.running_var"][c] + 1e-5)
    return (x - p[f"{name}.running_mean"][c]) * inv * p[f"{name}.weight"][c] + p[f"{name}.bias"][c]


def _maxpool3s2(x: np.ndarray) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    return np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-2, -1))


def _layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _heads(qkv: np.ndarray, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b, n, d3 = qkv.shape
    q, k, v = qkv.reshape(b, n, 3, h, d3 // 3 // h).transpose(2, 0, 3, 1, 4)
    return q, k, v


def _merge(o: np.ndarray) -> np.ndarray:
    b, h, n, hd = o.shape
    return o.transpose(0, 2, 1, 3).reshape(b, n, h * hd)


def resnet18_numpy(x: np.ndarray, p: Weights) -> np.ndarray:
    x = _maxpool3s2(np.maximum(_bn(_conv(x, p["conv1.weight"], stride=2, pad=3), p, "bn1"), 0))
    for stage in range(1, 5):
        for i in range(2):
            n = f"layer{stage}.{i}"
            stride = 2 if stage > 1 and i == 0 else 1
            out = np.maximum(_bn(_conv(x, p[f"{n}.conv1.weight"], stride=stride, pad=1), p, f"{n}.bn1"), 0)
            out = _bn(_conv(out, p[f"{n}.conv2.weight"], pad=1), p, f"{n}.bn2")
            short = _bn(_conv(x, p[f"{n}.downsample.0.weight"], stride=stride), p, f"{n}.downsample.1") \
                if f"{n}.downsample.0.weight" in p else x
            x = np.maximum(out + short, 0)
    return x.mean(axis=(2, 3)) @ p["fc.weight"].T + p["fc.bias"]


def vit_numpy(x: np.ndarray, p: Weights, heads: int, layers: int) -> np.ndarray:
    erf = np.vectorize(math.erf)
    x = _conv(x, p["conv_proj.weight"], p["conv_proj.bias"], stride=p["conv_proj.weight"].shape[-1])
    x = x.reshape(*x.shape[:2], -1).transpose(0, 2, 1)
    x = np.concatenate([np.broadcast_to(p["class_token"], (x.shape[0], 1, x.shape[2])), x], 1) \
        + p["encoder.pos_embedding"]
    for i in range(layers):
        n = f"encoder.layers.encoder_layer_{i}"
        h = _layernorm(x, p[f"{n}.ln_1.weight"], p[f"{n}.ln_1.bias"], 1e-6)
        qkv = h @ p[f"{n}.self_attention.in_proj_weight"].T + p[f"{n}.self_attention.in_proj_bias"]
        o = _merge(_attention(*_heads(qkv, heads), causal=False))
        x = x + o @ p[f"{n}.self_attention.out_proj.weight"].T + p[f"{n}.self_attention.out_proj.bias"]
        h = _layernorm(x, p[f"{n}.ln_2.weight"], p[f"{n}.ln_2.bias"], 1e-6)
        h = h @ p[f"{n}.mlp.0.weight"].T + p[f"{n}.mlp.0.bias"]
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = x + h @ p[f"{n}.mlp.3.weight"].T + p[f"{n}.mlp.3.bias"]
    x = _layernorm(x, p["encoder.ln.weight"], p["encoder.ln.bias"], 1e-6)
    return x[:, 0] @ p["heads.head.weight"].T + p["heads.head.bias"]


def gpt2_numpy(tokens: np.ndarray, p: Weights, heads: int, layers: int) -> np.ndarray:
    x = p["wte.weight"][tokens] + p["wpe.weight"][np.arange(tokens.shape[1])]
    for i in range(layers):
        n = f"h.{i}"
        h = _layernorm(x, p[f"{n}.ln_1.weight"], p[f"{n}.ln_1.bias"], 1e-5)
        o = _merge(_attention(*_heads(h @ p[f"{n}.attn.c_attn.weight"] + p[f"{n}.attn.c_attn.bias"], heads), True))
        x = x + o @ p[f"{n}.attn.c_proj.weight"] + p[f"{n}.attn.c_proj.bias"]
        h = _layernorm(x, p[f"{n}.ln_2.weight"], p[f"{n}.ln_2.bias"], 1e-5)
        h = h @ p[f"{n}.mlp.c_fc.weight"] + p[f"{n}.mlp.c_fc.bias"]
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        x = x + h @ p[f"{n}.mlp.c_proj.weight"] + p[f"{n}.mlp.c_proj.bias"]
    return _layernorm(x, p["ln_f.weight"], p["ln_f.bias"], 1e-5) @ p["wte.weight"].T


def _f64(p: Weights) -> Weights:
    return {k: v.astype(np.float64) for k, v in p.items()}


# ---- the tests ----------------------------------------------------------------------------------------------------
def test_resnet18_from_a_torch_checkpoint(tmp_path: Path) -> None:
    p = _random_weights(resnet18.ResNet18(num_classes=5, width=4), seed=0)
    sd = collections.OrderedDict((k, tc.tensor(v)) for k, v in p.items())
    for k in [k for k in p if k.endswith("running_var")]:  # torchvision's files carry a 0-d int64 per BatchNorm
        sd[k.replace("running_var", "num_batches_tracked")] = tc.tensor(np.int64(100), "int64")
    tc.save_zip({"model": sd, "epoch": 1}, tmp_path / "r.pth")
    model = _loaded(resnet18.ResNet18(num_classes=5, width=4), tmp_path / "r.pth")
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)  # layer3 and 4 run on 1x1
    np.testing.assert_allclose(model(Tensor(x)).numpy(), resnet18_numpy(x.astype(np.float64), _f64(p)),
                               rtol=1e-4, atol=1e-4)


def test_vit_from_a_safetensors_file(tmp_path: Path) -> None:
    cfg = dict(image_size=16, patch_size=8, num_layers=2, num_heads=2, hidden_dim=8, mlp_dim=16, num_classes=5)
    p = _random_weights(vit.ViT(**cfg), seed=2)
    safe_save({k: Tensor(v) for k, v in p.items()}, tmp_path / "v.safetensors")
    model = _loaded(vit.ViT(**cfg), tmp_path / "v.safetensors")
    x = np.random.default_rng(3).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(model(Tensor(x)).numpy(), vit_numpy(x.astype(np.float64), _f64(p), 2, 2),
                               rtol=1e-4, atol=1e-4)


def test_gpt2_from_a_legacy_checkpoint(tmp_path: Path) -> None:
    cfg = dict(vocab_size=11, n_positions=8, n_embd=8, n_layer=2, n_head=2)
    p = _random_weights(gpt2.GPT2(**cfg), seed=4)
    sd = {k: tc.tensor(v) for k, v in p.items()}
    sd["lm_head.weight"] = sd["wte.weight"]  # what Hugging Face files also hold, which the model skips
    sd["h.0.attn.bias"] = tc.tensor(np.tril(np.ones((1, 1, 8, 8), np.float32)))
    tc.save_stream(sd, tmp_path / "g.bin")
    model = _loaded(gpt2.GPT2(**cfg), tmp_path / "g.bin", skip=gpt2.SKIP)
    tokens = np.array([[1, 5, 10, 0, 3], [2, 2, 7, 9, 4]], np.int32)
    want = gpt2_numpy(tokens, _f64(p), 2, 2)
    np.testing.assert_allclose(model(Tensor(tokens)).numpy(), want, rtol=1e-4, atol=1e-4)
    assert model.generate([1, 5], 1) == [1, 5, int(gpt2_numpy(np.array([[1, 5]]), _f64(p), 2, 2)[0, -1].argmax())]


def test_weights_that_do_not_fit_name_the_keys(tmp_path: Path) -> None:
    cfg = dict(vocab_size=11, n_positions=8, n_embd=8, n_layer=1, n_head=2)
    p = _random_weights(gpt2.GPT2(**cfg), seed=5)
    del p["ln_f.bias"]
    safe_save({k: Tensor(v) for k, v in p.items()}, tmp_path / "g.safetensors")
    with pytest.raises(KeyError, match=r"missing \['ln_f.bias'\], unexpected \[\]"):
        _loaded(gpt2.GPT2(**cfg), tmp_path / "g.safetensors")


def test_a_bad_weight_file_on_the_command_line_is_one_error_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    r = subprocess.run([sys.executable, str(ZOO / "gpt2.py"), "--weights", str(bad)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith(f"error: {bad}: not a PyTorch checkpoint") and r.stderr.count("\n") == 1
