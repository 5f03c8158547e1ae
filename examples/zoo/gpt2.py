"""A GPT-2-style decoder (Radford et al. 2019) written with uopir.nn, with Hugging Face's GPT-2 state-dict names
(wte, wpe, h.N.attn.c_attn, ...), so that its model.safetensors or pytorch_model.bin load as they are.

    python3 examples/zoo/gpt2.py [--weights model.safetensors] [--tokens 464,3290] [--steps 5] [--device c]

Token and position embeddings, pre-norm blocks (causal multi-head attention, a tanh-GELU MLP), a final LayerNorm,
and logits from the token embedding (tied weights). Its projections are "Conv1D"s: weight (in, out), y = x @ w + b.
The defaults are GPT-2 small (124M); the tests use a tiny one. --steps greedily appends that many tokens.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from zoo_weights import load_into, read_weights, run_main  # noqa: E402

from uopir import Tensor, nn  # noqa: E402

# keys of Hugging Face checkpoints the model does not read: the causal-mask buffers older files hold, the tied head
SKIP = (".attn.bias", ".attn.masked_bias", "lm_head.weight")


class Conv1D:
    """Hugging Face's GPT-2 projection: weight (in, out), y = x @ weight + bias."""

    def __init__(self, n_in: int, n_out: int) -> None:
        lin = nn.Linear(n_in, n_out)
        self.weight, self.bias = lin.weight.transpose().contiguous().realize(), lin.bias

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight, self.bias)


class Attention:
    def __init__(self, dim: int, heads: int) -> None:
        self.c_attn, self.c_proj, self.heads = Conv1D(dim, 3 * dim), Conv1D(dim, dim), heads

    def __call__(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.c_attn(x).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = q.scaled_dot_product_attention(k, v, is_causal=True)
        return self.c_proj(out.transpose(1, 2).reshape(b, t, d))


class MLP:
    def __init__(self, dim: int) -> None:
        self.c_fc, self.c_proj = Conv1D(dim, 4 * dim), Conv1D(4 * dim, dim)

    def __call__(self, x: Tensor) -> Tensor:
        return self.c_proj(self.c_fc(x).gelu(approximate="tanh"))


class Block:
    def __init__(self, dim: int, heads: int, eps: float) -> None:
        self.ln_1, self.attn = nn.LayerNorm(dim, eps=eps), Attention(dim, heads)
        self.ln_2, self.mlp = nn.LayerNorm(dim, eps=eps), MLP(dim)

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2:
    """tokens (batch, time) int -> logits (batch, time, vocab)."""

    def __init__(self, vocab_size: int = 50257, n_positions: int = 1024, n_embd: int = 768, n_layer: int = 12,
                 n_head: int = 12, eps: float = 1e-5) -> None:
        if n_embd % n_head:
            raise ValueError(f"GPT2: n_head {n_head} must divide n_embd {n_embd}")
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(n_positions, n_embd)
        self.h = [Block(n_embd, n_head, eps) for _ in range(n_layer)]
        self.ln_f = nn.LayerNorm(n_embd, eps=eps)

    def __call__(self, tokens: Tensor) -> Tensor:
        t = tokens.shape[1]
        if t > self.wpe.vocab_sz:
            raise ValueError(f"GPT2: {t} tokens, more than the {self.wpe.vocab_sz} positions")
        x = self.wte(tokens) + self.wpe(Tensor.arange(t, device=tokens.device))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.transpose()

    def generate(self, tokens: list[int], steps: int) -> list[int]:
        """tokens with `steps` more appended, each the most likely next one (greedy; the whole prefix each step)."""
        out = list(tokens)
        for _ in range(steps):
            logits = self(Tensor(np.array([out], np.int32)))[0, -1]
            out.append(int(logits.argmax().item()))
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", help="a .safetensors file or .bin/.pt checkpoint with Hugging Face's GPT-2 keys")
    ap.add_argument("--tokens", default="464,3290", help="comma-separated token ids to start from")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    try:
        tokens = [int(s) for s in args.tokens.split(",")]
    except ValueError:
        ap.error(f"--tokens: {args.tokens!r} is not a comma-separated list of integers")
    sd = read_weights(args.weights) if args.weights else None  # a bad file fails before the model is built
    model = GPT2()
    if sd is not None:
        load_into(model, sd, skip=SKIP)
    if not all(0 <= t < model.wte.vocab_sz for t in tokens):
        ap.error(f"--tokens: every id must be in [0, {model.wte.vocab_sz})")
    print("tokens:", ",".join(str(t) for t in model.generate(tokens, args.steps)))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
