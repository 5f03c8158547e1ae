"""The `kernel(...)` anchor: a nested pipeline that runs on every kernel body (a region whose root is a
`kernel.def`, e.g. the kernel of a `tensor.call`), at any depth. Registered here, by the kernel dialect's passes,
so the generic pass manager knows no dialect."""
from __future__ import annotations

from uopir.dialects import kernel
from uopir.ir.uop import UOp
from uopir.passes.registry import register_anchor


def is_kernel_body(r: UOp) -> bool:
    """Whether a region root is a kernel definition (compared by the op, not its name)."""
    return r.op is kernel.DEF


register_anchor("kernel", is_kernel_body,
                "run the nested pipeline on every kernel body (a region whose root is kernel.def), at any depth")
