"""The model zoo's weight loading: a state dict from a safetensors file or a PyTorch checkpoint, into a model.

read_weights picks the reader by the file's suffix (.safetensors: safe_load; anything else: torch_load, which reads
.pt/.pth/.bin checkpoints without torch) and unwraps a training checkpoint ({"model": sd, "epoch": 3} or
{"state_dict": sd}). load_into checks that the file's keys are the model's (less the ones the model does not
need: `skip` suffixes, and BatchNorm's num_batches_tracked, which inference never reads) and assigns them.
"""
from __future__ import annotations

import pathlib
import sys
from collections.abc import Callable
from typing import Any

try:
    from uopir import Tensor
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from uopir import Tensor
from uopir.nn.state import get_state_dict, load_state_dict, safe_load, torch_load

UNUSED = ("num_batches_tracked",)  # key suffixes a state dict may carry that inference does not read


def read_weights(path: str | pathlib.Path) -> dict[str, Tensor]:
    """The state dict in a safetensors file or a PyTorch checkpoint (unwrapping {"model"|"state_dict": sd, ...})."""
    if str(path).endswith(".safetensors"):
        return safe_load(path)
    obj: Any = torch_load(path)
    for key in ("model", "state_dict"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not all(isinstance(v, Tensor) for v in obj.values()):
        raise ValueError(f"{path}: holds no state dict (a dict of tensors, or one under 'model' or 'state_dict')")
    return dict(obj)


def load_into(model: Any, sd: dict[str, Tensor], skip: tuple[str, ...] = ()) -> None:
    """Assign sd into model; every key but the `skip` (and UNUSED) suffixes must match the model's."""
    unused = UNUSED + skip
    own = {k for k in get_state_dict(model) if not k.endswith(unused)}
    sd = {k: v for k, v in sd.items() if not k.endswith(unused)}
    if set(sd) != own:
        missing, extra = sorted(own - set(sd)), sorted(set(sd) - own)
        raise KeyError(f"the weights do not fit the model: missing {missing[:5]}, unexpected {extra[:5]}")
    load_state_dict(model, sd, strict=False)


def run_main(main: Callable[[], int]) -> int:
    """main(), with a weight file it cannot use reported as one line (`error: FILE: why`) and exit status 2."""
    try:
        return main()
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2
