"""The Debian packages the test command installs when they are missing (and it runs as root), in one place.

Each entry names the package, the files any one of which shows it is installed (an executable looked up on PATH, or
an absolute path), and the tests that skip without it. `tools/run_tests.py` calls `ensure()` before the tests: when
every probe is found (the common case) it costs a few `shutil.which` calls and nothing else; when some are missing it
runs `apt-get install -y` as root (after `apt-get update` if the first try fails), and otherwise prints one line
saying which tests will skip, then the tests run either way.

A helper that needs another package adds an entry to PACKAGES; nothing else changes.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["DebianPackage", "PACKAGES", "missing", "apt_commands", "ensure"]


@dataclass(frozen=True)
class DebianPackage:
    name: str  # the Debian package
    probes: tuple[str, ...]  # an executable name (looked up on PATH) or an absolute path: any one present = installed
    skips: str  # the tests that skip without it (what the one line says)


PACKAGES: tuple[DebianPackage, ...] = (
    DebianPackage("mlir-19-tools", ("/usr/lib/llvm-19/bin/mlir-opt", "mlir-opt-19", "mlir-opt"),
                  "the mlir backend's and the MLIR tool checks"),
    DebianPackage("chromium", ("chromium", "chromium-browser", "google-chrome"), "the visualizer's browser test"),
    DebianPackage("graphviz", ("dot",), "the graphviz rendering tests"),
)


def _present(probe: str, which: Callable[[str], str | None], exists: Callable[[str], bool]) -> bool:
    return exists(probe) if os.path.isabs(probe) else which(probe) is not None


def missing(packages: Sequence[DebianPackage] = PACKAGES, which: Callable[[str], str | None] = shutil.which,
            exists: Callable[[str], bool] = os.path.exists) -> list[DebianPackage]:
    """The packages none of whose probes is found."""
    return [p for p in packages if not any(_present(x, which, exists) for x in p.probes)]


def apt_commands(names: Sequence[str]) -> list[list[str]]:
    """The commands tried in order until an install succeeds: the install, then an index update and the install."""
    install = ["apt-get", "install", "-y", "--no-install-recommends", *names]
    return [install, ["apt-get", "update"], install]


def _run_quiet(cmd: list[str]) -> int:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        return subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except OSError:
        return 127


def ensure(packages: Sequence[DebianPackage] = PACKAGES, *, which: Callable[[str], str | None] = shutil.which,
           exists: Callable[[str], bool] = os.path.exists, is_root: bool | None = None,
           run: Callable[[list[str]], int] = _run_quiet, say: Callable[[str], None] = print) -> list[DebianPackage]:
    """Install the missing packages when root and apt-get are there; the packages still missing afterwards (one line
    said about them). Nothing runs and nothing is printed when none is missing."""
    todo = missing(packages, which, exists)
    if not todo:
        return []
    names = [p.name for p in todo]
    root = (os.geteuid() == 0) if is_root is None else is_root
    why = ""
    if not root:
        why = "not running as root"
    elif which("apt-get") is None:
        why = "apt-get is not available"
    else:
        cmds = apt_commands(names)
        ok = run(cmds[0]) == 0 or (run(cmds[1]) == 0 and run(cmds[2]) == 0)
        todo = missing(todo, which, exists)
        if ok and not todo:
            say(f"run_tests: installed Debian packages {', '.join(names)}")
            return []
        why = "apt-get install failed" if not ok else "installed, but still not found"
    say(f"run_tests: Debian packages {', '.join(p.name for p in todo)} missing ({why}): "
        f"{'; '.join(p.skips for p in todo)} will skip")
    return todo
