"""Typed pass options: a pass's options are a dataclass; this module reads its fields into `OptionInfo`s, converts
option text from a pipeline into field values, and formats values back as pipeline text (they round trip).

Supported field types: bool, int, float, str, Literal[...], an Enum, list[...] / tuple[...] of those, X | None.
"""
from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass
from typing import Any

from uopir.passes.errors import did_you_mean

__all__ = ["OptionInfo", "option_infos", "type_text", "convert_option", "format_value", "BadOptionValue"]


@dataclass(frozen=True)
class OptionInfo:
    """One typed pass option, from a dataclass field."""

    name: str  # kebab-case spelling
    field: str  # the dataclass field name
    type: Any
    default: Any
    help: str = ""

    def type_text(self) -> str:
        return type_text(self.type)


def option_infos(owner: str, options: type | None) -> tuple[OptionInfo, ...]:
    """The options of a dataclass type (each field needs a default); TypeError for an unsupported declaration."""
    if options is None:
        return ()
    if not dataclasses.is_dataclass(options) or not isinstance(options, type):
        raise TypeError(f"{owner}: options must be a dataclass type or None")
    hints = typing.get_type_hints(options)
    out = []
    for f in dataclasses.fields(options):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            raise TypeError(f"{owner}: option '{f.name}' needs a default")
        tp = hints[f.name]
        type_text(tp)  # rejects unsupported types at registration
        out.append(OptionInfo(f.name.replace("_", "-"), f.name, tp, default, f.metadata.get("help", "")))
    return tuple(out)


def type_text(tp: Any) -> str:
    """How --list-passes spells an option type; TypeError for a type options cannot have."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return "bool"
    if tp is int:
        return "int"
    if tp is float:
        return "float"
    if tp is str:
        return "string"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "|".join(m.name for m in tp)
    if origin is typing.Literal:
        return "|".join(str(a) for a in args)
    if origin in (list, tuple) and args:
        return f"list<{type_text(args[0])}>"
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return f"optional<{type_text(inner[0])}>"
    raise TypeError(f"unsupported option type {tp!r} (use bool, int, float, str, Literal, Enum, list[...], X | None)")


def _split_list(text: str) -> list[str]:
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1].strip()
    return [] if not t else [x.strip() for x in t.split(",")]


class BadOptionValue(ValueError):
    """A value outside a fixed set; `hint` holds the closest spellings."""

    def __init__(self, expected: str, hint: str = ""):
        super().__init__(expected)
        self.hint = hint


def convert_option(tp: Any, text: str | None) -> Any:
    """Parse one option value (None: the key was written bare); raises ValueError saying what was expected."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        if text is None or text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError("expected true or false")
    if text is None:
        raise ValueError(f"expected a value of type {type_text(tp)}")
    if tp is int:
        try:
            return int(text, 0)
        except ValueError:
            raise ValueError("expected an integer") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    if tp is str:
        return text
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        for m in tp:
            if text in (m.name, str(m.value)):
                return m
        raise BadOptionValue(f"expected one of {', '.join(m.name for m in tp)}",
                             did_you_mean(text, [m.name for m in tp]))
    if origin is typing.Literal:
        for a in args:
            if text == str(a):
                return a
        raise BadOptionValue(f"expected one of {', '.join(map(str, args))}", did_you_mean(text, map(str, args)))
    if origin in (list, tuple):
        vals = [convert_option(args[0], x) for x in _split_list(text)]
        return vals if origin is list else tuple(vals)
    inner = [a for a in args if a is not type(None)]
    if text.lower() == "none":
        return None
    return convert_option(inner[0], text)


def format_value(v: Any) -> str:
    """An option value as pipeline text (round trips through `convert_option`)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return ",".join(format_value(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    if s == "" or any(c in s for c in ' \t{}",()'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s
