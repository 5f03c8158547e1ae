"""Search: kernel-optimize{strategy=beam} and UOPIR_BEAM=N, opts timed on the real device (uopir.search.beam), the
jobs that compile and time one candidate (job), the local process pool that runs them (pool), and the tuning cache
that keeps the winners (cache). Importing this package installs the `beam` strategy; it sits above the backends."""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.passes.kernel.strategies import register_strategy

if TYPE_CHECKING:
    from uopir.ir.uop import UOp
    from uopir.passes.kernel.optimize import Opt
    from uopir.passes.target import Target

__all__ = ["beam_strategy"]


def beam_strategy(kdef: UOp, t: Target, width: int) -> list[Opt]:
    """kernel-optimize's `beam` strategy (loads the search on first use: an import of uopir stays light)."""
    from uopir.search.beam import beam_strategy as search

    return search(kdef, t, width)


register_strategy("beam", beam_strategy)
