"""The frontend's side of devices: device names, putting host data into a `tensor.buffer`, and realizing a graph.

Device names: python, c, llvm, opencl, cuda (case-insensitive; stored lower case). The default device is
$UOPIR_DEVICE when set, else the best available one. The runtime behind these (backends, their buffers, the buffer
table, the realize pipelines) lives in uopir.backends; this module only translates between Tensors and it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import uopir.search  # noqa: F401 - installs kernel-optimize{strategy=beam} (UOPIR_BEAM=N)
from uopir.backends import get_backend
from uopir.backends.buffers import buffer_of, buffer_op
from uopir.backends.interface import Program
from uopir.backends.realize import compiled as compiled_programs
from uopir.backends.registry import DEVICES, available, canonical, default_device
from uopir.frontend import viz
from uopir.ir.dtype import DType
from uopir.ir.uop import UOp

viz.from_env()  # UOPIR_VIZ: record the pipeline of every realize for the visualizer (uopir.frontend.viz)

__all__ = ["DEVICES", "available", "canonical", "default_device", "new_buffer", "buffer_data", "realize", "compiled"]


def new_buffer(array: np.ndarray, dtype: DType, device: str) -> UOp:
    """Put `array` (already of dtype's host type; handed over, not copied on host devices) into a buffer of
    `device` and return its `tensor.buffer` op."""
    return buffer_op(get_backend(device).allocator.from_numpy(array, dtype))


# While an ONNX model captures its plan, the buffers read back to the host are appended to the innermost list (a value
# the graph was built from: if it was computed from the inputs, a replay of the plan would be wrong).
HOST_READS: list[list[Any]] = []


def buffer_data(u: UOp) -> np.ndarray:
    """A fresh host copy of a `tensor.buffer` op's contents."""
    buf = buffer_of(u)
    if HOST_READS:
        HOST_READS[-1].append(buf)
    return buf.numpy()


def realize(root: UOp, device: str) -> UOp:
    """Compute a tensor-dialect graph on `device` (its pipeline, then its runtime) into a new `tensor.buffer` op;
    RuntimeError if that device cannot run yet."""
    return buffer_op(get_backend(device).realize(root))


def compiled(root: UOp, device: str) -> list[Program]:
    """The compiled kernels that realizing `root` on `device` runs, in order, without running them."""
    return compiled_programs(get_backend(device), root)
