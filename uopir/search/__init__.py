"""Search for the best opts of a kernel on the real device, and what keeps its results: the tuning cache
(uopir.search.cache), the device fingerprint that keys it (uopir.search.fingerprint) and the progress shown while
it runs (uopir.search.progress). `python -m uopir.search list|merge` lists and merges tuning cache files.

The names below load their module on first use, so that `uopir.search.progress` (used by examples and test
runners) does not import the compiler. `progress` is imported from its module (`from uopir.search.progress import
progress`): as a package attribute the name is the submodule."""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["TuningCache", "TuningCacheError", "open_tuning_cache", "set_tuning_cache", "get_tuning_cache",
           "using_tuning_cache", "device_fingerprint"]

_HOME = {name: "uopir.search.cache" for name in __all__[:6]} | {"device_fingerprint": "uopir.search.fingerprint"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'uopir.search' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
