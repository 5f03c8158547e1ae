"""The eager realize's fast path (issue 26, item 5): a schedule-cache hit reuses memoized pieces (placeholder buffers
of keys, each Buffer's host address, env settings read from os.environ's own dict, one __del__ per buffer instead of
a finalizer). None of them may return a stale result: a hit on new buffers, new contents of the same buffer, or new
variable values computes the new value; the memo tables stay bounded; settings changed at run time take effect."""
from __future__ import annotations

import gc

import numpy as np
import pytest

from uopir import Tensor, Variable
from uopir.backends import available, get_backend
from uopir.backends import realize as R
from uopir.backends.buffers import BUFFERS, buffer_of

HOST = [d for d in ("c", "llvm") if d in available()]
pytestmark = pytest.mark.skipif(not HOST, reason="no host-cpu backend (c, llvm) available")


@pytest.mark.parametrize("device", HOST)
def test_hit_on_new_buffers_and_new_contents_is_fresh(device: str) -> None:
    x = Tensor(np.arange(8, dtype=np.float32), device=device).realize()
    np.testing.assert_array_equal((x * 2.0 + 1.0).numpy(), np.arange(8) * 2 + 1)
    hits = R.STATS.cache_hits
    y = Tensor(np.full(8, 5, np.float32), device=device).realize()  # the same program on another buffer
    np.testing.assert_array_equal((y * 2.0 + 1.0).numpy(), np.full(8, 11))
    x.assign(Tensor(np.full(8, -1, np.float32), device=device)).realize()  # the same buffer, new contents
    np.testing.assert_array_equal((x * 2.0 + 1.0).numpy(), np.full(8, -1))
    for i in range(5):  # a chain: each realize reads the buffer the last one wrote
        y = (y * 2.0 + 1.0).realize()
        assert float(y.numpy()[0]) == 2 ** (i + 1) * 5 + 2 ** (i + 1) - 1
    assert R.STATS.cache_hits - hits >= 7  # they were hits, not lowerings


@pytest.mark.parametrize("device", HOST)
def test_hit_with_other_variable_values_is_fresh(device: str) -> None:
    a = Tensor(np.arange(10, dtype=np.float32), device=device).realize()
    v = Variable(f"k_eager_{device}", 1, 10)
    got = [float((a[:v.bind(k)] * 1.0).sum().numpy()) for k in (3, 7, 3, 10)]
    assert got == [3.0, 21.0, 3.0, 45.0]


@pytest.mark.parametrize("device", HOST)
def test_launch_checks_element_type_with_cached_host_info(device: str) -> None:
    x = Tensor(np.arange(4, dtype=np.float32), device=device).realize()
    (x + 1.0).realize()
    buf = buffer_of(x.uop)
    assert buf.host is not None and buf.host[0] == buf.handle.ctypes.data and buf.host[1] == 16
    be = get_backend(device)
    key, inputs, var_vals, _ = R.cache_key((x + 1.0).uop)
    step = R.plan(be, key, len(inputs)).steps[0]
    wrong = be.allocator.alloc(R.dtypes.int32, (4,))
    with pytest.raises(TypeError, match="must hold float32"):
        be.runtime.launch(step.program, [wrong, buf] if step.args[0] != 0 else [buf, wrong], var_vals=var_vals)


def test_placeholders_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "_PLACEHOLDERS_MAX", 4)
    R._PLACEHOLDERS.clear()
    device = HOST[0]
    for n in range(1, 12):
        t = Tensor(np.ones(n, np.float32), device=device).realize()
        assert float((t + 1.0).sum().numpy()) == 2 * n  # right after the table was emptied too
        assert len(R._PLACEHOLDERS) <= 4


def test_buffer_table_and_pool_follow_the_ops() -> None:
    device = HOST[0]
    gc.collect()
    before = len(BUFFERS)
    # one program on 50 inputs (one compile): each realize makes its own output buffer
    ts = [(Tensor(np.full(16, i, np.float32), device=device) + 1.0).realize() for i in range(50)]
    assert len(BUFFERS) >= before + 50
    del ts
    assert len(BUFFERS) <= before + 1  # no cycle: the weakref callbacks dropped them at once, no gc needed
    alloc = get_backend(device).allocator
    held = alloc.held
    b = alloc.alloc(R.dtypes.float32, (1000,))
    del b
    assert alloc.held == held + 4000  # Buffer.__del__ handed the memory back to the pool


def test_env_settings_changed_at_run_time_take_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    # the registry's reads (uopir.ir.env: os.environ's own dict, the name encoded once) see every change made through
    # os.environ, non-ASCII values included
    from uopir.ir.env import EnvVar, text

    var = EnvVar("UOPIR_EAGER_TEST_SETTING", text, "dflt", "a test setting", "text")
    monkeypatch.setenv("UOPIR_EAGER_TEST_SETTING", "é1")
    assert var.get() == "é1"
    monkeypatch.setenv("UOPIR_EAGER_TEST_SETTING", "2")
    assert var.get() == "2"
    monkeypatch.delenv("UOPIR_EAGER_TEST_SETTING")
    assert var.get() == "dflt"
    monkeypatch.setenv(R.DEBUG_ENV, "3")
    assert R.debug_level() == 3
    monkeypatch.setenv(R.SCHEDULE_CACHE_ENV, "0")
    assert not R.schedule_cache_enabled()


