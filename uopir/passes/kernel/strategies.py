"""kernel-optimize's measured strategies (`strategy=beam`): a registry the search package fills when imported.

Timing a candidate needs the rest of the pipeline, a compiler and a device, which the passes layer may not import;
so the pass looks its strategy up here by name, and `uopir.search` (a layer above the backends) installs one. A
strategy takes (the kernel, the target, the beam width) and returns the opts it chose, or raises
StrategyUnavailable (the pass reports it at the kernel) when nothing can measure on that target.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from uopir.ir import env
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.passes.kernel.optimize import Opt
    from uopir.passes.target import Target

__all__ = ["Strategy", "StrategyUnavailable", "register_strategy", "get_strategy", "BEAM_ENV", "beam_width_from_env"]

BEAM_ENV = env.BEAM.name  # UOPIR_BEAM=N: kernel-optimize's heuristic becomes a beam search of width N (tinygrad's BEAM)

Strategy = Callable[[UOp, "Target", int], "list[Opt]"]
_STRATEGIES: dict[str, Strategy] = {}


class StrategyUnavailable(RuntimeError):
    """A measured strategy cannot run here (no search package loaded, or no device behind the target)."""


def register_strategy(name: str, fn: Strategy) -> None:
    """Install `fn` as kernel-optimize's `strategy=name` (the last registration wins)."""
    _STRATEGIES[name] = fn


def get_strategy(name: str) -> Strategy:
    """The strategy registered as `name`; StrategyUnavailable saying what to import when there is none."""
    fn = _STRATEGIES.get(name)
    if fn is None:
        raise StrategyUnavailable(f"strategy={name} measures candidates on a device: import uopir.search (uop-opt and "
                                  f"Tensor programs do) to install it")
    return fn


def beam_width_from_env() -> int | None:
    """$UOPIR_BEAM as a beam width (None when unset, empty or 0); ValueError naming the variable for a bad value."""
    return env.BEAM.get() or None
