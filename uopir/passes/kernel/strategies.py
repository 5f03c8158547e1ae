"""kernel-optimize's measured strategies (`strategy=beam`): a registry the search package fills when imported.

Timing a candidate needs the rest of the pipeline, a compiler and a device, which the passes layer may not import;
so the pass looks its strategy up here by name, and `uopir.search` (a layer above the backends) installs one. A
strategy takes (the kernel, the target, the beam width, the search budget in seconds or None) and returns the opts it
chose, or raises StrategyUnavailable when nothing can measure on that target (under UOPIR_BEAM the pass then keeps
the heuristic) or StrategyError when its setup is wrong (a bad setting, a package missing: always an error). The
settings of the environment are read and checked here, so the pass reports a bad one at the kernel.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from uopir.ir import env
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.passes.kernel.optimize import Opt
    from uopir.passes.target import Target

__all__ = ["Strategy", "StrategyUnavailable", "StrategyError", "register_strategy", "get_strategy", "BEAM_ENV",
           "BUDGET_ENV", "RAY_ENV", "beam_width_from_env", "beam_budget_from_env", "beam_ray_from_env",
           "check_budget", "Session", "strategy_session"]

BEAM_ENV = env.BEAM.name  # UOPIR_BEAM=N: kernel-optimize's heuristic becomes a beam search of width N (tinygrad's BEAM)

BUDGET_ENV = env.BEAM_BUDGET.name  # seconds one kernel's search may take (default: uopir.search.beam.BUDGET_S)
RAY_ENV = env.BEAM_RAY.name  # local | auto | HOST:PORT: the search's jobs run as Ray tasks (uopir.search.ray_pool)

Strategy = Callable[[UOp, "Target", int, "float | None"], "list[Opt]"]
Session = Callable[[int], AbstractContextManager[object]]  # (the number of kernels) -> open around them
_STRATEGIES: dict[str, Strategy] = {}
_SESSIONS: dict[str, Session] = {}


class StrategyUnavailable(RuntimeError):
    """A measured strategy cannot run here (no search package loaded, or no device behind the target)."""


class StrategyError(RuntimeError):
    """A measured strategy is set up wrong (a bad environment setting, Ray missing): an error even under UOPIR_BEAM,
    where an unavailable strategy quietly leaves the heuristic."""


def register_strategy(name: str, fn: Strategy, session: Session | None = None) -> None:
    """Install `fn` as kernel-optimize's `strategy=name` (the last registration wins); `session(total)`, when given,
    is entered around the `total` kernels of one program (the search's progress bar over them)."""
    _STRATEGIES[name] = fn
    if session is not None:
        _SESSIONS[name] = session
    else:
        _SESSIONS.pop(name, None)


def strategy_session(name: str, total: int) -> AbstractContextManager[object]:
    """The session of strategy `name` over `total` kernels (nothing when it has none)."""
    session = _SESSIONS.get(name)
    return session(total) if session is not None else nullcontext()


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


def check_budget(seconds: float, where: str) -> float:
    """`seconds` as a search budget (positive and finite); ValueError naming `where` for another value."""
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{where}={seconds!r}: a search budget is a positive number of seconds")
    return seconds


def beam_budget_from_env() -> float | None:
    """$UOPIR_BEAM_BUDGET as seconds per kernel's search (None when unset or empty); ValueError naming it."""
    return env.BEAM_BUDGET.get()


def beam_ray_from_env() -> str | None:
    """$UOPIR_BEAM_RAY: "local", "auto", a cluster address (HOST:PORT, ray://HOST:PORT), or None (unset, empty, 0,
    off: the local process pool); ValueError naming the variable for another value."""
    return env.BEAM_RAY.get()
