"""`default{target=…}`: the named pipeline from the tensor dialect to a linearized device program.

    canonicalize, [lower-dialects], tensor-split-reduce, tensor-to-kernel, [kernel-simplify, kernel-peel],
    kernel-optimize, kernel-expand, kernel-to-device, device-transcendental, device-decompose, device-devectorize,
    device-contract, device-linearize

`target` is a device or target name (`c`, `python`, `cpu`, `gpu`, …); every target-dependent pass gets it.
kernel-optimize picks each kernel's register tile, unrolls, vector width and threaded axis from the target
description (`UOPIR_NOOPT=1` turns it off); kernel-expand turns those into vector ops, which the device passes lower
and split to the target's widths. device-transcendental approximates vector exp2/log2 by polynomials for targets
whose description asks (`vector_transcendentals`: the host cpu backends), and is a no-op elsewhere; device-contract
fuses an f32 sum's `acc + a*b` into one `device.fma` where the target has the instruction (`contract_multiply_add`).
kernel-peel cuts the output loops of a gated kernel (a pad's copy, a concat, a padded window), and its reductions over
a concat (a float sum where the target allows reordering it), into segments whose gates fold away.
tensor-split-reduce turns a large reduction to fewer outputs than the target has threads into two kernels
(per-thread partials, then their combine), so that every core works on it.
`per-kernel=true` nests the passes after tensor-to-kernel in the `kernel(...)` anchor: the same result, but each
kernel is finished before the next one starts, so the C backend's realize compiles it while the others lower.
kernel-simplify and kernel-peel run when a module registers kernel-simplify; lower-dialects when a plugin registers
the lowering of its dialect (uopir.passes.lower_dialects). `uop-opt` can stop after any of these
passes (`-p` with a prefix of the list) and reads the printed IR back.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from uopir.passes.lower_dialects import LOWERINGS
from uopir.passes.registry import register_pipeline, resolve
from uopir.passes.target import check_target_option

__all__ = ["DefaultOptions", "default_pipeline"]


@dataclass
class DefaultOptions:
    """The options of the `default` pipeline."""
    target: str = field(default="c", metadata={"help": "the device (or target) to compile for: c, python, cpu, gpu..."})
    per_kernel: bool = field(default=False, metadata={
        "help": "run the passes after tensor-to-kernel kernel by kernel (kernel(...)): the same result, each kernel "
                "finished before the next starts (a backend compiles it meanwhile)"})

    def __post_init__(self) -> None:
        check_target_option(self.target)


def default_pipeline(options: DefaultOptions) -> list[str]:
    """The pass list of `default{target=…}` (with per-kernel, the kernel and device passes inside `kernel(...)`)."""
    t = f"{{target={options.target}}}"
    simplify = ["kernel-simplify", f"kernel-peel{t}"] if resolve("kernel-simplify") else []
    per_kernel = [*simplify, f"kernel-optimize{t}", f"kernel-expand{t}", f"kernel-to-device{t}",
                  f"device-transcendental{t}", f"device-decompose{t}",
                  f"device-devectorize{t}", f"device-contract{t}", "device-linearize"]
    front = ["canonicalize", *(["lower-dialects"] if LOWERINGS else []), f"tensor-split-reduce{t}", "tensor-to-kernel"]
    if options.per_kernel:
        return [*front, f"kernel({','.join(per_kernel)})"]
    return [*front, *per_kernel]


register_pipeline("default", DefaultOptions, default_pipeline,
                  summary="tensor dialect to a linearized device program for a target (the whole lowering)")
