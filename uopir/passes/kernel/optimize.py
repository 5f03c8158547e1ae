"""kernel-optimize: choose, per kernel, how its ranges map onto registers, vector lanes and threads.

The opts and how each is applied: uopir.passes.kernel.opts. `strategy=heuristic` picks them from the target
description (uopir.passes.kernel.heuristic); `strategy=none` changes nothing.

`strategy=beam width=N` (or `UOPIR_BEAM=N` in place of the heuristic, on a target that has a device to time on; the
heuristic elsewhere) asks the strategy that uopir.search installs (uopir.passes.kernel.strategies): a search from
the heuristic's opts, timed on the device; its winner is applied and printed exactly as the heuristic's would be.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Literal

from uopir.ir import env
from uopir.ir.regions import count_regions, map_regions
from uopir.ir.uop import UOp
from uopir.passes.kernel.anchors import is_kernel_body
from uopir.passes.kernel.heuristic import PARALLEL_MIN_WORK, heuristic_opts, leave_alone
from uopir.passes.kernel.opts import PACK_MAX_BYTES, Opt, OptError, apply_opt, apply_opts
from uopir.passes.kernel.strategies import (
    BEAM_ENV,
    BUDGET_ENV,
    StrategyError,
    StrategyUnavailable,
    beam_budget_from_env,
    beam_ray_from_env,
    beam_width_from_env,
    check_budget,
    get_strategy,
    strategy_session,
)
from uopir.passes.manager import PassContext
from uopir.passes.registry import register_pass
from uopir.passes.target import Target, UnknownTargetError, check_target_option, target

__all__ = ["Opt", "OptError", "apply_opt", "apply_opts", "heuristic_opts", "optimize_kernel", "PARALLEL_MIN_WORK",
           "NOOPT_ENV", "PACK_MAX_BYTES"]

NOOPT_ENV = env.NOOPT.name


def optimize_kernel(kdef: UOp, t: Target, strategy: str = "heuristic", width: int = 4,
                    budget: float | None = None) -> tuple[UOp, list[Opt]]:
    """One kernel optimized by `strategy` on target t: (the new kernel, the opts applied). A measured strategy
    (`beam`, uopir.passes.kernel.strategies; `budget` seconds, None: its default) raises StrategyUnavailable when
    nothing can measure on t, StrategyError when it is set up wrong."""
    if strategy == "none" or (strategy != "heuristic" and leave_alone(kdef)):
        return kdef, []
    opts = heuristic_opts(kdef, t) if strategy == "heuristic" else get_strategy(strategy)(kdef, t, width, budget)
    return apply_opts(kdef, opts), opts


# ---- the pass --------------------------------------------------------------------------------------------------------
@dataclass
class KernelOptimizeOptions:
    """The options of kernel-optimize."""

    strategy: Literal["heuristic", "beam", "none"] = field(default="heuristic", metadata={
        "help": f"how opts are chosen (heuristic: from the target description; beam: a search timed on the target's "
                f"device, starting from the heuristic's opts; none: no change; {NOOPT_ENV}=1 in the environment makes "
                f"heuristic none, {BEAM_ENV}=N makes it beam with width N)"})
    target: str = field(default="cpu", metadata={"help": "the target description to read (cpu, gpu, a device)"})
    width: int = field(default=4, metadata={"help": "beam: the candidates kept per round"})
    budget: float = field(default=0.0, metadata={
        "help": f"beam: seconds one kernel's search may take (0: ${BUDGET_ENV}, else the search's default)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)
        if self.width < 1:
            e = ValueError(f"width={self.width}: a beam keeps at least one candidate")
            e.option = "width"  # type: ignore[attr-defined]
            raise e
        if self.budget != 0:
            try:
                check_budget(self.budget, "budget")
            except ValueError as e:
                e.option = "budget"  # type: ignore[attr-defined]
                raise


def _strategy(options: KernelOptimizeOptions) -> tuple[str, int]:
    """The strategy and width the options and the environment ask for (ValueError for a bad UOPIR_NOOPT/UOPIR_BEAM)."""
    strategy, width = options.strategy, options.width
    if strategy == "heuristic" and env.NOOPT.get():
        strategy = "none"
    if strategy == "heuristic":
        width = beam_width_from_env() or 0
        strategy = "beam" if width else strategy
    return strategy, width


def _around_kernels(options: KernelOptimizeOptions, total: Callable[[], int]) -> AbstractContextManager[object]:
    """What a measured strategy opens around a program's kernels (`total()` of them: its progress bar), else
    nothing (the heuristic does not count them)."""
    try:
        strategy, _ = _strategy(options)
    except ValueError:  # reported by the pass, at the kernel
        return nullcontext()
    return nullcontext() if strategy in ("heuristic", "none") else strategy_session(strategy, total())


@register_pass("kernel-optimize", summary="choose upcast/unroll/thread opts per kernel from the target description",
               consumes=("kernel",), produces=("kernel",), options=KernelOptimizeOptions,
               around_regions=_around_kernels)
def kernel_optimize(root: UOp, options: KernelOptimizeOptions, ctx: PassContext) -> UOp:
    try:
        strategy, width = _strategy(options)
    except ValueError as e:
        ctx.error(root, str(e))
        return root
    from_env = strategy != options.strategy  # UOPIR_BEAM: where nothing can measure (no device), the heuristic
    budget = options.budget or None
    try:
        t = target(options.target)
        if strategy == "beam":  # the search's settings, checked before any kernel
            budget = budget or beam_budget_from_env()
            beam_ray_from_env()
    except (UnknownTargetError, ValueError) as e:
        ctx.error(root, str(e))
        return root

    def run(kdef: UOp) -> UOp:
        try:
            try:
                new, opts = optimize_kernel(kdef, t, strategy, width, budget)
            except StrategyUnavailable:
                if not from_env:
                    raise
                new, opts = optimize_kernel(kdef, t, "heuristic")
        except (OptError, StrategyUnavailable, StrategyError) as e:
            ctx.error(kdef, f"kernel-optimize: {e}")
            return kdef
        if opts:
            ctx.count("kernels-optimized")
            for o in opts:
                ctx.count(f"{o.kind}-opts")
        return new

    if is_kernel_body(root):
        return run(root)
    with _around_kernels(options, lambda: count_regions(root, is_kernel_body)):  # the search's bar over the kernels
        return map_regions(root, is_kernel_body, run)

