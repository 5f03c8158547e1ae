"""Custom pretty forms: how an op's operands are written between its name and its attributes.

By default an op's operands print as `name %a, %b, %c`. `register_syntax(op, "$a * $b + $c")` writes them as
`name %a * %b + %c` instead: a declarative format whose `$name` words are the op's named operands (`operands=` of
`def_op`, or `$0`, `$1`, ... by position) and whose other words are punctuation or keywords written as they are.
For a form a format cannot say, give `print_fn(u, operand_names) -> str` and `parse_fn(cursor) -> list[UOp]` instead
(the cursor reads the line's tokens: `peek`, `expect`, `operand`, `error`).

Only the operand part changes: attributes, the type and the generic form (`"mydsl.fma3"(...)`, which every op
keeps) are written as for any op, so `--print-generic` output parses back whatever the hooks do.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from uopir.ir.lexer import tokenize_line
from uopir.ir.ops import OpDef
from uopir.ir.registration import RegistrationError, Sites

if TYPE_CHECKING:
    from uopir.ir.uop import UOp

__all__ = ["OpSyntax", "Cursor", "SYNTAX", "register_syntax"]


class Cursor(Protocol):
    """What a parse hook reads the rest of the op's line with (the parser implements it; errors are located)."""

    def peek(self) -> str | None: ...  # the next token, None at the end of the line

    def expect(self, token: str) -> None: ...  # consume `token` or fail naming what was found

    def operand(self) -> UOp: ...  # consume a `%name` and return its value (an undefined name fails)

    def error(self, message: str) -> None: ...  # fail at the next token


@dataclass(frozen=True)
class OpSyntax:
    """An op's custom operand syntax: `print(u, names) -> text` and `parse(cursor) -> operands`."""

    print: Callable[[UOp, list[str]], str]
    parse: Callable[[Cursor], list[UOp]]
    format: str | None = None


SYNTAX: dict[OpDef, OpSyntax] = {}
_SITES = Sites("custom syntax of op")


def _compile_format(op: OpDef, fmt: str) -> OpSyntax:
    """The print and parse hooks of a declarative format; a format that names an unknown operand, or does not name
    every operand once, is a RegistrationError."""
    names = [n.lstrip("*") for n in op.operands]
    lo, hi = op.n_src
    if hi is None or lo != hi:
        raise RegistrationError(f"custom syntax of {op.name}: a format needs a fixed operand count (use print/parse "
                                f"functions for a variadic op)")
    items: list[tuple[bool, object]] = []  # (is_operand, operand index | literal token)
    for word in fmt.split():
        if word.startswith("$"):
            key = word[1:]
            k = int(key) if key.isdigit() else (names.index(key) if key in names else -1)
            if not 0 <= k < lo:
                known = ", ".join("$" + n for n in names) or ", ".join(f"${i}" for i in range(lo))
                raise RegistrationError(f"custom syntax of {op.name}: '{word}' is not an operand (operands: {known})")
            items.append((True, k))
        else:
            for tok in tokenize_line(word):
                if tok.startswith("%") or tok in ("{", "}", "(", ")", ":", "//") or tok.startswith("//"):
                    raise RegistrationError(f"custom syntax of {op.name}: '{tok}' cannot be a literal of a format "
                                            f"(it would be read as a value, an attribute dict, a region or the type)")
                items.append((False, tok))
    used = sorted(k for is_op, k in items if is_op)
    if used != list(range(lo)):
        raise RegistrationError(f"custom syntax of {op.name}: the format must name each of its {lo} operands once")

    def print_fn(u: UOp, operand_names: list[str]) -> str:
        return " ".join(operand_names[k] if is_op else k for is_op, k in items)  # type: ignore[misc]

    def parse_fn(c: Cursor) -> list[UOp]:
        got: list[UOp | None] = [None] * lo
        for is_op, k in items:
            if is_op:
                got[k] = c.operand()  # type: ignore[index]
            else:
                c.expect(k)  # type: ignore[arg-type]
        return got  # type: ignore[return-value]

    return OpSyntax(print_fn, parse_fn, fmt)


def register_syntax(op: OpDef, format: str | None = None, *,  # noqa: A002 - the word users know
                    print_fn: Callable[[UOp, list[str]], str] | None = None,
                    parse_fn: Callable[[Cursor], list[UOp]] | None = None, replace: bool = False) -> OpSyntax:
    """Give `op` a custom pretty form for its operands: a declarative `format` ("$a * $b + $c"), or both
    `print_fn` and `parse_fn`. A second registration from another line is a RegistrationError unless `replace`."""
    if not isinstance(op, OpDef):
        raise RegistrationError(f"register_syntax needs an OpDef, got {op!r}")
    if (format is not None and (print_fn or parse_fn)) or (format is None and (print_fn is None or parse_fn is None)):
        raise RegistrationError(f"custom syntax of {op.name}: give a format, or both print_fn and parse_fn")
    syn = _compile_format(op, format) if format is not None else OpSyntax(print_fn, parse_fn)  # type: ignore[arg-type]
    _SITES.claim(op.name, op in SYNTAX, replace)
    SYNTAX[op] = syn
    return syn
