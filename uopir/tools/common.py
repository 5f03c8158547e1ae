"""What the command-line tools share: their usage error, the environment check, and the one rule for every file
they write."""
from __future__ import annotations

import argparse
import os

from uopir.ir import env

__all__ = ["UsageError", "check_output_file", "check_environment", "add_version", "add_plugin_options",
           "load_plugins"]


class UsageError(Exception):
    """Bad command-line arguments: one `PROG: error: ...` line, exit 1."""


def add_version(parser: argparse.ArgumentParser) -> None:
    """`--version`: the program's name and uopir's version, on stdout, exit 0."""
    from uopir import __version__

    parser.add_argument("--version", action="version", version=f"{parser.prog} (uopir) {__version__}")


def add_plugin_options(parser: argparse.ArgumentParser) -> None:
    """`--load-plugin`, `--no-plugins`, `--list-plugins`: the same three flags on every tool."""
    parser.add_argument("--load-plugin", action="append", default=[], metavar="MODULE",
                        help="load a plugin that is not installed: a module, or module:function (repeatable)")
    parser.add_argument("--no-plugins", action="store_true",
                        help="do not load the installed plugins (entry points of the group uopir.plugins)")
    parser.add_argument("--list-plugins", action="store_true",
                        help="list the loaded plugins and what each registered, then exit")


def load_plugins(args: argparse.Namespace) -> str | None:
    """Load the installed plugins (unless --no-plugins), $UOPIR_PLUGINS and each --load-plugin; a plugin that fails
    is a UsageError naming it. Returns the text --list-plugins prints when it was given, else None."""
    from uopir import plugins

    try:
        if not args.no_plugins:
            plugins.load_installed()
        plugins.load_env()
        for spec in args.load_plugin:
            plugins.load_plugin(spec, "--load-plugin")
    except plugins.PluginError as e:
        raise UsageError(str(e)) from None
    return plugins.listing() if args.list_plugins else None


def check_environment() -> None:
    """Refuse, before any work, a uopir environment variable set to a value it does not accept (one line naming
    the variable, exit 1)."""
    try:
        env.check()
    except env.EnvError as e:
        raise UsageError(str(e)) from None


def check_output_file(path: str, option: str) -> None:
    """Refuse, before any work, a file an option writes (`-o`, `--viz`, `--reproducer`) whose folder does not exist.

    No tool makes folders: a mistyped path would leave new ones behind (even at the filesystem root), and every
    option that writes a file follows this one rule."""
    folder = os.path.dirname(path)
    if not folder or os.path.isdir(folder):
        return
    why = "is not a folder" if os.path.exists(folder) else "does not exist"
    raise UsageError(f"cannot write '{path}' ({option}): the folder '{folder}' {why} (create it first)")
