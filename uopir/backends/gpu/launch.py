"""Launch sizes of a gpu kernel from its hardware ids (`device.special`), evaluated with the variables' values.

A kernel with global ids runs `size` work items per dim (the local size is the runtime's choice, the grid is rounded
up to a multiple of it: the kernel's guard skips the extra items); a kernel with group and local ids runs exactly
`groups * local` items per dim, `local` per group. No ids: one work item.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uopir.backends.codegen.program import op_error
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.core import const_value
from uopir.dialects.semantics import alu, np_dtype
from uopir.ir.uop import UOp

__all__ = ["LaunchSpec", "launch_spec", "eval_index", "launch_arguments"]


def eval_index(u: UOp, var_vals: Mapping[str, int]) -> int:
    """The value of an index expression over constants and kernel.vars (iterative: no recursion)."""
    vals: dict[UOp, np.ndarray] = {}
    for x in u.toposort():
        if x.op is C.CONST:
            vals[x] = np.asarray(const_value(x), np_dtype(x.dtype))
        elif x.op is K.VAR:
            name = x.attrs.name
            if name not in var_vals:
                raise op_error(x, f"the launch size needs a value for variable {name!r}")
            vals[x] = np.asarray(var_vals[name], np_dtype(x.dtype))
        elif x.op in C.ALU_OPS or x.op is C.CAST:
            if x.op is C.CAST:
                vals[x] = vals[x.operands.x].astype(np_dtype(x.dtype))
            else:
                vals[x] = alu(x.op.name, x.dtype, [vals[s] for s in x.src])
        else:
            raise op_error(x, f"a launch size must be computed from constants and variables, not {x.op.name}")
    return int(vals[u])


@dataclass(frozen=True)
class LaunchSpec:
    """Per dim (x, y, z) the size operand of the kernel's global ids, or of its group and local ids."""

    global_ids: tuple[UOp | None, ...]
    group_ids: tuple[UOp | None, ...]
    local_ids: tuple[UOp | None, ...]

    @property
    def dims(self) -> int:
        used = [i for i in range(3) if self.global_ids[i] is not None or self.group_ids[i] is not None
                or self.local_ids[i] is not None]
        return max(used) + 1 if used else 1

    def sizes(self, var_vals: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
        """(work items per dim, work-group size per dim or None where the runtime chooses it)."""
        n = self.dims
        glob, loc = [], []
        exact = any(x is not None for x in self.local_ids)
        for d in range(n):
            g, grp, lo = self.global_ids[d], self.group_ids[d], self.local_ids[d]
            lsize = eval_index(lo, var_vals) if lo is not None else 1
            if g is not None:
                glob.append(eval_index(g, var_vals))
            elif grp is not None:
                glob.append(eval_index(grp, var_vals) * lsize)
            else:
                glob.append(lsize)
            loc.append(lsize)
        return tuple(glob), (tuple(loc) if exact else None)


def launch_spec(program: UOp) -> LaunchSpec:
    """The LaunchSpec of a device.program: where each of its hardware ids runs."""
    slots: dict[str, list[UOp | None]] = {k: [None, None, None] for k in D.SPECIAL_KINDS}
    for u in program.src:
        if u.op is D.SPECIAL:
            kind, dim = u.arg
            slots[kind][dim] = u.operands.size
    for d in range(3):
        if slots["global_id"][d] is not None and (slots["group_id"][d] is not None or slots["local_id"][d] is not None):
            raise op_error(program, f"dim {d} has a global id and a group/local id: a kernel uses one or the other")
    return LaunchSpec(tuple(slots["global_id"]), tuple(slots["group_id"]), tuple(slots["local_id"]))


def launch_arguments(name: str, buffers: Mapping[int, Any] | Sequence[Any], nparams: int, var_names: Sequence[str],
                     var_vals: Mapping[str, int] | None) -> tuple[list[Any], dict[str, int]]:
    """The buffers a gpu kernel takes (by kernel.param position) and its variable values, checked. The schedule may
    pass buffers past the last parameter the program reads (an unused input): they are not passed on."""
    vv = dict(var_vals or {})
    bufs = [buffers[i] for i in range(nparams)] if isinstance(buffers, Mapping) else list(buffers)[:nparams]
    if len(bufs) != nparams:
        raise ValueError(f"kernel {name!r} takes {nparams} buffers, got {len(bufs)}")
    missing = [v for v in var_names if v not in vv]
    if missing:
        raise ValueError(f"kernel {name!r} needs values for variables {', '.join(missing)}")
    return bufs, vv
