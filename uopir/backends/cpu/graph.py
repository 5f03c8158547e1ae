"""The native launch graph of the host-cpu backends (c, llvm): graph.c, compiled once by the C backend's compiler
into the compile cache and loaded with ctypes.

It gives two calls. `uopir_run_graph(n, entries)` runs a list of kernels (function pointer, int64 argument array,
parallel flag) in order in one native call, GIL released: a TinyJit replay costs one ctypes call instead of a Python
launch per kernel (tinygrad's graph runners do the same with a generated function; ours is one fixed C function
walking a table Python fills once per capture). `uopir_parallel(fn, args, nargs, cores)` runs one parallel kernel
split across cores on a persistent native thread pool (workers spin briefly, then sleep on a condition variable):
one ctypes call per launch instead of one per core through a Python thread pool.

Why C and not llvmlite IR: the pool needs pthreads, atomics and condition variables, a few lines of C and many of
IR; the C backend's compiler and its disk cache are already there: the C backend names its builder with
`set_builder` when it is imported (this module imports no backend). Without a C compiler, or before the C backend is
imported (the llvm backend alone), `native()` is None and launches go the Python way (a thread pool, one ctypes call
per kernel), as they did before.
`UOPIR_GRAPH=0` turns the native graph and pool off.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any

from uopir.ir import env

__all__ = ["GRAPH_ENV", "Entry", "native", "graph_enabled", "max_args", "set_builder", "LaunchGraph"]

GRAPH_ENV = env.GRAPH.name


class Entry(ctypes.Structure):
    """One kernel of a graph (graph.c's uopir_entry)."""

    _fields_ = [("fn", ctypes.c_void_p), ("args", ctypes.c_void_p), ("nargs", ctypes.c_int32),
                ("cores", ctypes.c_int32)]


def graph_enabled() -> bool:
    return env.GRAPH.get()


_LIB: Any = None
_STATE = ["new"]  # new -> loading -> ready | failed
_LOCK = threading.Lock()
_READY = threading.Event()


# what builds the runner: source text -> a loaded ctypes library (or None). The C backend, which owns a C compiler,
# sets it when it is imported (uopir.backends.c.runtime): this module, below the backends, imports none of them.
_BUILDER: list[Callable[[str], Any]] = []


def set_builder(build: Callable[[str], Any]) -> None:
    """Name the function that compiles and loads graph.c's source (the C backend's compiler and loader)."""
    _BUILDER[:] = [build]


def _load() -> None:
    global _LIB
    lib = None
    try:
        src = resources.files("uopir.backends.cpu").joinpath("graph.c").read_text(encoding="utf-8")
        lib = _BUILDER[0](src)
        if lib is not None:
            lib.uopir_run_graph.argtypes = [ctypes.c_int64, ctypes.c_void_p]
            lib.uopir_run_graph.restype = ctypes.c_int64
            lib.uopir_run_graph_timed.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
            lib.uopir_run_graph_timed.restype = ctypes.c_int64
            lib.uopir_parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
            lib.uopir_parallel.restype = ctypes.c_int
            lib.uopir_max_args.restype = ctypes.c_int
    except Exception:  # noqa: BLE001 - no runner: launches go the Python way
        lib = None
    _LIB = lib
    _STATE[0] = "ready" if lib is not None else "failed"
    _READY.set()


def native(wait: bool = True) -> Any:
    """The loaded runner library, or None (no C compiler, it failed to build, or UOPIR_GRAPH=0). With wait=False a
    runner not loaded yet is built on a background thread and None is returned meanwhile (a first eager launch does
    not wait for a compile)."""
    if _STATE[0] == "ready":
        return _LIB if graph_enabled() else None
    if _STATE[0] == "failed" or not graph_enabled() or not _BUILDER:
        return None  # no builder yet: the C backend is not imported (a later call, once it is, builds the runner)
    with _LOCK:
        start = _STATE[0] == "new"
        if start:
            _STATE[0] = "loading"
    if start:
        if wait:
            _load()
        else:
            threading.Thread(target=_load, name="uopir-graph-build", daemon=True).start()
    if wait:
        _READY.wait()
        return _LIB if graph_enabled() else None
    return None


def max_args() -> int:
    """The most arguments (buffers, variables, core_id/core_count) the runner can pass a kernel."""
    lib = native()
    return lib.uopir_max_args() if lib is not None else 0


class LaunchGraph:
    """A fixed list of kernel launches as one native call. Each launch is (function pointer, arguments, cores): an
    argument is an int (an address or a variable's value, fixed) or a key, whose value `bind` writes into every
    place it occurs before a `run` (the buffers a replay rebinds); cores is None for a serial kernel, else the shares
    of a parallel one. The table (entries and one int64 argument array) is built once; `keep` holds what its
    addresses point into (functions, buffers).

    `LaunchGraph.profile`, when a list (bench/real_models.py --profile sets it), makes every run time each entry as
    the replay runs it (the pool kept hot between kernels, as in a steady replay) and append (graph, nanoseconds per
    entry)."""

    profile: list[tuple[LaunchGraph, Any]] | None = None

    def __init__(self, launches: list[tuple[int, list[Any], int | None]], keep: list[Any]):
        import numpy as np

        self._lib = native()
        if self._lib is None:
            raise RuntimeError("the native launch graph is not available")
        self.n = len(launches)
        self.kernels = sum(1 for fn, _, _ in launches if fn)  # launches that are kernels (an entry 0 is a memcpy)
        total = sum(len(a) for _, a, _ in launches)
        self.args = np.zeros(max(1, total), np.int64)
        self.entries = (Entry * max(1, self.n))()
        self.places: dict[Any, list[int]] = {}
        base = self.args.ctypes.data
        pos = 0
        for i, (fn, args, cores) in enumerate(launches):
            e = self.entries[i]
            e.fn, e.args, e.nargs, e.cores = fn, base + 8 * pos, len(args), 0 if cores is None else cores
            for a in args:
                if isinstance(a, int):
                    self.args[pos] = a
                else:
                    self.places.setdefault(a, []).append(pos)
                pos += 1
        # one place: a plain index (an int store costs ~0.1 us, an index array's ~0.4: a steady call binds each input
        # and result)
        self._places = {k: v[0] if len(v) == 1 else np.asarray(v, np.intp) for k, v in self.places.items()}
        self._entries_addr = ctypes.addressof(self.entries)
        self.keep = keep

    def bind(self, key: Any, value: int) -> None:
        """Write `value` (an address) wherever the argument `key` occurs."""
        p = self._places.get(key)
        if p is not None:
            self.args[p] = value

    def run(self) -> None:
        """Run every launch, in order, in one native call (the GIL released)."""
        if LaunchGraph.profile is not None:
            import numpy as np

            ns = np.zeros(self.n, np.int64)
            bad = self._lib.uopir_run_graph_timed(self.n, self._entries_addr, ns.ctypes.data)
            LaunchGraph.profile.append((self, ns))
        else:
            bad = self._lib.uopir_run_graph(self.n, self._entries_addr)
        if bad >= 0:  # built only from kernels within max_args(): a bug
            raise RuntimeError(f"launch graph: entry {bad} has more arguments than the runner passes")
