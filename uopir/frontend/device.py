"""Devices and the host buffer table behind `tensor.buffer` ops.

Device names: python, c, llvm, opencl, cuda (case-insensitive; stored lower case). The default device is
$UOPIR_DEVICE when set, else the best available one. Today only `python` (the reference interpreter) can run
a graph; the others are accepted so programs can be written and printed for them, and realizing on one raises
a clear error until a backend registers a runner with `register_runner`.

Buffers: `BUFFERS` maps a buffer id (a unique int) to the numpy array that holds its data on the host. A buffer
lives as long as its `tensor.buffer` UOp: a weakref finalizer on the UOp drops the array once no tensor or graph
references it. (A graph rebuilt later from text with the same id does not revive the data.)
"""
from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Callable

import numpy as np

from uopir.dialects import tensor as T
from uopir.ir.dtype import DType
from uopir.ir.uop import UOp

DEVICES: tuple[str, ...] = ("python", "c", "llvm", "opencl", "cuda")
_PREFERENCE: tuple[str, ...] = ("cuda", "opencl", "llvm", "c", "python")  # "best available" order

Runner = Callable[[UOp, dict[int, np.ndarray]], "np.ndarray | list[np.ndarray]"]
_RUNNERS: dict[str, Runner] = {}

BUFFERS: dict[int, np.ndarray] = {}
_next_id = itertools.count()


# What realize runs before the device executes the graph. The tensor-level cleanup is exact (checked against the
# interpreter), so it changes how much work runs, never a value.
REALIZE_PIPELINE = "tensor-canonicalize"


def lower(root: UOp) -> UOp:
    """The graph a device runs: `root` through REALIZE_PIPELINE (the pass manager, verification off: the frontend
    builds valid IR and the pass is checked by its tests; set UOPIR_VERIFY=1 to verify after every pass)."""
    from uopir.passes.manager import PassManager

    return PassManager.parse(REALIZE_PIPELINE).run(root, verify=os.environ.get("UOPIR_VERIFY") == "1")


def _python_runner(root: UOp, buffers: dict[int, np.ndarray]) -> np.ndarray | list[np.ndarray]:
    from uopir.backends.python import evaluate  # loaded on first realize: the frontend builds IR without it

    return evaluate(lower(root), buffers)


def register_runner(device: str, runner: Runner) -> None:
    """Let `device` realize tensors: `runner(root, buffers)` returns the root's value as a numpy array."""
    _RUNNERS[canonical(device)] = runner


def available() -> list[str]:
    """The devices that can realize tensors now, best first."""
    return [d for d in _PREFERENCE if d in _RUNNERS]


def canonical(name: str | None) -> str:
    """The canonical (lower case) device name; None means the default. ValueError names the valid ones."""
    if name is None:
        return default_device()
    if not isinstance(name, str):
        raise TypeError(f"a device name must be a string, got {type(name).__name__}")
    d = name.strip().lower()
    if d not in DEVICES:
        raise ValueError(f"unknown device {name!r}; valid devices: {', '.join(DEVICES)}")
    return d


def default_device() -> str:
    """$UOPIR_DEVICE if set (validated), else the best available device."""
    env = os.environ.get("UOPIR_DEVICE")
    if env:
        return canonical(env)
    return available()[0]


register_runner("python", _python_runner)


def new_buffer(array: np.ndarray, dtype: DType, device: str) -> UOp:
    """Store `array` (already of dtype's host type) under a fresh id and return its `tensor.buffer` op."""
    bid = next(_next_id)
    BUFFERS[bid] = array
    u = UOp(T.BUFFER, dtype, (), (bid, device, tuple(array.shape)))
    weakref.finalize(u, BUFFERS.pop, bid, None)
    return u


def buffer_data(u: UOp) -> np.ndarray:
    """The host array of a `tensor.buffer` op."""
    return BUFFERS[u.arg[0]]


def run(root: UOp, device: str) -> np.ndarray:
    """Compute the value of a tensor-dialect graph on `device`; RuntimeError if that device cannot run yet."""
    runner = _RUNNERS.get(device)
    if runner is None:
        raise RuntimeError(f"device {device!r} cannot run programs yet (no backend registered); "
                           f"available devices: {', '.join(available())}")
    bufs = {u.arg[0]: BUFFERS[u.arg[0]] for u in root.toposort() if u.op is T.BUFFER}
    out = runner(root, bufs)
    if isinstance(out, list | tuple):
        out = out[0]
    return np.asarray(out)
