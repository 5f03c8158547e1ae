"""uopir.nn.state: state dicts and safetensors files (see uopir.frontend.nn.state)."""
from __future__ import annotations

from uopir.frontend.nn.state import (
    StateFileError,
    get_parameters,
    get_state_dict,
    load_state_dict,
    safe_load,
    safe_load_metadata,
    safe_save,
)

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata",
           "StateFileError"]
