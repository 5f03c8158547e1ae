"""uopir.nn.errors: StateFileError, the one error of every weight-file reader (safetensors in uopir.nn.state, PyTorch
checkpoints in uopir.nn.torch_load), in a module below both so that neither imports the other for it."""
from __future__ import annotations

__all__ = ["StateFileError"]


class StateFileError(ValueError):
    """A weight file (safetensors, PyTorch checkpoint) uopir cannot read; the message names the file and the fault."""
