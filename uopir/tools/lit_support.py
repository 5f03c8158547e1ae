"""lit set-up for a plugin's own test suite: the substitutions uopir's suite uses, with the plugin loaded.

A plugin's `lit.cfg.py` is three lines:

    from uopir.tools.lit_support import configure
    configure(config, lit_config, name="mydsl", plugins=["uopir_mydsl:register"], paths=[PLUGIN_ROOT])

and its RUN lines use `%uop-opt`, `%uop-run` (the tools with `--load-plugin=` for each plugin), `%roundtrip` (print
generically, parse back, print pretty: `// RUN: %roundtrip | %filecheck %s`), `%filecheck` and `%python`; the
feature `c-compiler` is set as in uopir's own suite. `paths`
go on PYTHONPATH, so the suite runs from a checkout without installing the plugin (an installed one is loaded once).
"""
from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable
from typing import Any

from uopir.ir import env

__all__ = ["configure", "tool_command"]


def tool_command(tool: str, plugins: Iterable[str] = ()) -> str:
    """The shell command of uop-opt / uop-run / uop-viz of this Python, loading `plugins`."""
    module = {"uop-opt": "uopir.tools.uop_opt", "uop-run": "uopir.tools.uop_run", "uop-viz": "uopir.tools.uop_viz"}
    if tool not in module:
        raise ValueError(f"unknown tool {tool!r}; tools: {', '.join(module)}")
    loads = "".join(f" --load-plugin={p}" for p in plugins)
    return f'"{sys.executable}" -m {module[tool]}{loads}'


def configure(config: Any, lit_config: Any, *, name: str, plugins: Iterable[str] = (), paths: Iterable[str] = (),
              suffixes: Iterable[str] = (".uop",)) -> None:
    """Set up a lit suite (the folder of the calling lit.cfg.py) that tests a plugin with uopir's tools."""
    import lit.formats

    plugins = list(plugins)
    config.name = name
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.suffixes = list(suffixes)
    config.excludes = ["Inputs", "lit.cfg.py"]
    config.recursiveExpansionLimit = 10  # %roundtrip holds %uop-opt and %s
    py_path = [os.path.abspath(p) for p in paths]
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    py_path.append(repo)  # this uopir, also when it is not installed
    config.environment["PYTHONPATH"] = os.pathsep.join([*py_path, *filter(None, [os.environ.get("PYTHONPATH")])])
    config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
    # the compiler choice, caches and uopir's settings follow the user's environment
    config.environment.update({k: v for k, v in os.environ.items()
                               if k.startswith("UOPIR_") or k in ("CC", "HOME", "XDG_CACHE_HOME")})
    filecheck = shutil.which("filecheck", path=os.pathsep.join([os.path.dirname(sys.executable),
                                                                 os.environ.get("PATH", "")]))
    if filecheck is None:
        lit_config.fatal("filecheck not found: pip install filecheck (uopir's test extra)")
    cc = list(env.CC.get_at_import())
    if (cc and shutil.which(cc[0])) or (not cc and (shutil.which("clang") or shutil.which("cc"))):
        config.available_features.add("c-compiler")  # as in uopir's suite: `REQUIRES: c-compiler`
    subs = [("%uop-opt", tool_command("uop-opt", plugins)), ("%uop-run", tool_command("uop-run", plugins)),
            ("%filecheck", f'"{filecheck}"'), ("%python", f'"{sys.executable}"')]
    config.substitutions.insert(0, ("%roundtrip", "%uop-opt %s --print-generic | %uop-opt -"))
    config.substitutions.extend(subs)
