"""UPat operator sugar and matching by value, op groups, named rules with their source lines, matcher inspection."""
from __future__ import annotations

import sys

import pytest

import uopir  # noqa: F401 - registers the dialects
from uopir.dialects import core
from uopir.ir.dtype import dtypes
from uopir.ir.pattern_compiler import PatternMatcher, Rule
from uopir.ir.rewrite import RewriteStats, graph_rewrite
from uopir.ir.uop import UOp
from uopir.ir.upat import UPat

i32, f32, B = dtypes.int32, dtypes.float32, dtypes.bool
HERE = "unit_tests/test_pattern_sugar.py"


def c(v, d=i32) -> UOp:
    return UOp.const(d, v)


def var(name: str, d=i32) -> UOp:
    return UOp(core.GROUP, d, (), None, name)


MARK = UOp(core.GROUP, dtypes.void, (), None, "mark")


def matches(p: UPat, u: UOp) -> bool:
    """Through the compiled matcher and the interpreter; both must agree."""
    hit = PatternMatcher([(p, lambda **kw: MARK)]).rewrite(u) is MARK
    assert hit == bool(p.match(u)), f"compiled and interpreted matchers disagree on {p!r} for {u!r}"
    return hit


x, y = var("x"), var("y")
X, Y = UPat.var("x"), UPat.var("y")


# ---- operator sugar ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build, op, srcs", [
    (lambda: X + Y, core.ADD, (x, y)), (lambda: X - Y, core.SUB, (x, y)), (lambda: X * Y, core.MUL, (x, y)),
    (lambda: X // Y, core.IDIV, (x, y)), (lambda: X % Y, core.MOD, (x, y)), (lambda: X & Y, core.AND, (x, y)),
    (lambda: X | Y, core.OR, (x, y)), (lambda: X ^ Y, core.XOR, (x, y)), (lambda: X << Y, core.SHL, (x, y)),
    (lambda: X >> Y, core.SHR, (x, y)), (lambda: X.maximum(Y), core.MAX, (x, y)), (lambda: X < Y, core.CMPLT, (x, y)),
    (lambda: X > Y, core.CMPLT, (y, x)), (lambda: X.lt(Y), core.CMPLT, (x, y)), (lambda: X.ne(Y), core.CMPNE, (x, y)),
    (lambda: X.eq(Y), core.CMPEQ, (x, y)), (lambda: -X, core.NEG, (x,)),
])
def test_sugar_builds_the_core_op(build, op, srcs):
    p = build()
    assert p.opset() == frozenset({op})
    d = B if op in (core.CMPLT, core.CMPNE, core.CMPEQ) else i32
    u = UOp(op, d, srcs)
    caps = p.match(u)
    assert caps and caps[0]["x"] is x and (len(srcs) == 1 or caps[0]["y"] is y)
    assert matches(p, u)
    other = core.SUB if op is not core.SUB else core.ADD
    assert not matches(p, UOp(other, i32, (x, y)))


def test_sugar_where_cast_alu_named_and_reflected_numbers():
    cond = UPat.var("c")
    w = UOp(core.WHERE, i32, (var("k", B), x, c(0)))
    assert matches(cond.where(X, 0), w) and not matches(cond.where(X, 1), w)
    assert matches(X.cast(f32), UOp(core.CAST, f32, (x,))) and not matches(X.cast(i32), UOp(core.CAST, f32, (x,)))
    assert matches(X.cast(), UOp(core.CAST, f32, (x,)))
    assert matches(X.bitcast(f32), UOp(core.BITCAST, f32, (x,)))
    assert matches(X.alu("mulacc", Y, 1), UOp(core.MULACC, i32, (x, y, c(1))))
    assert matches(3 - X, UOp(core.SUB, i32, (c(3), x))) and not matches(3 - X, UOp(core.SUB, i32, (x, c(3))))
    assert matches(2 < X, UOp(core.CMPLT, B, (c(2), x)))  # Python turns 2 < X into X > 2, that is 2 < X again
    assert (X + 0).named("n").match(x + 0)[0]["n"] is (x + 0)
    with pytest.raises(TypeError, match="unsupported operand"):
        X + "one"
    with pytest.raises(TypeError, match="int, float or bool"):
        UPat.value("one")


