"""What the kernel → device passes share: resolving a `target=` option, and running a function on every kernel of
a program (the root itself, or each region whose root is a kernel.def or a device.program)."""
from __future__ import annotations

from collections.abc import Callable

from uopir.dialects import device, kernel
from uopir.ir.regions import map_regions
from uopir.ir.uop import UOp
from uopir.passes.manager import PassContext
from uopir.passes.target import Target, UnknownTargetError, target

__all__ = ["resolve_target", "in_kernels", "is_kernel_root"]


def resolve_target(name: str, root: UOp, ctx: PassContext) -> Target | None:
    """The registered target `name`; an unknown name is an error reported at the root (None is returned)."""
    try:
        return target(name)
    except UnknownTargetError as e:
        ctx.error(root, f"{ctx.pass_name}: {e}")
        return None


def is_kernel_root(r: UOp) -> bool:
    """A kernel body at any device-lowering stage: a kernel.def, or the device.program it was linearized into."""
    return r.op is kernel.DEF or r.op is device.PROGRAM


def in_kernels(root: UOp, fn: Callable[[UOp], UOp]) -> UOp:
    """fn applied to the root when it is a kernel, else to every kernel region nested in it (each once)."""
    if is_kernel_root(root):
        return fn(root)
    return map_regions(root, is_kernel_root, fn)

