"""The python backend: the reference interpreter behind the backend interface.

It has no source text, so `renderer` and `compiler` are None: `compile` returns a Program whose entry is a closure
over the IR itself (a tensor-level graph, a schedule of tensor.calls, a lone kernel.def or device.program), and
`launch` runs it with numpy. Buffers live in host memory (HostAllocator), so tensor.assign and kernel stores write
them in place.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from uopir.backends.buffers import graph_buffers
from uopir.backends.interface import Backend, Buffer, HostAllocator, LaunchBuffers, Program, Runtime
from uopir.backends.python.device import run_region
from uopir.backends.python.interpreter import evaluate
from uopir.backends.realize import realize
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.dialects.semantics import np_dtype
from uopir.ir.uop import UOp
from uopir.passes.target import CPU, Target

# What realize runs: the tensor-level cleanup (exact: checked against the interpreter), then the lowering to a schedule
# of kernels. Later stages (kernel-simplify, ...) are added here.
PIPELINE = "tensor-canonicalize,tensor-to-kernel,kernel-simplify"
# What the symbolic fallback (whole-graph interpretation) runs; see uopir.backends.realize.
INTERPRET_PIPELINE = "tensor-canonicalize"

# The oracle's own lowering stays scalar (the simplest programs to check); it still interprets vectors of any width
# and every dtype when it runs a program lowered for another target.
PYTHON_TARGET = CPU.derive(name="python", max_vector_bytes=0)


def _host(buf: Buffer, copies: list[tuple[Buffer, np.ndarray]]) -> np.ndarray:
    """The array the interpreter reads and writes: the live one for host buffers, else a copy, recorded in `copies`
    so that what the program wrote goes back to the device buffer (`_write_back`)."""
    v = buf.host_view()
    if v is not None:
        return v
    arr = buf.numpy()
    copies.append((buf, arr))
    return arr


def _write_back(copies: list[tuple[Buffer, np.ndarray]]) -> None:
    for buf, arr in copies:
        buf.allocator.copyin(buf, arr)


class PythonRuntime(Runtime):
    device = "python"

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | None) -> Program:
        if program.op is K.DEF or program.op is D.PROGRAM:
            def entry(buffers: LaunchBuffers, var_vals: Mapping[str, int] | None) -> Any:
                if isinstance(buffers, Mapping):
                    raise TypeError(f"a {program.op.name} takes its buffers by position (kernel.param index), "
                                    f"not by id")
                copies: list[tuple[Buffer, np.ndarray]] = []
                out = run_region(program, [_host(b, copies) for b in buffers], dict(var_vals or {}))
                _write_back(copies)
                return out
        else:
            def entry(buffers: LaunchBuffers, var_vals: Mapping[str, int] | None) -> Any:
                if not isinstance(buffers, Mapping):
                    raise TypeError("a graph takes its buffers by tensor.buffer id (a mapping), not by position")
                copies: list[tuple[Buffer, np.ndarray]] = []
                out = evaluate(program, {i: _host(b, copies) for i, b in buffers.items()}, dict(var_vals or {}))
                _write_back(copies)
                return out
        return Program(name, self.device, program, None, None, entry)

    def launch(self, prog: Program, buffers: LaunchBuffers, *, global_size: tuple[int, ...] = (1, 1, 1),
               local_size: tuple[int, ...] = (1, 1, 1), var_vals: Mapping[str, int] | None = None) -> Any:
        """Interpret `prog` (launch dims are irrelevant: the interpreter runs the whole iteration space at once)."""
        return prog.entry(buffers, var_vals)


class PythonBackend(Backend):
    """Realizes any graph with the reference interpreter; the oracle the other backends are checked against."""

    device = "python"
    pipeline = PIPELINE

    def __init__(self, target: Target = PYTHON_TARGET):
        self.target = target
        self.allocator = HostAllocator(self.device)
        self.runtime = PythonRuntime()

    def compile(self, program: UOp, name: str = "program") -> Program:
        return self.runtime.load(name, program, None, None)

    def realize(self, root: UOp) -> Buffer:
        """The graph through PIPELINE, its schedule run kernel by kernel (uopir.backends.realize)."""
        return realize(self, root)

    def interpret(self, root: UOp) -> Buffer:
        """The graph interpreted whole (the fallback for graphs tensor-to-kernel cannot lower yet)."""
        lowered = self.lower(root, INTERPRET_PIPELINE)
        out = self.runtime.launch(self.compile(lowered), graph_buffers(lowered))
        first = root.src[0] if root.op is C.SINK else root  # a sink's first result, as realize hands back
        if isinstance(out, list | tuple):
            out = out[0]
        shape = first.shape if first.shape is not None else ()
        arr = np.asarray(np.asarray(out).reshape(shape), dtype=np_dtype(first.dtype), order="C")  # `out` is ours
        return self.allocator.from_numpy(arr, first.dtype)