def test_commutative_sugar_matches_both_orders():
    p = UPat.cvar("c") * X
    assert matches(p, x * 3) and matches(p, UOp(core.MUL, i32, (c(3), x)))
    assert p.match(x * 3)[0]["c"] is c(3)
    assert not matches(X - 1, UOp(core.SUB, i32, (c(1), x)))  # sub is not commutative


def test_numbers_match_consts_by_value_with_the_sign_of_zero():
    p = X + 0
    assert matches(p, x + 0)
    assert matches(p, UOp(core.ADD, f32, (var("f", f32), c(0.0, f32))))
    assert not matches(p, UOp(core.ADD, f32, (var("f", f32), c(-0.0, f32))))  # x + -0.0 is not x + 0
    assert matches(p, UOp(core.ADD, B, (var("b", B), c(False, B))))  # False == 0
    assert matches(p, UOp(core.ADD, i32.vec(2), (var("v", i32.vec(2)), c((0, 0), i32.vec(2)))))  # a splat zero
    assert not matches(p, UOp(core.ADD, i32.vec(2), (var("v", i32.vec(2)), c((0, 1), i32.vec(2)))))
    assert not matches(p, x + 1)
    shaped = core.const(f32, 0.0, (3, 4))
    assert not matches(UPat.value(0), shaped)  # a tensor-shaped const is not a scalar or vector const
    negz = X + -0.0
    assert matches(negz, UOp(core.ADD, f32, (var("f", f32), c(-0.0, f32)))) and matches(negz, x + 0)
    assert not matches(negz, UOp(core.ADD, f32, (var("f", f32), c(0.0, f32))))
    assert matches(X * 1.5, UOp(core.MUL, f32, (var("f", f32), c(1.5, f32)))) and not matches(X * 1.5, x * 1)
    assert matches(X * 1, UOp(core.MUL, f32, (var("f", f32), c(1.0, f32))))
    nan = float("nan")
    assert matches(X + nan, UOp(core.ADD, f32, (var("f", f32), c(nan, f32)))) and not matches(X + nan, x + 0)
    inf = float("inf")
    assert matches(X + inf, UOp(core.ADD, f32, (var("f", f32), c(inf, f32))))
    assert matches(UPat.value(7, dtype=i32), c(7)) and not matches(UPat.value(7, dtype=f32), c(7))
    assert not matches(UPat.const(None, 0), c(-0.0, f32)) and matches(UPat.const(None, 0), c(0.0, f32))


# ---- op groups ----------------------------------------------------------------------------------------------------
def test_op_groups_of_any_iterable():
    add, mul, sub = x + y, x * y, x - y
    for group in (frozenset({core.ADD, core.MUL}), [core.ADD, core.MUL], {core.ADD: 1, core.MUL: 2}.keys(),
                  (o for o in (core.ADD, core.MUL)), ("core.add", core.MUL)):
        p = UPat(group, name="n")
        assert p.opset() == frozenset({core.ADD, core.MUL})
        assert matches(p, add) and matches(p, mul) and not matches(p, sub)
    alu = UPat(core.ALU_OPS)
    assert matches(alu, add) and matches(alu, -x) and not matches(alu, c(1))
    nested = UPat(core.ADD, src=(UPat(frozenset({core.MUL, core.SUB}), name="m"), X))  # group below the top
    assert matches(nested, UOp(core.ADD, i32, (mul, x))) and not matches(nested, UOp(core.ADD, i32, (add, x)))
    assert repr(UPat(frozenset({core.MUL, core.ADD}))) == "UPat((core.add, core.mul))"  # sorted: stable
    with pytest.raises(ValueError, match="empty"):
        UPat(frozenset())
    with pytest.raises(TypeError, match="OpDefs or op names"):
        UPat((core.ADD, 3))
    with pytest.raises(TypeError, match="iterable"):
        UPat(3)


