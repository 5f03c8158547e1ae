"""Tensor.assign and Tensor.realize_all, what optimizers and the JIT build on: in-place writes of realized buffers,
several tensors as one program, reads ordered before writes."""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.realize import STATS


def test_assign_writes_the_buffer_in_place_and_reads_see_entry_values() -> None:
    p = Tensor(np.arange(4, dtype=np.float32))
    buf = p.uop
    before = p * 2  # reads p's buffer, realized with the assign below: sees the value on entry
    p.assign(p + 1)
    after = p * 3  # reads through the assign: sees the new value
    kernels = STATS.lowerings + STATS.cache_hits
    Tensor.realize_all(p, before, after)
    assert STATS.lowerings + STATS.cache_hits - kernels == 1  # one program for the three
    assert p.uop is buf and p.numpy().tolist() == [1, 2, 3, 4]
    assert before.numpy().tolist() == [0, 2, 4, 6] and after.numpy().tolist() == [3, 6, 9, 12]
    p.assign(p * 10).realize()
    assert p.uop is buf and p.numpy().tolist() == [10, 20, 30, 40]


def test_assign_through_a_view_and_to_unrealized_tensors() -> None:
    p = Tensor(np.zeros((2, 3), np.float32))
    p[1].assign(Tensor([7.0, 8.0, 9.0])).realize()
    p.T[0:2].assign(Tensor(np.ones((2, 2), np.float32))).realize()
    assert p.numpy().tolist() == [[1, 1, 0], [1, 1, 9]]
    lazy = Tensor.zeros(3)  # a const: assign replaces its graph
    lazy.assign(Tensor([1.0, 2.0, 3.0]))
    assert lazy.numpy().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match=r"value of shape \(4,\) does not fit a tensor of shape \(3,\)"):
        lazy.assign(Tensor([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(TypeError, match="cast it first"):
        Tensor([1.0, 2.0]).assign(Tensor([1, 2]))
    q = Tensor([1.0, 2.0])
    q.assign(5.0).realize()  # a scalar broadcasts
    assert q.numpy().tolist() == [5.0, 5.0]


def test_replace_swaps_the_value_without_writing_the_old_buffer() -> None:
    """tinygrad's Tensor.replace (what its tests use to reset parameters): the tensor takes the other's graph, dtype
    and device; a view of the old buffer keeps the old contents; backward reaches the new value."""
    p = Tensor(np.arange(3, dtype=np.float32))
    old_view = p.reshape(3, 1)
    assert p.replace((Tensor.ones(3) * 2).contiguous()) is p
    assert p.numpy().tolist() == [2.0, 2.0, 2.0] and old_view.numpy().ravel().tolist() == [0.0, 1.0, 2.0]
    (p * Tensor([1.0, 2.0, 3.0])).sum().backward()
    assert p.grad.numpy().tolist() == [1.0, 2.0, 3.0]
    p.replace(Tensor([7, 8, 9]))  # only the shape must match: p is int32 now
    assert p.numpy().tolist() == [7, 8, 9] and p.dtype == Tensor([1]).dtype
    with pytest.raises(ValueError, match=r"replace: shape \(2,\) does not match the tensor.s \(3,\)"):
        p.replace(Tensor([1.0, 2.0]))
    q = Tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="requires a gradient cannot become"):
        q.replace(Tensor([1]))


def test_to_in_place_moves_the_tensor_and_its_grad() -> None:
    p = Tensor([1.0, 2.0], device="python")
    p.grad = Tensor([0.5, 0.5], device="python")
    assert p.to_("c") is p and p.device == "c" and p.grad.device == "c"
    assert p.numpy().tolist() == [1.0, 2.0] and p.grad.numpy().tolist() == [0.5, 0.5]
