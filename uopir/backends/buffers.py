"""The runtime's buffer table: which Buffer a `tensor.buffer {id = N}` op of a live graph stands for.

`BUFFERS` maps a buffer id (a unique int) to its Buffer. An entry lives as long as its `tensor.buffer` UOp: a weakref
finalizer on the UOp drops it once no tensor or graph references the op, and the Buffer's allocator releases the
memory when the Buffer goes. (A graph rebuilt later from text with the same id does not revive the data: ids are
never reused within a process.)
"""
from __future__ import annotations

import itertools
import weakref

from uopir.backends.interface import Buffer
from uopir.dialects import tensor as T
from uopir.ir.uop import UOp

__all__ = ["BUFFERS", "buffer_op", "buffer_of", "graph_buffers"]

BUFFERS: dict[int, Buffer] = {}
_next_id = itertools.count()


def buffer_op(buf: Buffer) -> UOp:
    """Enter `buf` in the table under a fresh id and return the `tensor.buffer` op that stands for it."""
    bid = next(_next_id)
    BUFFERS[bid] = buf
    u = UOp(T.BUFFER, buf.dtype, (), (bid, buf.device, buf.shape))
    weakref.finalize(u, BUFFERS.pop, bid, None)
    return u


def buffer_of(u: UOp) -> Buffer:
    """The Buffer behind a `tensor.buffer` op; LookupError when the id has no data (e.g. IR read from text)."""
    if u.op is not T.BUFFER:
        raise TypeError(f"expected a tensor.buffer op, got {u.op.name}")
    bid = u.attrs.id
    buf = BUFFERS.get(bid)
    if buf is None:
        raise LookupError(f"tensor.buffer {{id = {bid}}} has no data in this process")
    return buf


def graph_buffers(root: UOp) -> dict[int, Buffer]:
    """The Buffers of the tensor.buffer ops under `root` that have data (missing ids are left for the executor to
    report at the op)."""
    out: dict[int, Buffer] = {}
    for u in root.toposort():
        if u.op is T.BUFFER:
            bid = u.attrs.id
            buf = BUFFERS.get(bid)
            if buf is not None:
                out[bid] = buf
    return out
