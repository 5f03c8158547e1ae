"""`python -m uopir.search`: list and merge tuning cache files (uopir.search.cache).

    python -m uopir.search list [FILE]          one line per entry (default FILE: $UOPIR_TUNING_CACHE or the default)
    python -m uopir.search merge DST SRC...     take SRC's entries DST lacks or has slower (DST is created if missing)
    python -m uopir.search path                 the file searches use here (not opened)
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TextIO

from uopir.search.cache import TUNING_CACHE_ENV, TuningCache, TuningCacheError, configured_path

PROG = "python -m uopir.search"


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit 2
        raise _Usage(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="List and merge uopir tuning cache files.")
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="one line per entry: kernel, target, opts, time, speed-up, device")
    ls.add_argument("file", nargs="?", default=None, help="the cache file (default: the one searches use)")
    ls.add_argument("--kernels", action="store_true", help="print each entry's kernel text too")
    mg = sub.add_parser("merge", help="merge cache files copied from other machines into DST (the faster wins)")
    mg.add_argument("dst", help="the cache file to merge into (created if missing; its folder must exist)")
    mg.add_argument("src", nargs="+", help="cache files to take entries from")
    sub.add_parser("path", help="print the cache file searches use here")
    return p


def _printable(text: str) -> str:
    """`text` with every character that is not printable (controls, bidirectional overrides) as an escape: a cache
    file may come from another machine, and its names must not drive the terminal."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _list(cache: TuningCache, kernels: bool, out: TextIO) -> None:
    entries = cache.entries()
    for e in entries:
        speed = f" ({e.baseline_seconds / e.seconds:.2f}x the heuristic)" if e.baseline_seconds else ""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.recorded))
        opts = ", ".join(map(str, e.opts)) or "no opts"
        out.write(f"{e.key[:12]}  {_printable(e.name or '(unnamed)')}  {_printable(e.target)}  [{opts}]  "
                  f"{e.seconds * 1e6:.1f} us{speed}  {when}  {_printable(e.fingerprint)}\n")
        if kernels:
            out.write("".join(f"    {_printable(line)}\n" for line in e.text.splitlines()))
    out.write(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} in {cache.path}\n")


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The program; 0 ok, 1 a bad file or argument (one `error:` line, no traceback)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        a = _parser().parse_args(sys.argv[1:] if argv is None else argv)
        if a.cmd == "path":
            where = configured_path()
            out.write(f"{where if where is not None else 'off (' + TUNING_CACHE_ENV + '=off)'}\n")
        elif a.cmd == "list":
            if a.file is not None and not os.path.isfile(a.file):
                raise TuningCacheError(f"tuning cache {a.file}: no such file")
            where = a.file if a.file is not None else configured_path()
            if where is None:
                raise TuningCacheError(f"the tuning cache is turned off ({TUNING_CACHE_ENV}=off): name a FILE")
            if not os.path.isfile(where):
                out.write(f"0 entries in {where} (no file yet)\n")
                return 0
            with TuningCache(where, readonly=True) as c:
                _list(c, a.kernels, out)
        else:
            with TuningCache(a.dst) as dst:
                for src in a.src:
                    n = dst.merge(src)
                    out.write(f"{src}: {n} entr{'y' if n == 1 else 'ies'} taken\n")
        return 0
    except (_Usage, TuningCacheError) as e:
        err.write(f"{PROG}: error: {e}\n")
        return 1
    except SystemExit as e:  # --help
        return int(e.code or 0) if isinstance(e.code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
