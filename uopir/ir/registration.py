"""One rule for every registry (ops, folds, passes, pipelines, targets, backends, interpreter handlers): a name is
registered once, and a second registration names both places.

Each registry keeps a `Sites` table: name -> where (file:line) it was registered. Registering a taken name again is a
RegistrationError naming the first place and the new one, unless the caller passes `replace=True`, or the second
registration comes from the very same line (a module imported twice, `importlib.reload`): that is the same
definition again, and replaces it. Plain exceptions, never `assert`, so the check holds under `python -O`.
"""
from __future__ import annotations

import os
import sys

__all__ = ["RegistrationError", "Sites", "caller_site"]

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the uopir package


class RegistrationError(ValueError):
    """A name registered twice (or a registration that cannot be accepted); the message says where each was made."""


def caller_site() -> str:
    """`file:line` of the first frame outside the registration functions: the line that registers something (a
    dialect's row, a plugin's call), not the helper that records it."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if not (code.co_name in _API_NAMES and os.path.abspath(code.co_filename).startswith(_PKG)):
            return f"{_short(os.path.abspath(code.co_filename))}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


# the functions of uopir's registration APIs (and their inner helpers): frames of these are not the caller's site
_API_NAMES = frozenset({"caller_site", "claim", "_claim", "register", "def_op", "declare_folds", "deco",
                        "register_pass", "register_pipeline", "register_anchor", "register_target", "register_backend",
                        "register_handler", "register_syntax", "register_lowering", "_compile_format"})


def _short(fn: str) -> str:
    """A path relative to the working directory when it lies below it (shorter messages), else absolute."""
    try:
        rel = os.path.relpath(fn)
    except ValueError:
        return fn
    return fn if rel.startswith("..") else rel


class Sites:
    """Where each name of one registry was registered (`kind` words the messages: "op", "pass", "backend", ...)."""

    __slots__ = ("kind", "_at")

    def __init__(self, kind: str):
        self.kind = kind
        self._at: dict[str, str] = {}

    def claim(self, name: str, taken: bool, replace: bool = False, site: str | None = None,
              kind: str | None = None) -> str:
        """Record that `name` is being registered here; RegistrationError if it is `taken` (already in the registry)
        from another place and `replace` is false (`kind` words the message when one table holds several kinds).
        Returns the site recorded."""
        site = caller_site() if site is None else site
        if taken and not replace:
            first = self._at.get(name, "a built-in table")
            if first != site:
                raise RegistrationError(f"{kind or self.kind} {name!r} is already registered (at {first}); "
                                        f"registered again at {site}: pass replace=True to redefine it")
        self._at[name] = site
        return site

    def where(self, name: str) -> str | None:
        """Where `name` was registered, if it was."""
        return self._at.get(name)

    def forget(self, name: str) -> None:
        self._at.pop(name, None)
