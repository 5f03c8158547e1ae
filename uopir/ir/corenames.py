"""The one place where `uopir/ir/` names ops of a dialect: the `core` ops, and the symbolic variable ops.

The core knows no dialect by import (dialects import the core, never the reverse), yet a few generic tools need
core ops: UPat's operator sugar (`x + 0` is a core.add pattern), `UPat.cvar`, and UOp's own operators
(`a + b`, `UOp.const`, `UOp.sink`). They name those ops here, by their
registered names, and resolve them lazily through the op registry (the core dialect registers them when it loads).
A renamed or removed core op then breaks in exactly one visible place. The symbolic integers of shapes
(`uopir.ir.symbolic`, and tinygrad's `var.bind(3)` / `bind.unbind()` / `u.variables()` on UOp) name the variable
and binding ops the same way (SYMBOLIC_OPS).
"""
from __future__ import annotations

from typing import Final

from uopir.ir.ops import OpDef, get_op

__all__ = ["CORE_OPS", "SYMBOLIC_OPS", "core_op", "symbolic_op"]

# key (the Python operator or method the sugar uses) -> registered op name
CORE_OPS: Final[dict[str, str]] = {
    "const": "core.const", "cast": "core.cast", "bitcast": "core.bitcast",
    "add": "core.add", "sub": "core.sub", "mul": "core.mul", "neg": "core.neg", "fdiv": "core.fdiv",
    "idiv": "core.idiv", "mod": "core.mod", "max": "core.max", "lt": "core.cmplt", "ne": "core.cmpne",
    "eq": "core.cmpeq", "and": "core.and", "or": "core.or", "xor": "core.xor", "shl": "core.shl",
    "shr": "core.shr", "where": "core.where", "mulacc": "core.mulacc", "sink": "core.sink",
}

_RESOLVED: dict[str, OpDef] = {}


def core_op(key: str) -> OpDef:
    """The core op for a key of CORE_OPS (`core_op("add")` is core.add); KeyError if the core dialect is not loaded."""
    op = _RESOLVED.get(key)
    if op is None:
        try:
            op = _RESOLVED[key] = get_op(CORE_OPS[key])
        except KeyError:
            raise KeyError(f"core op {CORE_OPS.get(key, key)!r} is not registered (load the dialects first: "
                           f"`import uopir.dialects`)") from None
    return op


# key -> registered op name: the variables of symbolic shapes, their binding to a value, and the kernel's variable
SYMBOLIC_OPS: Final[dict[str, str]] = {"var": "tensor.var", "bind": "tensor.bind", "kernel_var": "kernel.var"}


def symbolic_op(key: str) -> OpDef:
    """The op for a key of SYMBOLIC_OPS; KeyError if its dialect is not loaded."""
    op = _RESOLVED.get("sym:" + key)
    if op is None:
        try:
            op = _RESOLVED["sym:" + key] = get_op(SYMBOLIC_OPS[key])
        except KeyError:
            raise KeyError(f"op {SYMBOLIC_OPS.get(key, key)!r} is not registered (load the dialects first: "
                           f"`import uopir.dialects`)") from None
    return op
