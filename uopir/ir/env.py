"""Every environment variable uopir reads, declared once (name, parser, default, one-line help), so a bad value is one
error naming the variable and the docs' table is generated from this list (uopir/tools/gen_docs.py).

A module reads a setting with `env.DEBUG.get()` (parsed; EnvError for a bad value) or `env.DEBUG.raw()` (the text,
stripped; "" when unset). tinygrad's names DEBUG, NOOPT, VIZ and BEAM are aliases: read when the UOPIR_ name is unset
or empty, so the UOPIR_ name wins when both are set. Declaring a new variable is one `declare(...)` line below.

Reads are cheap (the realize path reads a few per call): the text comes from os.environ's own dict with the name
encoded once, and a parsed value is kept per text, so a value changed at run time (monkeypatch.setenv) is seen at
the next read.
"""
from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["EnvVar", "EnvError", "REGISTRY", "declare", "check", "flag", "level", "count", "text", "words", "ALIASES"]

T = TypeVar("T")


class EnvError(ValueError):
    """A variable's value is not one its parser accepts; the message names the variable, the value and what fits."""


# os.environ's own dict (CPython on POSIX: bytes names and values): the same dict os.environ writes, read without
# encoding the name and decoding every value again (~0.05 us a read instead of ~0.5).
_DATA: dict | None = getattr(os.environ, "_data", None)
if not (isinstance(_DATA, dict) and os.environ.encodekey("A") == b"A"):  # type: ignore[attr-defined]
    _DATA = None  # another platform's layout: read os.environ itself


@dataclass(frozen=True, eq=False)
class EnvVar(Generic[T]):
    """One environment variable: `parse` turns its text (stripped, never empty) into a value, or raises ValueError
    with what fits; `default` is the value when it is unset or empty."""

    name: str
    parse: Callable[[str], T]
    default: T
    help: str
    values: str  # what it accepts, for the error and the docs' table ("0 or 1", "a folder", ...)
    alias: str | None = None  # tinygrad's name for the same setting
    _keys: tuple[tuple[str, bytes], ...] = field(init=False, repr=False)
    _parsed: dict[str, T] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        names = (self.name,) if self.alias is None else (self.name, self.alias)
        object.__setattr__(self, "_keys", tuple((n, os.fsencode(n)) for n in names))

    def source(self) -> tuple[str, str] | None:
        """(the name it was read from, its text stripped), or None when neither name is set to a non-empty value."""
        data = _DATA
        for n, k in self._keys:  # one dict read per name: the realize path reads a few variables per call
            v = data.get(k) if data is not None else os.environ.get(n)
            if v:
                v = (os.fsdecode(v) if data is not None else v).strip()
                if v:
                    return n, v
        return None

    def raw(self) -> str:
        """The text it is set to (stripped; "" when unset), from the UOPIR_ name, else the alias."""
        s = self.source()
        return "" if s is None else s[1]

    def is_set(self) -> bool:
        return self.source() is not None

    def get(self) -> T:
        """The parsed value (the default when unset); EnvError naming the variable for a value it does not accept."""
        s = self.source()
        if s is None:
            return self.default
        n, v = s
        got = self._parsed.get(v, _MISSING)
        if got is not _MISSING:
            return got  # type: ignore[return-value]
        try:
            got = self.parse(v)
        except ValueError as e:
            via = "" if n == self.name else f" (tinygrad's name for {self.name})"
            raise EnvError(f"${n}{via} must be {self.values}, got {v!r}{': ' + str(e) if str(e) else ''}") from None
        if len(self._parsed) > 64:  # a bound for a process that keeps changing the value
            self._parsed.clear()
        self._parsed[v] = got
        return got

    def get_at_import(self) -> T:
        """get(), but the default for a bad value: for a module that reads a setting while it is imported, before a
        tool's check_environment can report the bad value as its usage error (a bad value must not break `import
        uopir`)."""
        try:
            return self.get()
        except EnvError:
            return self.default


_MISSING: Any = object()

REGISTRY: dict[str, EnvVar[Any]] = {}
ALIASES: dict[str, str] = {}  # tinygrad's name -> the UOPIR_ name


def declare(name: str, parse: Callable[[str], T], default: T, help: str, values: str,
            alias: str | None = None) -> EnvVar[T]:
    """Add a variable to the registry (once per name) and return it."""
    if name in REGISTRY:
        raise ValueError(f"environment variable {name} is declared twice")
    var = EnvVar(name, parse, default, help, values, alias)
    REGISTRY[name] = var
    if alias is not None:
        ALIASES[alias] = name
    return var


