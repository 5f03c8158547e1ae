"""A GPT-2-style decoder with uopir.nn, with Hugging Face's GPT-2 state-dict names (wte, wpe, h.N.ln_1,
h.N.attn.c_attn, h.N.mlp.c_fc, ln_f; a "transformer." prefix is accepted), generating token ids greedily.

    python examples/zoo/gpt2.py --random                                  # tiny random network
    python examples/zoo/gpt2.py --weights model.safetensors --prompt 464,2068,7586 [--new 10]

Real weights: the Hugging Face hub's gpt2 (openai-community/gpt2, also gpt2-medium/-large/-xl) publishes a
model.safetensors file that loads as it is (its causal-mask buffers h.N.attn.bias and the tied lm_head.weight are
skipped). The width, depth, vocabulary and context are read from the tensors' shapes; the head count is not stored,
so it is width / 64 (every GPT-2 size) unless --heads says otherwise. There is no tokenizer here: the prompt is token
ids (GPT-2's BPE ids, e.g. from the tiktoken package's "gpt2" encoding: "The quick brown" is 464,2068,7586), and the
output is ids to decode the same way.

Every step runs the whole fixed-length window (prompt plus the new tokens, zero-padded; the causal mask keeps the
padding from reaching earlier positions), so the kernels compile once and every later step reuses them.
"""
from __future__ import annotations

import argparse
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
    vocab: int = 50257
    ctx: int = 1024
    dim: int = 768
    layers: int = 12
    heads: int = 12
    eps: float = 1e-5


TINY = Config(vocab=32, ctx=16, dim=16, layers=2, heads=2)


class Conv1D:
    """GPT-2's linear layer (Hugging Face's name): x @ weight + bias, weight stored (in, out), the transpose of
    nn.Linear's."""

    def __init__(self, nin: int, nout: int) -> None:
        self.weight = Tensor(np.zeros((nin, nout), np.float32)).realize()
        self.bias = Tensor(np.zeros(nout, np.float32)).realize()

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight, self.bias)


