"""A small CNN forward pass (2 convolutions + a linear layer) with the lazy Tensor frontend, checked against numpy.

    x [8, 1, 28, 28] -> conv 3x3 stride 2, 8 channels -> relu -> conv 3x3 stride 2, 16 channels -> relu
      -> flatten [8, 576] -> linear -> logits [8, 10]

    python3 examples/cnn.py [--device c|python]

`make demo` (examples/demo.py) takes this model and the MLP through every stage; bench/cold_start.py times its first
run in a fresh process.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

try:
    from uopir import Tensor
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from uopir import Tensor

BATCH, CLASSES = 8, 10
SHAPES = {"w1": (8, 1, 3, 3), "b1": (8,), "w2": (16, 8, 3, 3), "b2": (16,), "w3": (16 * 6 * 6, CLASSES),
          "b3": (CLASSES,)}


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    """Weights as numpy arrays (fan-in scaled uniform), so the same values feed uopir, numpy and other frameworks."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in SHAPES.items():
        fan_in = int(np.prod(shape[1:])) if name.startswith("w") and len(shape) == 4 else shape[0]
        bound = 1 / np.sqrt(fan_in) if name.startswith("w") else 0.1
        out[name] = rng.uniform(-bound, bound, shape).astype(np.float32)
    return out


def forward(x: Tensor, p: dict[str, Tensor]) -> Tensor:
    """The logits of a batch of 1x28x28 images (lazy: nothing runs until the result is realized)."""
    h = x.conv2d(p["w1"], p["b1"], stride=2).relu()
    h = h.conv2d(p["w2"], p["b2"], stride=2).relu()
    return h.flatten(1).linear(p["w3"], p["b3"])


def _conv_numpy(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int) -> np.ndarray:
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxij,ocij->noyx", win, w, optimize=True) + b[None, :, None, None]


def forward_numpy(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """The same forward pass in numpy (the reference)."""
    h = np.maximum(_conv_numpy(x, p["w1"], p["b1"], 2), 0)
    h = np.maximum(_conv_numpy(h, p["w2"], p["b2"], 2), 0)
    return h.reshape(h.shape[0], -1) @ p["w3"] + p["b3"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="the device to run on (default: the best one here)")
    args = ap.parse_args()
    params = init_params()
    x_np = np.random.default_rng(1).standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
    x = Tensor(x_np, device=args.device)
    logits = forward(x, {k: Tensor(v, device=x.device) for k, v in params.items()})
    n_kernels = len(logits.schedule())
    got = logits.numpy()
    err = float(np.max(np.abs(got - forward_numpy(x_np, params))))
    print(f"logits {list(got.shape)} on {x.device!r}, {n_kernels} kernels; max |uopir - numpy| = {err:.2e}")
    print("predicted classes:", got.argmax(axis=-1).tolist())
    return 0 if err < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
