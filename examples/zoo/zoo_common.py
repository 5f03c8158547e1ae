"""What the zoo's three models share: reading a weight file, loading a state dict with errors a user can act on,
deterministic random weights, and the command line's error handling (a clear message and exit status 1).

A state dict here is a {name: Tensor or numpy array} dict, from a safetensors file (uopir.nn.state.safe_load), from a
PyTorch checkpoint (uopir.nn.state.torch_load) or built in memory: every model's `load`
takes the dict, so the source does not matter.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from uopir import Tensor
from uopir.nn.state import StateFileError, get_state_dict, load_state_dict, safe_load, torch_load

StateDict = dict[str, Any]


class ZooError(Exception):
    """A fault in the user's input (a weight file, its keys, an image): main prints it and exits with status 1."""


def read_weights(path: str) -> StateDict:
    """The state dict in a .safetensors file or a PyTorch .pt/.pth/.bin checkpoint; ZooError naming the file when it
    is missing or unreadable. A checkpoint that wraps its weights ({"state_dict": ...}, {"model": ...}) is unwrapped."""
    if not os.path.exists(path):
        raise ZooError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ZooError(f"{path}: is a folder, not a weight file")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".safetensors":
            sd: Any = safe_load(path)
        elif ext in (".pt", ".pth", ".bin", ".ckpt"):
            sd = torch_load(path)
        else:
            raise ZooError(f"{path}: unknown weight file type {ext or '(no extension)'!r} (expected .safetensors, "
                           ".pt, .pth or .bin)")
    except (StateFileError, ValueError, OSError) as e:
        said = str(e).removeprefix(f"{path}: ")  # the readers name the file themselves
        raise ZooError(f"{path}: cannot read the weights: {said}") from None
    for wrapper in ("state_dict", "model"):
        if isinstance(sd, dict) and isinstance(sd.get(wrapper), dict):
            sd = sd[wrapper]
    if not isinstance(sd, dict) or not sd:
        raise ZooError(f"{path}: holds no tensors")
    return sd


def shape_of(v: Any) -> tuple[int, ...]:
    return tuple(v.shape)


def _listed(keys: list[str], most: int = 6) -> str:
    shown = ", ".join(keys[:most])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > most else "")


def load(model: Any, sd: StateDict, ignore: Callable[[str], bool] = lambda k: False,
         optional: Iterable[str] = ("num_batches_tracked",)) -> None:
    """Load sd into model, every key checked first: keys sd lacks (save those ending in an `optional` name, such as
    BatchNorm's counter that older checkpoints do not store) and keys the model lacks (save those `ignore` accepts)
    are one ZooError, as are shapes that differ."""
    own = get_state_dict(model)
    optional = tuple(optional)
    missing = [k for k in own if k not in sd and not k.endswith(optional)]
    extra = [k for k in sd if k not in own and not ignore(k)]
    faults = []
    if missing:
        faults.append(f"missing keys (the model has them, the weights do not): {_listed(missing)}")
    if extra:
        faults.append(f"unexpected keys (in the weights, not in the model): {_listed(extra)}")
    bad = [f"{k} is {shape_of(sd[k])} in the weights, {tuple(t.shape)} in the model" for k, t in own.items()
           if k in sd and shape_of(sd[k]) != tuple(t.shape)]
    if bad:
        faults.append("shapes differ: " + "; ".join(bad[:6]))
    if faults:
        raise ZooError("the weights do not fit the model: " + "; ".join(faults))
    load_state_dict(model, {k: v for k, v in sd.items() if k in own}, strict=False)


def random_state_dict(model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic float32 weights for every tensor of model, sized so activations stay near 1: matrices and
    kernels N(0, 1/fan_in) (fan_in: the product of all dims but the first), norm scales and running variances
    around 1, other vectors N(0, 0.1^2), BatchNorm's counter 0. The numpy arrays feed both uopir and a reference."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for k, t in get_state_dict(model).items():
        shape = tuple(t.shape)
        if k.endswith("num_batches_tracked"):
            out[k] = np.zeros(shape, np.int64)
        elif k.endswith("running_var"):
            out[k] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        elif len(shape) >= 2 and not k.endswith(("cls_token", "pos_embed")):
            fan_in = math.prod(shape[1:])
            out[k] = (rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32)
        elif len(shape) == 1 and k.endswith("weight"):  # a norm's scale
            out[k] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            out[k] = (0.1 * rng.standard_normal(shape)).astype(np.float32)
    return out


def numpy_of(v: Any) -> np.ndarray:
    return v.numpy() if isinstance(v, Tensor) else np.asarray(v)


def read_image(path: str | None, size: int, seed: int) -> np.ndarray:
    """A (1, 3, size, size) float32 batch: from a .npy file holding a (3, H, W) or (H, W, 3) image already resized to
    size x size and normalized as the weights expect, or (no path) a deterministic random one."""
    if path is None:
        return np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype(np.float32)
    if not os.path.isfile(path):
        raise ZooError(f"{path}: no such file")
    try:
        img = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise ZooError(f"{path}: not a .npy array ({e})") from None
    if img.ndim == 3 and img.shape[-1] == 3 and img.shape[0] != 3:
        img = img.transpose(2, 0, 1)
    if img.ndim == 3:
        img = img[None]
    if img.shape != (1, 3, size, size) or img.dtype.kind not in "fiu":
        raise ZooError(f"{path}: an image of shape {img.shape} ({img.dtype}); the model takes a numeric (3, {size}, "
                       f"{size}) or ({size}, {size}, 3) array")
    return img.astype(np.float32)


def weights_args(ap: argparse.ArgumentParser) -> None:
    """--weights FILE | --random, --seed and --device: every model's command line has them."""
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--weights", metavar="FILE", help="a .safetensors file (or a PyTorch .pt/.pth checkpoint); the "
                     "model's size is read from the tensors' shapes")
    src.add_argument("--random", action="store_true", help="random weights for a tiny configuration (a smoke test)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random weights and the random input")
    ap.add_argument("--device", default=None, help="the device to run on (default: uopir's default)")


def use_device(name: str | None) -> None:
    """Make `name` this process's default device (uopir's UOPIR_DEVICE), checked first: ZooError naming the valid
    ones when it is unknown."""
    if name is None:
        return
    from uopir.backends.registry import canonical
    try:
        os.environ["UOPIR_DEVICE"] = canonical(name)
    except ValueError as e:
        raise ZooError(f"--device: {e}") from None


def run_main(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """main(argv), with a ZooError or a missing/bad file reported as one line on stderr and exit status 1."""
    try:
        return main(argv)
    except ZooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def top_k(logits: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k most likely classes of one row of logits, as (class index, softmax probability), most likely first."""
    p = np.exp(logits - logits.max())
    p /= p.sum()
    idx = np.argsort(-p, kind="stable")[:k]
    return [(int(i), float(p[i])) for i in idx]