def check() -> None:
    """Parse every variable that is set: EnvError for the first bad one (a tool calls this before any work, so a
    bad value is its usage error rather than a failure halfway through)."""
    for var in REGISTRY.values():
        var.get()


# ---- parsers -------------------------------------------------------------------------------------------------------
_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def flag(v: str) -> bool:
    """A switch: 1/true/yes/on or 0/false/no/off (any case)."""
    low = v.lower()
    if low in _ON:
        return True
    if low in _OFF:
        return False
    raise ValueError("")


def level(v: str) -> int:
    """A level, an integer >= 0 (a switch's on/off words count as 1/0)."""
    low = v.lower()
    if low in _ON or low in _OFF:
        return int(low in _ON)
    return count(v)


def count(v: str) -> int:
    """An integer >= 0."""
    if not v.isdigit():
        raise ValueError("")
    return int(v)


def text(v: str) -> str:
    return v


def words(v: str) -> tuple[str, ...]:
    """Shell words (as a command line splits them)."""
    return tuple(shlex.split(v))


def _megabytes(v: str) -> float:
    try:
        mb = float(v)
    except ValueError:
        raise ValueError("") from None
    if not (mb >= 0 and mb != float("inf")):
        raise ValueError("")
    return mb


def _positive(v: str) -> int:
    n = count(v)
    if n < 1:
        raise ValueError("")
    return n


def _progress(v: str) -> str:
    low = v.lower()
    if low in _OFF:
        return "off"
    if low == "lines":
        return "lines"
    if low in _ON or low == "auto":
        return "auto"
    raise ValueError("")


def _seconds(v: str) -> float:
    """A positive, finite number of seconds."""
    try:
        s = float(v)
    except ValueError:
        raise ValueError("") from None
    if not 0 < s < float("inf"):
        raise ValueError("")
    return s


def _ray(v: str) -> str | None:
    """Where a search's jobs run: local, auto or a Ray cluster address; None (0/off) for the local process pool."""
    if v.lower() in _OFF:
        return None
    if v in ("local", "auto") or re.fullmatch(r"(ray://)?[A-Za-z0-9_.\-]+:\d{1,5}", v):
        return v
    raise ValueError("")


def _off_or_path(v: str) -> str:
    return "off" if v.lower() == "off" else v


# ---- the variables -------------------------------------------------------------------------------------------------
# Debugging and tuning (tinygrad's names work too)
DEBUG = declare("UOPIR_DEBUG", level, 0, "what each kernel run prints (see the README's table of levels); tracebacks "
                "of internal errors at >= 1", "a level, an integer >= 0", alias="DEBUG")
NOOPT = declare("UOPIR_NOOPT", flag, False, "kernel-optimize's heuristic applies no opts (strategy=none)",
                "0 or 1", alias="NOOPT")
BEAM = declare("UOPIR_BEAM", count, 0, "kernel-optimize's heuristic becomes a beam search of this width "
               "(0: the heuristic)", "a beam width, an integer >= 0", alias="BEAM")
BEAM_BUDGET: EnvVar[float | None] = declare(
    "UOPIR_BEAM_BUDGET", _seconds, None, "seconds one kernel's beam search may take (unset: the search's default)",
    "a search budget, a positive number of seconds")
BEAM_RAY: EnvVar[str | None] = declare(
    "UOPIR_BEAM_RAY", _ray, None, "a beam search's compile-and-time jobs run as Ray tasks: local (start a cluster on "
    "this machine), auto (the running one) or a cluster address (unset/0: the local process pool)",
    "local, auto, a cluster address HOST:PORT or ray://HOST:PORT, or 0")
VIZ = declare("UOPIR_VIZ", text, "", "record every pass of the process and write the visualizer's trace at exit "
              "(1: uopir-viz.json/.html here; else that path)", "1 or a path", alias="VIZ")
PROGRESS = declare("UOPIR_PROGRESS", _progress, "auto", "progress of a beam search: a bar on a terminal, lines on "
                   "a pipe (1/auto), lines always, or none (0)",
                   "0 (no progress), 1 (a bar on a terminal, lines on a pipe) or lines")
TUNING_CACHE = declare("UOPIR_TUNING_CACHE", _off_or_path, "", "the tuning cache file of beam searches (off: none; "
                       "unset: the default file in the cache folder)", "a path or off")
VERIFY = declare("UOPIR_VERIFY", flag, False, "verify the IR after every pass when a Tensor program is lowered",
                 "0 or 1")
