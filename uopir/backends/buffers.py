"""The runtime's buffer table: which Buffer a `tensor.buffer {id = N}` op of a live graph stands for.

`BUFFERS` maps a buffer id (a unique int) to its Buffer. An entry lives as long as its `tensor.buffer` UOp: a weak
reference's callback on the UOp drops it once no tensor or graph references the op, and the Buffer's allocator
releases the memory when the Buffer goes. (A graph rebuilt later from text with the same id does not revive the
data: ids are never reused within a process.)
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


class _OpRef(weakref.ref):
    """A weak reference to a `tensor.buffer` op that drops its id's entries when the op goes (a plain weakref with a
    callback: a weakref.finalize object per op cost ~2 us a realize)."""

    __slots__ = ("bid",)


def _gone(r: _OpRef) -> None:
    BUFFERS.pop(r.bid, None)
    _REFS.pop(r.bid, None)


_REFS: dict[int, _OpRef] = {}  # keeps each op's reference (and so its callback) alive, by buffer id


def buffer_op(buf: Buffer) -> UOp:
    """Enter `buf` in the table under a fresh id and return the `tensor.buffer` op that stands for it."""
    bid = next(_next_id)
    BUFFERS[bid] = buf
    u = UOp(T.BUFFER, buf.dtype, (), (bid, buf.device, buf.shape))
    r = _OpRef(u, _gone)
    r.bid = bid
    _REFS[bid] = r
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