def test_a_group_dispatches_like_a_tuple():
    pm_t = PatternMatcher([(UPat((core.ADD, core.MUL), name="n"), lambda n: MARK)])
    pm_f = PatternMatcher([(UPat(frozenset({core.ADD, core.MUL}), name="n"), lambda n: MARK)])
    assert set(pm_t.dispatch()) == set(pm_f.dispatch()) == {core.ADD, core.MUL}  # compiled per op, no set test
    assert pm_f.rewrite(x * y) is MARK and pm_f.rewrite(x - y) is None


# ---- names and sources ---------------------------------------------------------------------------------------------
def _same(x):
    return x


LINE = sys._getframe().f_lineno; NAMED = PatternMatcher([(X + 0, lambda x: x, "add-zero"), (X * 1, _same), (X // 1, dict)], name="named")  # noqa: E702,E501


def test_rule_names_and_sources():
    assert [r.name for r in NAMED.rules] == ["add-zero", "_same", "dict"]
    assert NAMED.sources() == {
        "add-zero": f"{HERE}:{LINE}",  # a lambda: the line of the entry
        "_same": f"{HERE}:{_same.__code__.co_firstlineno}",  # a function: where it is defined
        "dict": f"{HERE}:{LINE}",  # no Python code (a builtin): where the matcher is built
    }
    assert isinstance(NAMED.rules[0], Rule) and repr(NAMED.rules[0]).startswith(f"Rule('add-zero' at {HERE}:{LINE}: ")


def test_stats_fire_by_name_and_carry_the_sources():
    g = UOp.sink((x + 0) * 1, (y + 0) + 0)
    st = RewriteStats()
    out = graph_rewrite(g, NAMED, stats=st)
    assert out is UOp.sink(x, y)
    assert dict(st.fired) == {"add-zero": 3, "_same": 1}
    assert st.sources == NAMED.sources()  # every rule of the matcher, fired or not
    other = RewriteStats(sources={"add-zero": "elsewhere.py:1"})
    other.merge(st)
    assert other.sources["add-zero"] == f"elsewhere.py:1, {HERE}:{LINE}"


DECO = PatternMatcher([], name="deco")


@DECO.rule(X - 0)
def sub_zero(x):
    return x


@DECO.rule(X ^ X, name="xor-self")
def _xor_self(x):
    return UOp.const(x.dtype, 0)


def test_rule_decorator():
    assert [r.name for r in DECO.rules] == ["sub_zero", "xor-self"]
    src = DECO.sources()["xor-self"]
    path, line = src.rsplit(":", 1)
    assert path == HERE and int(line) == _xor_self.__code__.co_firstlineno
    with open(__file__) as f:
        assert "DECO.rule(X ^ X" in f.read().splitlines()[int(line) - 1]
    assert DECO.rewrite(x - 0) is x and DECO.rewrite(x ^ x) is c(0)
    both = NAMED + DECO
    assert len(both) == 5 and both.sources()["sub_zero"] == DECO.sources()["sub_zero"] and both.name == "named + deco"


def test_bad_entries_say_what_is_wrong():
    with pytest.raises(TypeError, match=r"\(UPat, fn\) or \(UPat, fn, name\), got 1 items"):
        PatternMatcher([(X,)])
    with pytest.raises(TypeError, match="rule name must be a non-empty string"):
        PatternMatcher([(X, _same, "")])
    with pytest.raises(TypeError, match="got UPat"):
        PatternMatcher([X])


# ---- inspection ----------------------------------------------------------------------------------------------------
INSPECT = PatternMatcher([
    (X + 0, _same, "add-zero"),
    (UPat((core.ADD, core.MUL), name="n"), lambda n: None, "add-or-mul"),
    (UPat(name="any"), lambda any: None, "anything"),
    (X * 1, _same, "mul-one"),
], name="inspect")


def test_patterns_by_op():
    by = INSPECT.by_op
    assert list(by) == [core.ADD, core.MUL]
    assert [r.name for r in by[core.ADD]] == ["add-zero", "add-or-mul", "anything"]
    assert [r.name for r in by[core.MUL]] == ["add-or-mul", "anything", "mul-one"]
    assert [r.name for r in INSPECT.patterns_for("core.sub")] == ["anything"]
    assert [r.name for r in INSPECT.patterns_for(core.MUL)] == [r.name for r in by[core.MUL]]
    assert by[core.ADD][0].source == f"{HERE}:{_same.__code__.co_firstlineno}"
    assert by[core.ADD][0].ops() == frozenset({core.ADD}) and by[core.ADD][2].ops() is None
    text = INSPECT.describe().splitlines()
    assert text[0] == "PatternMatcher(inspect, 4 patterns):"
    assert text[2].startswith("  add-or-mul  ") and "[core.add,core.mul]" in text[2] and "[*]" in text[3]


def test_pdict_is_tinygrads_op_index():
    """pm.pdict (tinygrad's name) maps each op to its (pattern, callback, name) entries in the order tried."""
    pd = INSPECT.pdict
    assert list(pd) == [core.ADD, core.MUL]
    assert [n for _, _, n in pd[core.ADD]] == ["add-zero", "add-or-mul", "anything"]
    assert [n for _, _, n in pd[core.MUL]] == ["add-or-mul", "anything", "mul-one"]
    pat, fn, _ = pd[core.ADD][0]
    assert pat is INSPECT.rules[0].pat and fn is _same


def test_upat_location_is_where_the_pattern_was_written():
    """UPat.location is (file, line) of the line that made it, through sugar and `named` (tinygrad's meaning)."""
    line = sys._getframe().f_lineno
    p, q, r = UPat(core.ADD), X + 1, UPat.var("z").named("w")
    assert p.location == (__file__, line + 1) and q.location == (__file__, line + 1)
    assert r.location == (__file__, line + 1)
    assert X.location[1] == 39 and X.location[0] == __file__


# ---- the ops the core finds by role (uopir.ir.roles) -----------------------------------------------------------------
def test_the_dialects_register_the_op_of_every_role():
    from uopir.dialects import kernel, tensor
    from uopir.ir.roles import ROLES, register_roles, role_op

    assert role_op("add") is core.ADD and role_op("lt") is core.CMPLT and role_op("const") is core.CONST
    assert role_op("var") is tensor.VAR and role_op("bind") is tensor.BIND and role_op("kernel_var") is kernel.VAR
    assert {k: role_op(k).name for k in ROLES} == {
        "const": "core.const", "cast": "core.cast", "bitcast": "core.bitcast", "add": "core.add", "sub": "core.sub",
        "mul": "core.mul", "neg": "core.neg", "fdiv": "core.fdiv", "idiv": "core.idiv", "mod": "core.mod",
        "max": "core.max", "lt": "core.cmplt", "ne": "core.cmpne", "eq": "core.cmpeq", "and": "core.and",
        "or": "core.or", "xor": "core.xor", "shl": "core.shl", "shr": "core.shr", "where": "core.where",
        "mulacc": "core.mulacc", "sink": "core.sink", "var": "tensor.var", "bind": "tensor.bind",
        "kernel_var": "kernel.var"}
    with pytest.raises(KeyError, match="'nope' is not a role"):
        role_op("nope")
    with pytest.raises(ValueError, match="'add' is already played by core.add; core.sub cannot take it"):
        register_roles({"add": core.SUB})
    with pytest.raises(ValueError, match="unknown op role 'plus'"):
        register_roles({"plus": core.ADD})
    register_roles({"add": core.ADD})  # the same op again (a second registration by its dialect) is fine
    assert role_op("add") is core.ADD
