"""The steady call of an imported ONNX model: numpy inputs of a signature already replayed once go straight into
fresh input buffers of its captured plan, without Tensors, graph ops or the checks of `OnnxModel._bind_inputs`.

A signature is the feeds' names in order with each array's numpy dtype and shape. The first call of a signature
takes the checked way (`_bind_inputs`: names, dtypes, declared shapes, dim_params) and captures its plan; the
second, a replay, records here how each input lands in the plan's input buffer (element type, shape) when that is a
plain copy. Every later call of that signature passed the same checks, so it only copies each array into a new
buffer (pooled memory: a few hundred ns) and replays (`TinyJit.replay_buffers`). Anything else (a Tensor or a
non-array feed, a conversion on the way in: bfloat16, a low-precision type, a cast of an initializer override) keeps
the checked way.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from uopir.ir.dtype import dtypes

__all__ = ["FastPlan", "signature", "fast_plan"]

MAX_SIGNATURES = 64  # signatures remembered per model (the table is emptied past it; rebuilt on need)


@dataclass
class FastPlan:
    """How one feed signature runs: the plan and, per plan input in order, (feed name, allocator, dtype, shape,
    whether the array is reshaped to the declared shape)."""

    jit: Any  # uopir.frontend.jit.TinyJit
    inputs: list[tuple[str, Any, Any, tuple[int, ...], bool]]

    def run(self, feeds: Mapping[str, Any]) -> list[tuple[Any, bool]]:
        """Copy the feeds into new input buffers and replay: each output's buffer with whether it is this call's
        own (see TinyJit.replay_buffers; an input buffer is a copy made here, so it is the call's own too)."""
        bufs = []
        for name, alloc, dtype, shape, reshape in self.inputs:
            b = alloc.alloc(dtype, shape)
            a = feeds[name]
            np.copyto(b.handle, a.reshape(shape) if reshape else a)
            bufs.append(b)
        ins = {id(b) for b in bufs}
        return [(b, own or id(b) in ins) for b, own in self.jit.replay_buffers(bufs)]

    def run_arrays(self, feeds: Mapping[str, Any]) -> list[np.ndarray] | None:
        """The outputs as numpy arrays of this call's own, through `TinyJit.replay_arrays` (each feed read in place
        where it can be, else copied into a new array; the results made as arrays: no Buffer per input or output),
        or None when the plan cannot take that way (see there)."""
        arrays = []
        for name, _alloc, _dtype, shape, reshape in self.inputs:
            a = feeds[name]
            v = a.reshape(shape) if reshape else a
            arrays.append(v if v.flags.c_contiguous else np.array(v, order="C"))  # the feed itself where it can be
        return self.jit.replay_arrays(arrays, borrowed=True)


def signature(feeds: Mapping[str, Any]) -> tuple | None:
    """The feeds' signature (name, numpy dtype, shape per feed, in order), or None when a feed is not a numpy array."""
    sig = []
    for k, v in feeds.items():
        if type(v) is not np.ndarray:
            return None
        sig.append((k, v.dtype, v.shape))
    return tuple(sig)


def fast_plan(jit: Any, names: list[str], feeds: Mapping[str, Any], ins: list[Any], lowp: Any) -> FastPlan | None:
    """The FastPlan of a signature whose plan `jit` just replayed on `ins` (the realized input Tensors bound from
    `feeds`, in plan order), or None when an input is not a plain copy of its feed (see the module docstring)."""
    from uopir.backends.buffers import buffer_of
    from uopir.dialects import tensor as T

    if not getattr(jit, "captured", False):
        return None
    out = []
    for name, t in zip(names, ins, strict=True):
        a = feeds.get(name)
        if type(a) is not np.ndarray or name in lowp or t.dtype is dtypes.bfloat16 or t.uop.op is not T.BUFFER:
            return None
        buf = buffer_of(t.uop)
        h = buf.host_view()
        if h is None or h.dtype != a.dtype or h.size != a.size:
            return None
        out.append((name, buf.allocator, buf.dtype, tuple(buf.shape), tuple(a.shape) != tuple(buf.shape)))
    return FastPlan(jit, out)