class Attention:
    def __init__(self, cfg: Config) -> None:
        self.heads = cfg.heads
        self.c_attn, self.c_proj = Conv1D(cfg.dim, 3 * cfg.dim), Conv1D(cfg.dim, cfg.dim)

    def __call__(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        qkv = self.c_attn(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = qkv[0].scaled_dot_product_attention(qkv[1], qkv[2], is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, d))


class MLP:
    def __init__(self, cfg: Config) -> None:
        self.c_fc, self.c_proj = Conv1D(cfg.dim, 4 * cfg.dim), Conv1D(4 * cfg.dim, cfg.dim)

    def __call__(self, x: Tensor) -> Tensor:
        return self.c_proj(self.c_fc(x).gelu())  # GPT-2's GELU is the tanh approximation (tinygrad's default)


class Block:
    def __init__(self, cfg: Config) -> None:
        self.ln_1, self.attn = nn.LayerNorm(cfg.dim, eps=cfg.eps), Attention(cfg)
        self.ln_2, self.mlp = nn.LayerNorm(cfg.dim, eps=cfg.eps), MLP(cfg)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2:
    """Token plus position embeddings, `layers` pre-norm causal blocks, a final norm, and logits through the token
    embedding's transpose (GPT-2 ties its output layer to wte)."""

    def __init__(self, cfg: Config) -> None:
        if cfg.dim % cfg.heads:
            raise zoo.ZooError(f"GPT-2: width {cfg.dim} must be a multiple of heads {cfg.heads}")
        self.cfg = cfg
        self.wte, self.wpe = nn.Embedding(cfg.vocab, cfg.dim), nn.Embedding(cfg.ctx, cfg.dim)
        self.h = [Block(cfg) for _ in range(cfg.layers)]
        self.ln_f = nn.LayerNorm(cfg.dim, eps=cfg.eps)

    def __call__(self, tokens: Tensor) -> Tensor:
        """(B, T) int32 token ids -> (B, T, vocab) logits."""
        t = tokens.shape[1]
        if t > self.cfg.ctx:
            raise zoo.ZooError(f"{t} tokens do not fit the context of {self.cfg.ctx}")
        x = self.wte(tokens) + self.wpe(Tensor.arange(t, dtype="int32"))
        return self.ln_f(x.sequential(self.h)) @ self.wte.weight.transpose()

    def generate(self, prompt: list[int], new: int) -> list[int]:
        """`new` token ids after `prompt`, each the most likely next one (greedy)."""
        n = len(prompt) + new
        if not prompt or n > self.cfg.ctx:
            raise zoo.ZooError(f"the prompt ({len(prompt)} ids) plus {new} new ones must be 1..{self.cfg.ctx} ids")
        bad = [i for i in prompt if not 0 <= i < self.cfg.vocab]
        if bad:
            raise zoo.ZooError(f"prompt ids {bad} are outside the vocabulary 0..{self.cfg.vocab - 1}")
        window = np.zeros((1, n), np.int32)
        window[0, :len(prompt)] = prompt
        for pos in range(len(prompt), n):
            logits = self(Tensor(window))[0, pos - 1].numpy()
            window[0, pos] = int(np.argmax(logits))
        return window[0, len(prompt):].tolist()


def _skipped(k: str) -> bool:
    """Keys a GPT-2 checkpoint may hold that are not weights of this model: the causal-mask buffers and the tied
    output layer."""
    return k.endswith((".attn.bias", ".attn.masked_bias")) or k == "lm_head.weight"


def config_of(sd: zoo.StateDict, heads: int | None = None) -> Config:
    """The configuration whose tensors sd holds (Hugging Face's names without the "transformer." prefix)."""
    if "wte.weight" not in sd or "wpe.weight" not in sd:
        raise zoo.ZooError("not a GPT-2 state dict (no wte.weight or wpe.weight)")
    vocab, dim = zoo.shape_of(sd["wte.weight"])
    layers = 1 + max((int(m[1]) for k in sd if (m := re.match(r"h\.(\d+)\.", k))), default=-1)
    return Config(vocab=vocab, ctx=zoo.shape_of(sd["wpe.weight"])[0], dim=dim, layers=layers,
                  heads=heads or max(dim // 64, 1))


def _prompt(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise zoo.ZooError(f"--prompt {text!r}: expected comma-separated token ids such as 464,2068,7586") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter)
    zoo.weights_args(ap)
    ap.add_argument("--prompt", default="1,2,3", help="comma-separated token ids (default 1,2,3)")
    ap.add_argument("--new", type=int, default=5, help="how many token ids to generate (default 5)")
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default: width / 64)")
    args = ap.parse_args(argv)
    zoo.use_device(args.device)
    if args.heads is not None and args.heads < 1:
        raise zoo.ZooError(f"--heads must be at least 1, got {args.heads}")
    if args.new < 0:
        raise zoo.ZooError(f"--new must be at least 0, got {args.new}")
    prompt = _prompt(args.prompt)
    if args.weights:
        sd = {k.removeprefix("transformer."): v for k, v in zoo.read_weights(args.weights).items()}
        cfg = config_of(sd, args.heads)
    else:
        sd, cfg = None, TINY
    model = GPT2(cfg)
    zoo.load(model, sd if sd is not None else zoo.random_state_dict(model, args.seed), ignore=_skipped)
    out = model.generate(prompt, args.new)
    print(f"GPT-2 width {cfg.dim}, {cfg.layers} layers, {cfg.heads} heads, vocabulary {cfg.vocab}, context {cfg.ctx}")
    print("prompt:   ", ",".join(map(str, prompt)))
    print("generated:", ",".join(map(str, out)))
    return 0


if __name__ == "__main__":
    sys.exit(zoo.run_main(main))
