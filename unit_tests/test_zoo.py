"""The model zoo (examples/zoo/): ResNet-18, ViT and GPT-2 with tiny random weights give the logits of the same networks
written here layer by layer in plain numpy (not through uopir), the names of real checkpoints load (a Hugging Face ViT
dict renamed to timm's, GPT-2's mask buffers skipped, torchvision's counter optional), and the command lines turn a
bad file, key or argument into one line on stderr and exit status 1."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from uopir import Tensor
from uopir.nn.state import safe_save

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "zoo"))
import gpt2  # noqa: E402
import resnet18  # noqa: E402
import vit  # noqa: E402
import zoo_common  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)


# ---- numpy references ----------------------------------------------------------------------------------------------
def np_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int, pad: int) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    y = np.einsum("ncyxij,ocij->noyx", win, w)
    return y if b is None else y + b[None, :, None, None]


def np_bn(x: np.ndarray, p: dict, name: str) -> np.ndarray:
    c = lambda k: p[f"{name}.{k}"][None, :, None, None]  # noqa: E731
    return (x - c("running_mean")) / np.sqrt(c("running_var") + 1e-5) * c("weight") + c("bias")


def np_resnet(p: dict, x: np.ndarray, blocks: tuple[int, ...]) -> np.ndarray:
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    x = relu(np_bn(np_conv(x, p["conv1.weight"], None, 2, 3), p, "bn1"))
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    x = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(4, 5))
    for s, n in enumerate(blocks):
        for j in range(n):
            q = f"layer{s + 1}.{j}."
            stride = 2 if s > 0 and j == 0 else 1
            out = relu(np_bn(np_conv(x, p[q + "conv1.weight"], None, stride, 1), p, q + "bn1"))
            out = np_bn(np_conv(out, p[q + "conv2.weight"], None, 1, 1), p, q + "bn2")
            if q + "downsample.0.weight" in p:
                x = np_bn(np_conv(x, p[q + "downsample.0.weight"], None, stride, 0), p, q + "downsample.1")
            x = relu(out + x)
    return x.mean(axis=(2, 3)) @ p["fc.weight"].T + p["fc.bias"]


def np_layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * w + b


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int, causal: bool) -> np.ndarray:
    """(T, D) each -> (T, D): per head softmax(q k^T / sqrt(d)) v, then the heads side by side."""
    t, d = q.shape
    hd = d // heads
    out = []
    for h in range(heads):
        s = slice(h * hd, (h + 1) * hd)
        a = q[:, s] @ k[:, s].T / math.sqrt(hd)
        if causal:
            a = np.where(np.tril(np.ones((t, t), bool)), a, -np.inf)
        a = np.exp(a - a.max(-1, keepdims=True))
        out.append(a / a.sum(-1, keepdims=True) @ v[:, s])
    return np.concatenate(out, axis=1)


def np_vit(p: dict, img: np.ndarray, cfg: vit.Config) -> np.ndarray:
    erf = np.vectorize(math.erf)
    d = cfg.dim
    out = []
    for one in img:
        patches = np_conv(one[None], p["patch_embed.proj.weight"], p["patch_embed.proj.bias"], cfg.patch, 0)
        x = np.concatenate([p["cls_token"][0], patches[0].reshape(d, -1).T]) + p["pos_embed"][0]
        for i in range(cfg.depth):
            q = f"blocks.{i}."
            h = np_layernorm(x, p[q + "norm1.weight"], p[q + "norm1.bias"], cfg.eps)
            qkv = h @ p[q + "attn.qkv.weight"].T + p[q + "attn.qkv.bias"]
            a = np_attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:], cfg.heads, causal=False)
            x = x + a @ p[q + "attn.proj.weight"].T + p[q + "attn.proj.bias"]
            h = np_layernorm(x, p[q + "norm2.weight"], p[q + "norm2.bias"], cfg.eps)
            h = h @ p[q + "mlp.fc1.weight"].T + p[q + "mlp.fc1.bias"]
            h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
            x = x + h @ p[q + "mlp.fc2.weight"].T + p[q + "mlp.fc2.bias"]
        x = np_layernorm(x, p["norm.weight"], p["norm.bias"], cfg.eps)
        out.append(x[0] @ p["head.weight"].T + p["head.bias"])
    return np.stack(out)


def np_gpt2(p: dict, tokens: list[int], cfg: gpt2.Config) -> np.ndarray:
    """(T, vocab) logits of one sequence."""
    d = cfg.dim
    x = p["wte.weight"][tokens] + p["wpe.weight"][: len(tokens)]
    for i in range(cfg.layers):
        q = f"h.{i}."
        h = np_layernorm(x, p[q + "ln_1.weight"], p[q + "ln_1.bias"], cfg.eps)
        qkv = h @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]
        a = np_attention(qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:], cfg.heads, causal=True)
        x = x + a @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"]
        h = np_layernorm(x, p[q + "ln_2.weight"], p[q + "ln_2.bias"], cfg.eps)
        h = h @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"]
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        x = x + h @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"]
    return np_layernorm(x, p["ln_f.weight"], p["ln_f.bias"], cfg.eps) @ p["wte.weight"].T


# ---- the models against numpy --------------------------------------------------------------------------------------
def test_resnet18_matches_numpy() -> None:
    model = resnet18.ResNet(resnet18.TINY)
    sd = zoo_common.random_state_dict(model, seed=1)
    del sd["layer2.0.downsample.1.num_batches_tracked"]  # older torchvision checkpoints do not store the counter
    zoo_common.load(model, sd)
    x = np.random.default_rng(2).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.testing.assert_allclose(model(Tensor(x)).numpy(), np_resnet(sd, x, resnet18.TINY.blocks), **TOL)
    assert resnet18.config_of(sd) == resnet18.Config(blocks=(1, 1, 1, 1), width=4, classes=10)


def _to_hf(sd: dict) -> dict:
    """timm's ViT names -> Hugging Face's, written out here independently of vit.from_hf."""
    out = {"vit.embeddings.cls_token": sd["cls_token"], "vit.embeddings.position_embeddings": sd["pos_embed"],
           "vit.layernorm.weight": sd["norm.weight"], "vit.layernorm.bias": sd["norm.bias"],
           "classifier.weight": sd["head.weight"], "classifier.bias": sd["head.bias"]}
    for kind in ("weight", "bias"):
        out[f"vit.embeddings.patch_embeddings.projection.{kind}"] = sd[f"patch_embed.proj.{kind}"]
        for i in range(vit.TINY.depth):
            b, h = f"blocks.{i}.", f"vit.encoder.layer.{i}."
            q, k, v = np.split(sd[b + f"attn.qkv.{kind}"], 3)
            out |= {h + f"attention.attention.query.{kind}": q, h + f"attention.attention.key.{kind}": k,
                    h + f"attention.attention.value.{kind}": v,
                    h + f"attention.output.dense.{kind}": sd[b + f"attn.proj.{kind}"],
                    h + f"layernorm_before.{kind}": sd[b + f"norm1.{kind}"],
                    h + f"layernorm_after.{kind}": sd[b + f"norm2.{kind}"],
                    h + f"intermediate.dense.{kind}": sd[b + f"mlp.fc1.{kind}"],
                    h + f"output.dense.{kind}": sd[b + f"mlp.fc2.{kind}"]}
    return out


def _to_torchvision(sd: dict) -> dict:
    """timm's ViT names -> torchvision's, written out here independently of vit.from_torchvision."""
    out = {"class_token": sd["cls_token"], "encoder.pos_embedding": sd["pos_embed"]}
    for kind in ("weight", "bias"):
        out |= {f"conv_proj.{kind}": sd[f"patch_embed.proj.{kind}"], f"encoder.ln.{kind}": sd[f"norm.{kind}"],
                f"heads.head.{kind}": sd[f"head.{kind}"]}
        for i in range(vit.TINY.depth):
            b, t = f"blocks.{i}.", f"encoder.layers.encoder_layer_{i}."
            out |= {t + f"self_attention.in_proj_{kind}": sd[b + f"attn.qkv.{kind}"],
                    t + f"self_attention.out_proj.{kind}": sd[b + f"attn.proj.{kind}"],
                    t + f"ln_1.{kind}": sd[b + f"norm1.{kind}"], t + f"ln_2.{kind}": sd[b + f"norm2.{kind}"],
                    t + f"mlp.0.{kind}": sd[b + f"mlp.fc1.{kind}"], t + f"mlp.3.{kind}": sd[b + f"mlp.fc2.{kind}"]}
    return out


def test_vit_matches_numpy_from_timm_and_hugging_face_names() -> None:
    cfg = vit.TINY
    model = vit.ViT(cfg)
    sd = zoo_common.random_state_dict(model, seed=3)
    sd["cls_token"], sd["pos_embed"] = sd["cls_token"] * 10, sd["pos_embed"] * 10  # make their order matter
    x = np.random.default_rng(4).standard_normal((2, 3, cfg.image, cfg.image)).astype(np.float32)
    want = np_vit(sd, x, cfg)
    zoo_common.load(model, sd)
    np.testing.assert_allclose(model(Tensor(x)).numpy(), want, **TOL)
    for renamed in (vit.from_hf(_to_hf(sd)), vit.from_torchvision(_to_torchvision(sd))):
        assert vit.config_of(renamed, heads=cfg.heads) == cfg
        other = vit.ViT(cfg)
        zoo_common.load(other, renamed)
        np.testing.assert_allclose(other(Tensor(x)).numpy(), want, **TOL)


def test_gpt2_matches_numpy_and_generates_greedily(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = gpt2.TINY
    model = gpt2.GPT2(cfg)
    sd = zoo_common.random_state_dict(model, seed=5)
    prompt = [3, 1, 4, 1, 5]
    want = np_gpt2(sd, prompt, cfg)
    zoo_common.load(model, sd)
    np.testing.assert_allclose(model(Tensor([prompt], dtype="int32")).numpy()[0], want, **TOL)
    # greedy decoding in numpy, one token at a time
    seq = list(prompt)
    for _ in range(2):
        seq.append(int(np.argmax(np_gpt2(sd, seq, cfg)[-1])))
    # the command line on a Hugging Face-style file (prefixed names, mask buffers, the tied lm_head) gives the same ids
    hf = {"transformer." + k: v for k, v in sd.items()}
    hf |= {f"transformer.h.{i}.attn.bias": np.ones((1, 1, cfg.ctx, cfg.ctx), np.float32) for i in range(cfg.layers)}
    hf["lm_head.weight"] = sd["wte.weight"]
    f = tmp_path / "gpt2.safetensors"
    safe_save({k: Tensor(v) for k, v in hf.items()}, str(f))
    assert zoo_common.run_main(gpt2.main, ["--weights", str(f), "--heads", str(cfg.heads),
                                           "--prompt", ",".join(map(str, prompt)), "--new", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["generated:", ",".join(map(str, seq[len(prompt):]))]


# ---- errors --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (["--weights", "{tmp}/missing.safetensors"], "missing.safetensors: no such file"),
    (["--weights", "{tmp}"], "is a folder"),
    (["--weights", "{tmp}/w.txt"], "unknown weight file type '.txt'"),
    (["--weights", "{tmp}/junk.safetensors"], "junk.safetensors: cannot read the weights"),
    (["--weights", "{tmp}/junk.pt"], "junk.pt: "),  # no torch_load, or one that refuses the file
    (["--weights", "{tmp}/few.safetensors"], "missing keys (the model has them, the weights do not): h.0.ln_1.bias"),
    (["--weights", "{tmp}/odd.safetensors"], "unexpected keys (in the weights, not in the model): h.0.extra"),
    (["--random", "--prompt", "1,x"], "--prompt '1,x': expected comma-separated token ids"),
    (["--random", "--prompt", "99"], "prompt ids [99] are outside the vocabulary 0..31"),
    (["--random", "--device", "tpu"], "--device: unknown device 'tpu'"),
])
def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                          message: str) -> None:
    (tmp_path / "w.txt").write_text("x")
    (tmp_path / "junk.safetensors").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{oops")
    (tmp_path / "junk.pt").write_bytes(b"garbage")
    sd = {"wte.weight": np.zeros((4, 2), np.float32), "wpe.weight": np.zeros((3, 2), np.float32),
          "h.0.ln_1.weight": np.ones(2, np.float32)}
    safe_save({k: Tensor(v) for k, v in sd.items()}, str(tmp_path / "few.safetensors"))
    full = zoo_common.random_state_dict(gpt2.GPT2(gpt2.Config(vocab=4, ctx=3, dim=2, layers=1, heads=1)))
    safe_save({k: Tensor(v) for k, v in (full | {"h.0.extra": np.ones(1, np.float32)}).items()},
              str(tmp_path / "odd.safetensors"))
    args = [a.format(tmp=tmp_path) for a in args]
    assert zoo_common.run_main(gpt2.main, args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


def test_shape_mismatch_and_bad_image_are_named(tmp_path: Path) -> None:
    model = resnet18.ResNet(resnet18.TINY)
    sd = zoo_common.random_state_dict(model)
    sd["fc.weight"] = sd["fc.weight"][:3]
    with pytest.raises(zoo_common.ZooError, match=r"fc.weight is \(3, 32\) in the weights, \(10, 32\) in the model"):
        zoo_common.load(model, sd)
    np.save(tmp_path / "img.npy", np.zeros((3, 16, 16), np.float32))
    with pytest.raises(zoo_common.ZooError, match=r"an image of shape \(1, 3, 16, 16\).*\(3, 32, 32\)"):
        zoo_common.read_image(str(tmp_path / "img.npy"), 32, 0)


def test_random_command_lines_print_their_results(capsys: pytest.CaptureFixture[str]) -> None:
    """--random: the tiny configurations run end to end (the smoke test docs/zoo.md offers) and print k classes."""
    assert zoo_common.run_main(resnet18.main, ["--random", "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ResNet blocks [1, 1, 1, 1], width 4, 10 classes") and len(out) == 4
    assert zoo_common.run_main(vit.main, ["--random", "--top", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    probs = [float(line.split("p = ")[1]) for line in out[1:]]
    assert len(probs) == 2 and probs[0] >= probs[1] > 0
