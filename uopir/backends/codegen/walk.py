"""The one walk over a linearized `device.program` that every emitter makes: ops in execution order, each dispatched
through its language's table (OpDef -> row), so adding an op is one row per language.

`walk` takes the program's order and its escaping values from uopir.backends.codegen.program (`schedule`, `escaping`),
calls each op's row with the writer's state, and checks the structure every emitter relies on: an op with no row is a
located error (with the reason a cpu cannot run it, when it is one of `UNSUPPORTED`), blocks close innermost first
(`Writer.close`), none stays open, and no value is read before the program computes it (`Writer.value`). A row is
`row(writer, u, escapes)`: it records u's value in `writer.vals` and writes u's statements; `escapes` says u is read
after the block that computes it has closed (the writer keeps it in a variable of the function's top).

`PROGRAM_OPS` is every op a linearized program can hold, read off the dialect registry: the core and device dialects
(but `device.source`, what an emitter makes of a program) and the kernel ops that survive kernel-to-device and
device-linearize. unit_tests/test_codegen_tables.py checks that every language's table has a row for each.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from uopir.backends.codegen.program import (
    NO_VALUE,
    check_all_closed,
    check_closes,
    check_supported,
    computed,
    escaping,
    innermost,
    op_error,
    schedule,
)
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.ops import DIALECTS, OpDef
from uopir.ir.uop import UOp

__all__ = ["Row", "Table", "Writer", "walk", "nothing", "refuse", "rows", "PROGRAM_OPS", "KERNEL_OPS_IN_PROGRAMS",
           "NO_VALUE_ROWS", "CPU_REFUSES"]

Row = Callable[[Any, UOp, bool], None]  # (writer, op, escapes)
Table = Mapping[OpDef, Row]

# kernel ops a linearized program still holds (kernel.def/range/end/reduce/after are gone after device-linearize)
KERNEL_OPS_IN_PROGRAMS = (K.PARAM, K.VAR, K.INDEX, K.LOAD, K.STORE, K.LOCAL, K.REGISTER)
PROGRAM_OPS: frozenset[OpDef] = frozenset(
    (*DIALECTS["core"], *(op for op in DIALECTS["device"] if op is not D.SOURCE), *KERNEL_OPS_IN_PROGRAMS))


class Writer:
    """What every emitter's state has: the value of each op computed so far (`vals`) and the open blocks (`blocks`:
    (opener, what the writer keeps to close it)). `who` names the emitter in errors ("the C backend"); `pointer` is
    the writer's class for pointer values (reading one as a value is an error)."""

    who = "the backend"
    pointer: type = type(None)

    def __init__(self) -> None:
        self.vals: dict[UOp, Any] = {}
        self.blocks: list[tuple[UOp, Any]] = []

    def value(self, u: UOp) -> Any:
        """u's value: a located error when the program reads u before computing it, or reads a pointer as a value."""
        return computed(self.vals, u, self.pointer)

    def innermost(self) -> UOp | None:
        """The opener of the innermost open block (None outside every block)."""
        return innermost(self.blocks)

    def open(self, u: UOp, info: Any = None) -> None:
        self.blocks.append((u, info))

    def close(self, u: UOp) -> Any:
        """Close the innermost block (u: its device.endloop / device.endif); returns what `open` kept for it."""
        check_closes(u, self.innermost())
        return self.blocks.pop()[1]


def walk(program: UOp, table: Table, w: Writer) -> None:
    """Write the program's ops in execution order into w, each through its row of `table`."""
    order = schedule(program)
    escapes = escaping(order)
    for u in order:
        row = table.get(u.op)
        if row is None:
            check_supported(u, w.who)
            raise op_error(u, f"{w.who} cannot render {u.op.name}")
        row(w, u, u in escapes)
    check_all_closed(w.innermost())


def nothing(w: Writer, u: UOp, escapes: bool) -> None:
    """The row of an op that computes and writes nothing (core.sink, core.group, device.program)."""


def refuse(w: Writer, u: UOp, escapes: bool) -> None:
    """The row of an op a cpu cannot run: a located error with the reason (codegen.program.UNSUPPORTED)."""
    check_supported(u, w.who)
    raise op_error(u, f"{w.who} cannot render {u.op.name}")


def rows(ops: tuple[OpDef, ...] | frozenset[OpDef], row: Row) -> dict[OpDef, Row]:
    """The same row for each of `ops` (every ALU op, say)."""
    return {op: row for op in ops}


NO_VALUE_ROWS: dict[OpDef, Row] = rows(NO_VALUE, nothing)  # every language: ops that compute and write nothing
CPU_REFUSES: dict[OpDef, Row] = rows((D.BARRIER, D.AFTER, D.WMMA), refuse)  # cpu languages: the gpu-only ops