@pytest.mark.parametrize("device", HOST)
def test_pooled_memory_brings_its_host_info(device: str) -> None:
    # a buffer handed pooled memory takes the address a launch read of that memory (no second read per realize),
    # and that address is its array's: a stale one would point a kernel at freed memory
    alloc = get_backend(device).allocator
    x = Tensor(np.arange(64, dtype=np.float32), device=device).realize()
    for i in range(4):
        y = (x + float(i)).realize()
        buf = buffer_of(y.uop)
        assert buf.host is not None and buf.host[0] == buf.handle.ctypes.data
        np.testing.assert_array_equal(y.numpy(), np.arange(64) + i)
        del y, buf
    fresh = alloc.alloc(buffer_of(x.uop).dtype, (64,))  # memory of the last y, back from the pool with its address
    assert fresh.host is not None and fresh.host[0] == fresh.handle.ctypes.data and fresh.handle.shape == (64,)


def test_argkey_keeps_a_nested_int_tuple() -> None:
    from uopir.ir.uop import _argkey
    arg = (3, "c", (4, 5))
    assert _argkey(arg) is arg  # no rebuild per UOp of a shape arg
    assert _argkey((1, (2, 0.5))) == (1, (2, _argkey(0.5)))  # a float inside is still keyed bit-exactly
    assert _argkey((1, (0.0,))) != _argkey((1, (-0.0,)))


def test_scalar_consts_are_remembered_by_value_and_dtype() -> None:
    # `x + 1.0` in a loop takes its const from a table (no new node per op); equal keys that normalize to different
    # consts (0.0 and -0.0) and NaN are never taken from it, and a dtype of its own gets a const of its own
    from uopir.dialects.core import const_value
    from uopir.frontend.tensor import scalar_const

    f32, i32 = R.dtypes.float32, R.dtypes.int32
    assert scalar_const(f32, 1.5) is scalar_const(f32, 1.5)
    assert const_value(scalar_const(f32, 1)) == 1.0 and scalar_const(f32, 1) is scalar_const(f32, 1.0)  # one node
    assert scalar_const(i32, 1.0).dtype is i32 and scalar_const(i32, True) is scalar_const(i32, 1)
    assert scalar_const(f32, 0) is scalar_const(f32, 0)  # an int zero is kept: -0.0 and 0.0 must not find it
    assert np.signbit(const_value(scalar_const(f32, 0.0))) != np.signbit(const_value(scalar_const(f32, -0.0)))
    assert np.signbit(const_value(scalar_const(f32, -0.0))) and not np.signbit(const_value(scalar_const(f32, 0.0)))
    assert np.isnan(const_value(scalar_const(f32, float("nan"))))
    x = Tensor(np.array([0.0, -0.0, 2.0], np.float32), device="python")
    np.testing.assert_array_equal(np.signbit((x * 0.0).numpy()), [False, True, False])
    np.testing.assert_array_equal(np.signbit((x * -0.0).numpy()), [True, False, True])
    np.testing.assert_array_equal((Tensor(np.array([7], np.int32), device="python") // 2).numpy(), [3])


def test_weak_ids_drop_dead_entries_and_keep_a_reused_id() -> None:
    from uopir.frontend.weak_ids import WeakById

    class Obj:
        pass

    table = WeakById()
    a, b = Obj(), Obj()
    table[id(a)], table[id(b)] = a, b
    assert table.values() == [a, b] and id(a) in table and len(table) == 2 and table
    assert table.pop(id(a)) is a and table.pop(id(a), "gone") == "gone"
    old = id(b)
    table[old] = b
    del b  # its callback removes its entry
    assert len(table) == 0 and not table and table.get(old) is None
    c = Obj()
    table[id(c)] = c
    dead = Obj()
    table[1] = dead
    table[1] = c  # a newer object under the same key: the dead one's callback must leave it alone
    del dead
    assert table.get(1) is c and sorted(table) == sorted({1, id(c)})


def test_overlap_of_two_spans() -> None:
    from uopir.backends.cpu.runtime import overlaps

    assert not overlaps([(0, 16), (16, 32)]) and not overlaps([(16, 32), (0, 16)])  # adjacent
    assert overlaps([(0, 16), (8, 24)]) and overlaps([(8, 24), (0, 16)]) and overlaps([(0, 32), (8, 16)])
    assert overlaps([(8, 16), (0, 32)]) and overlaps([(0, 16), (0, 16)])
    assert overlaps([(0, 4), (8, 12), (2, 9)]) and not overlaps([(0, 4), (8, 12), (4, 8)])
