"""Search for the best opts of a kernel on the real device (kernel-optimize{strategy=beam}, UOPIR_BEAM=N:
uopir.search.beam, its jobs (job), the local process pool that runs them (pool)), and what keeps its results: the
tuning cache (cache), the device fingerprint that keys it (fingerprint) and the progress shown while it runs
(progress). `python -m uopir.search list|merge` lists and merges tuning cache files. Importing this package installs
the `beam` strategy in the passes' registry (uopir.passes.kernel.strategies); it sits above the backends.

The names below load their module on first use, so that `uopir.search.progress` (used by examples and test
runners) does not import the compiler. `progress` is imported from its module (`from uopir.search.progress import
progress`): as a package attribute the name is the submodule."""
from __future__ import annotations

import importlib
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from uopir.passes.kernel.strategies import register_strategy

if TYPE_CHECKING:
    from uopir.ir.uop import UOp
    from uopir.passes.kernel.optimize import Opt
    from uopir.passes.target import Target

__all__ = ["TuningCache", "TuningCacheError", "open_tuning_cache", "set_tuning_cache", "get_tuning_cache",
           "using_tuning_cache", "device_fingerprint", "beam_strategy"]

_HOME = {name: "uopir.search.cache" for name in __all__[:6]} | {"device_fingerprint": "uopir.search.fingerprint"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'uopir.search' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def beam_strategy(kdef: UOp, t: Target, width: int, budget: float | None = None) -> list[Opt]:
    """kernel-optimize's `beam` strategy (loads the search on first use: an import of uopir stays light)."""
    from uopir.search.beam import beam_strategy as search

    return search(kdef, t, width, budget)


def beam_session(total: int) -> AbstractContextManager[None]:
    """The search's progress bar over a program's `total` kernels (uopir.search.beam.beam_session)."""
    from uopir.search.beam import beam_session as session

    return session(total)


register_strategy("beam", beam_strategy, beam_session)
