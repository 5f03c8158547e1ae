"""Ops by role: how the dialect-agnostic core reaches the few ops it builds or reads, without naming a dialect.

UOp's operators (`a + b`, `UOp.const`, `UOp.sink`), UPat's operator sugar (`x + 0`, `UPat.cvar`) and the symbolic
integers of shapes (`uopir.ir.symbolic`, `var.bind(3)`, `u.variables()`) need "the op that adds" or "the op that is
a shape variable". The core imports no dialect and names none of their ops (unit_tests/test_import_layers.py checks
both), so each dialect says which of its ops plays a role when it loads (`register_roles({"add": ADD, ...})` in
uopir.dialects.core; `var` and `bind` in uopir.dialects.tensor; `kernel_var` in uopir.dialects.kernel) and the core
asks `role_op("add")`. A role nobody registered is a KeyError that says to load the dialects.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from uopir.ir.ops import OpDef

__all__ = ["ROLES", "register_roles", "role_op"]

# every role the core asks for: the keys of UOp's and UPat's operator sugar (the Python operator or method), the
# graph root, and the symbolic-dimension ops (a variable, its binding to a value, a kernel's variable)
ROLES: Final[frozenset[str]] = frozenset({
    "const", "cast", "bitcast", "add", "sub", "mul", "neg", "fdiv", "idiv", "mod", "max", "lt", "ne", "eq", "and",
    "or", "xor", "shl", "shr", "where", "mulacc", "sink", "var", "bind", "kernel_var",
})

_ROLE_OPS: dict[str, OpDef] = {}


def register_roles(ops: Mapping[str, OpDef]) -> None:
    """Say which op plays each role (`register_roles({"var": VAR, "bind": BIND})`); a dialect calls it right after
    the ops' declarations. An unknown role, or a role another op already plays, is a ValueError."""
    for role, op in ops.items():
        if role not in ROLES:
            raise ValueError(f"unknown op role {role!r} for {op.name}; roles: {', '.join(sorted(ROLES))}")
        if not isinstance(op, OpDef):
            raise TypeError(f"op role {role!r} needs an OpDef, got {type(op).__name__}")
        have = _ROLE_OPS.get(role)
        if have is not None and have is not op:
            raise ValueError(f"op role {role!r} is already played by {have.name}; {op.name} cannot take it")
        _ROLE_OPS[role] = op


def role_op(role: str) -> OpDef:
    """The op that plays `role` (`role_op("add")` is core.add once the dialects are loaded)."""
    op = _ROLE_OPS.get(role)
    if op is None:
        what = "is not a role" if role not in ROLES else "has no op registered"
        raise KeyError(f"op role {role!r} {what} (load the dialects first: `import uopir.dialects`)")
    return op
