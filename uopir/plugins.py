"""Plugins: packages outside uopir that register dialects, folds, passes, pipelines, targets, backends and
reference-interpreter handlers.

A plugin is a module, or a callable `module:function`, whose import (or call) registers things through the public
registration APIs. Three ways to name one:
  - an entry point of the group `uopir.plugins` in an installed package's metadata (`pip install` is all it takes);
    uop-opt, uop-run and uop-viz load every installed one unless `--no-plugins`;
  - `--load-plugin=SPEC` on those tools, for one that is not installed (SPEC: `module` or `module:function`);
  - `$UOPIR_PLUGINS` (comma-separated SPECs, or `installed` for every entry point) for the Python API: read when
    `uopir` is imported (and by the tools).
A plugin that fails (missing module, an exception, a name it registers twice) is a PluginError saying which plugin,
where it came from, and the line that failed; each plugin loads once per process.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass, field

from uopir.ir import env
from uopir.ir.registration import RegistrationError

__all__ = ["GROUP", "Plugin", "PluginError", "LOADED", "installed", "load_plugin", "load_installed", "load_env",
           "listing"]

GROUP = "uopir.plugins"
_PKG = os.path.dirname(os.path.abspath(__file__))
_LOCK = threading.RLock()


class PluginError(Exception):
    """A plugin that could not be loaded: which one, where it came from, what failed and where."""


@dataclass
class Plugin:
    """One loaded plugin: its name, what it points at (`module` or `module:function`), where it was named, and the
    registry entries its load added (kind -> names), for `--list-plugins`."""

    name: str
    spec: str
    source: str  # "installed (package 1.0)", "--load-plugin", "$UOPIR_PLUGINS", "the Python API"
    added: dict[str, list[str]] = field(default_factory=dict)


LOADED: dict[str, Plugin] = {}  # spec -> the plugin loaded from it


def _snapshot() -> dict[str, set[str]]:
    """The names in every registry now (to say what a plugin added)."""
    from uopir.backends import registry as backends
    from uopir.backends.python.interpreter import LEVELS
    from uopir.ir import folds, ops
    from uopir.passes import registry as passes
    from uopir.passes import target

    def own(table: dict, fn: str) -> set[str]:  # uopir's own passes load lazily: not the plugin's
        return {n for n, v in table.items() if not getattr(getattr(v, fn), "__module__", "").startswith("uopir.")}

    return {"ops": set(ops.REGISTRY), "folds": {f.name for f in folds.folds_of()}, "passes": own(passes.PASSES, "fn"),
            "pipelines": own(passes.PIPELINES, "expand"), "targets": set(target.targets()),
            "backends": set(backends.BACKENDS), "handlers": {op.name for table in LEVELS.values() for op in table}}


def _where(e: BaseException) -> str:
    """The innermost line of the traceback outside uopir and importlib: the plugin's line that failed."""
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(_PKG) and "importlib" not in f.filename
              and not f.filename.startswith("<frozen")]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def load_plugin(spec: str, source: str = "the Python API", name: str | None = None) -> Plugin:
    """Load the plugin `spec` (`module` or `module:function`; a function is called with no arguments) once; a
    PluginError names it, `source`, and the failing line."""
    if not isinstance(spec, str) or not spec.strip() or spec.count(":") > 1:
        raise PluginError(f"plugin {spec!r} ({source}): name a module or module:function")
    spec = spec.strip()
    with _LOCK:
        if spec in LOADED:
            return LOADED[spec]
        mod_name, _, attr = spec.partition(":")
        label = f"plugin '{name or spec}' ({source}{'' if name is None or name == spec else ', ' + spec})"
        before = _snapshot()
        try:
            obj = importlib.import_module(mod_name)
            if attr:
                fn = getattr(obj, attr, None)
                if not callable(fn):
                    raise PluginError(f"{label}: module {mod_name} has no function {attr!r}")
                fn()
        except PluginError:
            raise
        except ModuleNotFoundError as e:
            if e.name is not None and mod_name.startswith(e.name):
                raise PluginError(f"{label}: no module named {mod_name!r} (is it installed, or on PYTHONPATH?)") \
                    from None
            raise PluginError(f"{label}: {type(e).__name__}: {e}{_where(e)}") from e
        except Exception as e:  # noqa: BLE001 - any failure inside a plugin is its error, located
            where = "" if isinstance(e, RegistrationError) else _where(e)  # its message names the lines already
            raise PluginError(f"{label}: {type(e).__name__}: {e}{where}") from e
        after = _snapshot()
        p = Plugin(name or spec, spec, source,
                   {k: sorted(after[k] - before[k]) for k in after if after[k] - before[k]})
        LOADED[spec] = p
        return p


def installed() -> list[importlib.metadata.EntryPoint]:
    """The entry points of the group `uopir.plugins` of the installed packages, by name."""
    return sorted(importlib.metadata.entry_points(group=GROUP), key=lambda ep: ep.name)


def load_installed() -> list[Plugin]:
    """Load every installed plugin (entry points of `uopir.plugins`)."""
    out = []
    for ep in installed():
        dist = ep.dist
        where = f"installed: {dist.name} {dist.version}" if dist is not None else "installed"
        out.append(load_plugin(ep.value, where, name=ep.name))
    return out


_ENV_FAILURE: PluginError | None = None
TOOLS = ("uop-opt", "uop-run", "uop-viz")  # their environment check reports a $UOPIR_PLUGINS failure as its error


def _in_a_tool() -> bool:
    """Is this process one of uopir's tools (its console script, or `python -m uopir.tools.<tool>`)?"""
    argv = getattr(sys, "orig_argv", sys.argv)
    if "-m" in argv[:-1]:  # while `python -m` imports the tool's package, sys.argv[0] is still "-m"
        return argv[argv.index("-m") + 1] in {"uopir.tools." + t.replace("-", "_") for t in TOOLS}
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name in TOOLS


def load_env(at_import: bool = False) -> list[Plugin]:
    """Load what $UOPIR_PLUGINS names (comma-separated specs; the word `installed`: every entry point). At import
    of uopir a failure is a warning, kept and raised by the next call (a tool's environment check): a bad value
    must not break `import uopir`."""
    global _ENV_FAILURE
    if _ENV_FAILURE is not None and not at_import:
        raise _ENV_FAILURE
    out: list[Plugin] = []
    try:
        for spec in (s.strip() for s in env.PLUGINS.raw().split(",")):
            if spec == "installed":
                out.extend(load_installed())
            elif spec:
                out.append(load_plugin(spec, f"${env.PLUGINS.name}"))
    except PluginError as e:
        if not at_import:
            raise
        _ENV_FAILURE = e
        if not _in_a_tool():  # a tool says it once, as its error line
            warnings.warn(str(e), RuntimeWarning, stacklevel=3)
    return out


def listing() -> str:
    """What `--list-plugins` prints: each loaded plugin, where it came from, and what it registered."""
    if not LOADED:
        return "No plugins loaded.\n"
    lines = ["Plugins:"]
    for p in LOADED.values():
        lines.append(f"  {p.name}  ({p.source}; {p.spec})")
        for kind, names in p.added.items():
            lines.append(f"      {kind}: {', '.join(names)}")
    return "\n".join(lines) + "\n"