DUMP_PATTERNS = declare("UOPIR_DUMP_PATTERNS", flag, False, "print the source of each compiled pattern matcher "
                        "(read at import)", "0 or 1")
REPRODUCER_DIR = declare("UOPIR_REPRODUCER_DIR", text, "", "where a crashing pass's reproducer is written "
                         "(default: the temporary folder)", "a folder")
TEST_PASSES = declare("UOPIR_TEST_PASSES", flag, False, "register the test-* passes (crash, invalid IR, ...) that "
                      "the tool tests use", "0 or 1")
TEST_SERIAL = declare("UOPIR_TEST_SERIAL", flag, False, "make test runs its pytest legs one after the other "
                      "(tools/run_tests.py reads it itself: the runner imports no uopir module)", "0 or 1")
PLUGINS = declare("UOPIR_PLUGINS", text, "", "plugins the Python API loads when uopir is imported (the tools load "
                  "them too): modules or module:function, comma-separated; `installed` loads every installed one",
                  "module or module:function names, comma-separated, or installed")
TEST_WORKERS: EnvVar[int | None] = declare("UOPIR_TEST_WORKERS", count, None, "pytest-xdist workers of make test's "
                                           "python and c legs each (default: one per core; 0: one process; "
                                           "tools/run_tests.py reads it itself)", "an integer >= 0")
LIT_SERVER = declare("UOPIR_LIT_SERVER", flag, True, "the lit suite runs uop-opt, uop-run and filecheck through one "
                     "fork server (lit_tests/lit.cfg.py reads it itself; 0: a process per command)", "0 or 1")
# Devices and compilers
DEVICE = declare("UOPIR_DEVICE", text, "", "the default device of new tensors (default: the best available)",
                 "a device name")
THREADS: EnvVar[int | None] = declare("UOPIR_THREADS", _positive, None, "cores a parallel CPU kernel is split "
                                      "across (default: the target's cores)", "an integer >= 1")
GRAPH = declare("UOPIR_GRAPH", flag, True, "replay a CPU schedule's kernels in one native call", "0 or 1")
C_TIERED = declare("UOPIR_C_TIERED", flag, True, "the c backend runs a kernel through LLVM while the C compiler "
                   "builds it (needs llvmlite)", "0 or 1")
CFLAGS = declare("UOPIR_CFLAGS", words, (), "extra flags for the c backend's compiler", "compiler flags")
CUDA_DEVICE = declare("UOPIR_CUDA_DEVICE", count, 0, "the CUDA device index", "an integer >= 0")
CUDA_ARCH = declare("UOPIR_CUDA_ARCH", text, "", "the CUDA architecture to compile for (default: the GPU's)",
                    "an arch like sm_90")
OPENCL_DEVICE = declare("UOPIR_OPENCL_DEVICE", text, "", "the OpenCL device (default: the first found)",
                        "PLATFORM:DEVICE indices, e.g. 0:0")
MLIR_BIN = declare("UOPIR_MLIR_BIN", text, "", "the folder holding mlir-opt and mlir-translate (default: PATH, "
                   "then /usr/lib/llvm-*/bin)", "a folder")
CC = declare("CC", lambda v: list(shlex.split(v)), [], "the C compiler command of the c backend (default: clang, "
             "else cc)", "a command")
NVCC = declare("NVCC", text, "", "the CUDA compiler (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)", "a path")
# Caches
CACHE_DIR = declare("UOPIR_CACHE_DIR", text, "", "the compile cache folder (default: $XDG_CACHE_HOME/uopir or "
                    "~/.cache/uopir)", "a folder")
DISABLE_CACHE = declare("UOPIR_DISABLE_CACHE", flag, False, "compile without reading or writing the compile cache",
                        "0 or 1")
CACHE_MAX_MB: EnvVar[float | None] = declare(
    "UOPIR_CACHE_MAX_MB", _megabytes, None, "the compile cache folder's size bound (0: none; default: the built-in "
    "bound)", "a number of megabytes (0 for no bound)")
SCHEDULE_CACHE = declare("UOPIR_SCHEDULE_CACHE", flag, True, "keep each realized schedule's compiled plan for the "
                         "next realize of the same graph", "0 or 1")
SCHEDULE_CACHE_SIZE = declare("UOPIR_SCHEDULE_CACHE_SIZE", count, 256, "plans kept per backend",
                              "a number of entries >= 0")
PROGRAM_CACHE_SIZE = declare("UOPIR_PROGRAM_CACHE_SIZE", count, 256, "compiled kernels kept per backend besides "
                             "those of live plans", "a number of entries >= 0")
