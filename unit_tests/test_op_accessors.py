"""Attributes and operands by name: `u.attrs.<attr>` and `u.operands.<operand>`, made from each op's declaration.

Every registered op is checked against its own declaration (the printer's `attr_values` is the oracle for the
attributes), so an op added later is covered without a new test."""
from __future__ import annotations

import pytest

import uopir  # noqa: F401  (registers the dialects)
from uopir.dialects import core, device, kernel, tensor
from uopir.dialects.core import const
from uopir.ir.dtype import dtypes
from uopir.ir.ops import REGISTRY, OpDef
from uopir.ir.uop import UOp

IDX = dtypes.index


def _ops_with_attrs() -> list[OpDef]:
    return [op for op in REGISTRY.values() if op.attrs]


def _ops_with_operands() -> list[OpDef]:
    return [op for op in REGISTRY.values() if op.operands]


def _sources(n: int) -> tuple[UOp, ...]:
    return tuple(UOp.const(IDX, 100 + i) for i in range(n))


@pytest.mark.parametrize("op", _ops_with_attrs(), ids=lambda op: op.name)
def test_every_attribute_reads_its_own_value(op: OpDef) -> None:
    """Each attribute name reads the value at its own position: distinct values per position, so a reader that
    took another position (or the whole arg of a multi-attribute op) gives a wrong one."""
    vals = tuple(f"value-of-{a.name}" for a in op.attrs)
    arg = vals[0] if len(vals) == 1 else vals
    u = UOp(op, dtypes.void, (), arg)
    want = op.attr_values(arg)
    for a in op.attrs:
        assert getattr(u.attrs, a.name) == want[a.name]
    if type(op) is OpDef:  # the plain arg layout (core.const has its own: checked below)
        assert [getattr(u.attrs, a.name) for a in op.attrs] == list(vals)


@pytest.mark.parametrize("op", _ops_with_operands(), ids=lambda op: op.name)
def test_every_named_operand_reads_its_own_source(op: OpDef) -> None:
    """Named operands read their position; optional ones are None when absent; a `*rest` name is the tuple of the
    remaining operands (two extra ones here)."""
    lo, hi = op.n_src
    fixed = [n for n in op.operands if not n.startswith("*")]
    star = next((n[1:] for n in op.operands if n.startswith("*")), None)
    full = _sources(len(fixed) + (2 if star else 0))
    u = UOp(op, dtypes.void, full)
    for i, n in enumerate(fixed):
        assert getattr(u.operands, n) is full[i]
    if star:
        assert getattr(u.operands, star) == full[len(fixed):]
    short = UOp(op, dtypes.void, full[:lo])
    for i, n in enumerate(fixed):
        assert getattr(short.operands, n) is (full[i] if i < lo else None)
    if star:
        assert getattr(short.operands, star) == full[len(fixed):lo]


def test_ops_with_fixed_roles_name_them() -> None:
    """The ops the passes read by role declare their operand names (a dropped declaration fails here)."""
    want = {kernel.RANGE: ("end",), kernel.INDEX: ("ptr", "offset", "gate"), kernel.LOAD: ("ptr", "alt", "gate"),
            kernel.STORE: ("ptr", "value", "gate"), kernel.REDUCE: ("value", "*ranges"),
            kernel.END: ("value", "*ranges"), device.ACC: ("init", "*loops"), device.ACCSTORE: ("acc", "value"),
            device.ENDLOOP: ("block", "*deps"), tensor.ASSIGN: ("target", "value"), tensor.BIND: ("var", "value"),
            tensor.RESHAPE: ("x", "*dims"), core.WHERE: ("cond", "a", "b"), core.GEP: ("x",)}
    for op, names in want.items():
        assert op.operands == names, op.name


def test_kernel_ops_read_by_name() -> None:
    end = UOp.const(IDX, 8)
    r = UOp(kernel.RANGE, IDX, (end,), (3, "reduce"))
    assert (r.attrs.axis, r.attrs.kind, r.operands.end) == (3, "reduce", end)
    p = UOp(kernel.PARAM, dtypes.float32.ptr(), (), 1)
    assert p.attrs.idx == 1
    ix = UOp(kernel.INDEX, p.dtype, (p, r))
    ld = UOp(kernel.LOAD, dtypes.float32, (ix,))
    assert (ix.operands.ptr, ix.operands.offset, ix.operands.gate) == (p, r, None)
    assert (ld.operands.ptr, ld.operands.alt, ld.operands.gate) == (ix, None, None)
    red = UOp(kernel.REDUCE, dtypes.float32, (ld, r), "max")
    assert (red.attrs.op, red.operands.value, red.operands.ranges) == ("max", ld, (r,))


def test_shared_names_read_across_ops() -> None:
    """tensor.var and kernel.var both call their first attribute `name`: one read serves both."""
    tv = UOp(tensor.VAR, IDX, (), ("n", 1, 9))
    kv = UOp(kernel.VAR, IDX, (), ("m", 2, 7))
    assert [(v.attrs.name, v.attrs.min, v.attrs.max) for v in (tv, kv)] == [("n", 1, 9), ("m", 2, 7)]


def test_const_value_and_shape() -> None:
    """core.const keeps a bare value as its arg, a (value, shape) pair when shaped: both read by name."""
    c, s = const(dtypes.float32, 2.5), const(dtypes.float32, -1.0, (3, 4))
    assert (c.attrs.value, c.attrs.shape) == (2.5, None)
    assert (s.attrs.value, s.attrs.shape) == (-1.0, (3, 4))
    v = UOp.const(dtypes.int32.vec(2), (5, 6))
    assert (v.attrs.value, v.attrs.shape) == ((5, 6), None)


def test_wrong_name_is_a_clear_error() -> None:
    ld = UOp(kernel.LOAD, dtypes.float32, (UOp(kernel.PARAM, dtypes.float32.ptr(), (), 0),))
    with pytest.raises(AttributeError, match=r"^'kernel.load' has no attribute 'axis' \(attributes: none\)$"):
        _ = ld.attrs.axis
    r = UOp(kernel.RANGE, IDX, (UOp.const(IDX, 4),), (0, "loop"))
    with pytest.raises(AttributeError, match=r"^'kernel.range' has no attribute 'op' \(attributes: axis, kind\)$"):
        _ = r.attrs.op
    with pytest.raises(AttributeError, match=r"^'kernel.range' has no operand 'ptr' \(operands: end\)$"):
        _ = r.operands.ptr
    with pytest.raises(AttributeError, match=r"'core.add' has no operand 'x' \(operands: none\)"):
        _ = (r + r).operands.x


def test_views_print_their_values() -> None:
    r = UOp(kernel.RANGE, IDX, (UOp.const(IDX, 4),), (2, "global"))
    assert repr(r.attrs) == "kernel.range attributes(axis=2, kind='global')"


@pytest.mark.parametrize("operands, n_src, why", [
    (("*rest", "x"), (1, None), "must be last"),
    (("x", "*rest"), (1, 3), "must be last, on a variadic op"),
    (("a", "b", "c"), (1, 2), "past the op's 2 operands"),
    (("a", "a"), (2, 2), "repeat"),
    (("a", "if"), (2, 2), "cannot be an accessor"),
    (("_u",), (1, 1), "cannot be an accessor"),
])
def test_bad_operand_declarations_are_refused(operands: tuple[str, ...], n_src: tuple, why: str) -> None:
    from uopir.ir.registration import RegistrationError

    with pytest.raises(RegistrationError, match=why):  # an exception, not an assert: it holds under python -O
        OpDef("testaccessors.bad", n_src, operands=operands)
