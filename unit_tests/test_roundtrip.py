"""The text IR contract, for every op of every dialect: `parse_ir(print_ir(g)) is g` in both the pretty and the
generic form, and printing is a fixed point (`print_ir(parse_ir(print_ir(g))) == print_ir(g)`).

Random valid graphs come from unit_tests/graphgen.py, which has a builder for every registered op; a test here
fails, naming the op, when an op is registered without one.
"""
from __future__ import annotations

import importlib
import math
import pkgutil
from pathlib import Path

import pytest
from graphgen import BUILDERS, FLOAT_EDGES, INT_EDGES, NASTY_STRINGS, RandSource, build_graph, graphs, real_op_names
from hypothesis import HealthCheck, given, settings
from proptest import FULL, examples

import uopir  # noqa: F401 - registers the dialects
import uopir.dialects
from uopir.dialects import core, device, kernel, tensor
from uopir.ir.dtype import dtypes
from uopir.ir.ops import DIALECTS, REGISTRY, OpDef, RegionAttr
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.ir.verify import verify

f32, f64, f16, bf16, i32, u64, idx, b1 = (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16,
                                          dtypes.int32, dtypes.uint64, dtypes.index, dtypes.bool)
VOID = dtypes.void


def assert_roundtrip(g: UOp) -> str:
    """Every clause of the contract for one graph; returns its pretty text."""
    pretty = print_ir(g)
    generic = print_ir(g, generic=True)
    assert parse_ir(pretty) is g, pretty
    assert parse_ir(generic) is g, generic
    assert print_ir(parse_ir(pretty)) == pretty
    assert print_ir(parse_ir(generic), generic=True) == generic
    return pretty


def ops_in(root: UOp) -> set[str]:
    """The names of every op in the graph, regions included."""
    seen: set[str] = set()
    todo = [root]
    done: set[UOp] = set()
    while todo:
        r = todo.pop()
        for u in r.toposort():
            if u in done:
                continue
            done.add(u)
            seen.add(u.op.name)
            for a, v in u.op.attr_values(u.arg).items():
                if isinstance(next(x.type for x in u.op.attrs if x.name == a), RegionAttr):
                    todo.append(v)
    return seen


# ---- the property ---------------------------------------------------------------------------------------------------
@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(graphs())
def test_random_graphs_round_trip(g: UOp) -> None:
    verify(g)  # the generator builds valid IR only
    assert_roundtrip(g)


@pytest.mark.property  # make fuzz runs its long slice (UOPIR_SLOW=1)
def test_random_graphs_round_trip_deterministic() -> None:
    """The same property on a fixed set of bigger graphs (independent of hypothesis' database): every size from 10
    to 49 nodes, two or three graphs each (300 under UOPIR_SLOW=1)."""
    for seed in range(300 if FULL else 100):
        g, _ = build_graph(RandSource(seed), 10 + seed % 40)
        verify(g)
        assert_roundtrip(g)


def test_pretty_and_generic_lines_mix_freely() -> None:
    """Both forms number values alike and have the same lines, so any op-wise mix of the two is the same graph."""
    import random

    rng = random.Random(7)
    for seed in range(200):
        g, _ = build_graph(RandSource(5_000 + seed), 20)
        pretty, generic = print_ir(g).split("\n"), print_ir(g, generic=True).split("\n")
        assert len(pretty) == len(generic)
        out, opened = [], []  # an op with regions keeps one form from its `({` line to its last `})` line
        for p, q in zip(pretty, generic, strict=True):
            closes, opens = p.lstrip().startswith("})"), p.endswith("({")
            use_pretty = opened.pop() if closes else rng.random() < 0.5
            if opens:
                opened.append(use_pretty)
            out.append(p if use_pretty else q)
        mixed = "\n".join(out)
        assert parse_ir(mixed) is g, mixed


# ---- coverage -------------------------------------------------------------------------------------------------------
def test_builder_table_covers_every_registered_op() -> None:
    missing = [name for name in real_op_names() if name not in BUILDERS]
    assert not missing, f"ops without a builder in unit_tests/graphgen.py: {', '.join(missing)}"
    stale = [name for name in BUILDERS if name not in REGISTRY]
    assert not stale, f"builders for ops that are not registered: {', '.join(stale)}"


def test_every_dialect_module_is_covered() -> None:
    modules = []
    for m in pkgutil.iter_modules(uopir.dialects.__path__):  # the modules that declare ops (not helpers)
        mod = importlib.import_module(f"uopir.dialects.{m.name}")
        if any(isinstance(v, OpDef) for v in vars(mod).values()):
            modules.append(m.name)
    assert {"core", "tensor", "kernel", "device"} <= set(modules)
    for m in modules:
        assert m in DIALECTS, f"uopir/dialects/{m}.py registers no op of dialect {m!r}"
        assert any(name.startswith(m + ".") for name in BUILDERS), f"no builder for dialect {m!r}"


def test_every_op_appears_in_generated_graphs() -> None:
    seen: set[str] = set()
    for seed in range(150):
        g, _ = build_graph(RandSource(10_000 + seed), 30)
        seen |= ops_in(g)
    missing = sorted(set(real_op_names()) - seen)
    assert not missing, f"ops never generated in 150 graphs: {', '.join(missing)}"


def test_every_builder_builds_valid_ir_of_its_op() -> None:
    """Each builder alone, many times: it returns a node of its own op, and the graph verifies and round trips."""
    from graphgen import Gen

    for name, build in BUILDERS.items():
        for seed in range(25):
            g = Gen(RandSource(hash((name, seed)) & 0xFFFF))
            u = build(g)
            assert u.op.name == name, (name, u)
            root = u if u.dtype is VOID else UOp.sink(u)
            verify(root)
            assert_roundtrip(root)


# ---- hand-picked edge cases (each one a small readable graph) -------------------------------------------------------
@pytest.mark.parametrize("v", FLOAT_EDGES, ids=repr)
@pytest.mark.parametrize("d", [f16, bf16, f32, f64], ids=str)
def test_float_consts_round_trip_bit_exactly(d, v: float) -> None:
    c = core.const(d, v)
    assert_roundtrip(UOp.sink(c))
    back = parse_ir(print_ir(c))
    assert back is c
    assert math.isnan(back.arg) if math.isnan(v) else back.arg.hex() == float(v).hex()


def test_signed_zero_consts_stay_apart() -> None:
    pz, nz = core.const(f32, 0.0), core.const(f32, -0.0)
    assert pz is not nz
    text = print_ir(UOp.sink(pz, nz))
    assert "core.const 0.0 : f32" in text and "core.const -0.0 : f32" in text
    assert parse_ir(text) is UOp.sink(pz, nz)


@pytest.mark.parametrize("v", INT_EDGES)
@pytest.mark.parametrize("d", [dtypes.int8, i32, dtypes.int64, dtypes.uint8, u64, idx], ids=str)
def test_int_consts_round_trip(d, v: int) -> None:
    assert_roundtrip(UOp.sink(core.const(d, v)))


def test_vector_and_shaped_consts() -> None:
    vals = (math.inf, -0.0, math.nan, 5e-324)
    g = UOp.sink(core.const(f32.vec(4), vals), core.const(b1.vec(2), (True, False)), core.const(i32.vec(3), 7),
                 core.const(f32, 1.5, ()), core.const(f32, 0.0, (0, 3)), core.const(b1, True, (2, 0, 1)))
    text = assert_roundtrip(g)
    assert "core.const [inf, -0.0, nan, 5e-324] : vector<4xf32>" in text
    assert "core.const 1.5 : tensor<f32>" in text
    assert "core.const 0.0 : tensor<0x3xf32>" in text


@pytest.mark.parametrize("s", NASTY_STRINGS, ids=repr)
def test_strings_round_trip(s: str) -> None:
    g = UOp(tensor.BUFFER, f32, (), (0, s, (2,)))
    text = assert_roundtrip(UOp.sink(g))
    assert text.count("\n") == 2  # a string never spans lines
    assert parse_ir(text).src[0].arg[1] == s


@pytest.mark.parametrize("tag", [0, -5, 2**70, 1.5, -1e300, math.inf, 5e-324, True, False, "t", 'q"\\\n', "é中😀",
                                 (), (1, "a", (2.5, None), ()), f32.vec(4), f32.ptr("local", 16), None], ids=repr)
def test_tags_round_trip(tag) -> None:
    c = UOp.const(f32, 2.0).replace(tag=tag)
    assert_roundtrip(UOp.sink(c))
    assert parse_ir(print_ir(c)).tag == tag


def test_zero_size_and_0d_tensors() -> None:
    b0 = UOp(tensor.BUFFER, f32, (), (0, "python", ()))
    bz = UOp(tensor.BUFFER, i32, (), (1, "python", (0, 4)))
    r = UOp(tensor.RESHAPE, i32, (bz,), (4, 0, 1))
    e = UOp(tensor.EXPAND, i32, (r,), (4, 0, 7))
    red = UOp(tensor.REDUCE, f32, (UOp(tensor.RESHAPE, f32, (b0,), (1, 1)),), ("max", (0, 1)))
    text = assert_roundtrip(UOp.sink(e, red))
    assert "tensor.buffer {id = 0, device = \"python\"} : tensor<f32>" in text
    assert ": tensor<4x0x7xi32>" in text


def test_nested_regions_round_trip() -> None:
    """tensor.call holding a kernel.def whose body holds another tensor.call, three levels deep."""
    def body(level: int) -> UOp:
        p = UOp(kernel.PARAM, f32.ptr(), (), 0)
        i = UOp(kernel.RANGE, idx, (UOp.const(idx, 4 + level),), (0, "global"))
        st = UOp(kernel.STORE, VOID, (UOp(kernel.INDEX, f32.ptr(), (p, i)), UOp.const(f32, float(level))))
        effects = [UOp(kernel.END, VOID, (st, i))]
        if level < 3:
            effects.append(UOp(tensor.CALL, VOID, (), (body(level + 1), f"inner{level}")))
        return UOp(kernel.DEF, VOID, tuple(effects), f"k{level}")

    buf = UOp(tensor.BUFFER, f32, (), (0, "python", (4,)))
    g = UOp.sink(UOp(tensor.CALL, VOID, (buf,), (body(0), "outer")))
    verify(g)
    text = assert_roundtrip(g)
    assert '    %7 = tensor.call {name = "inner1"} ({' in text  # each region indents one more level
    assert text.count("})") == 4
    assert ops_in(g) >= {"tensor.call", "kernel.def", "kernel.end", "kernel.store"}


def test_long_chain_round_trips() -> None:
    """A 20k-deep chain: printer and parser must not recurse on graph depth."""
    x = UOp.const(f32, 1.0)
    one = UOp.const(f32, 0.5)
    for _ in range(20_000):
        x = UOp(core.ADD, f32, (x, one))
    assert parse_ir(print_ir(x)) is x
    assert parse_ir(print_ir(x, generic=True)) is x


def test_every_op_has_a_device_and_kernel_example_in_one_program() -> None:
    """A hand-written device-level program: the pretty text of each op is pinned."""
    n = UOp.const(idx, 16)
    gid = UOp(device.SPECIAL, idx, (n,), ("global_id", 0))
    p = UOp(kernel.PARAM, f32.ptr(), (), 0)
    ld = UOp(kernel.LOAD, f32, (UOp(kernel.INDEX, f32.ptr(), (p, gid)),))
    acc = UOp(device.ACC, f32, (UOp.const(f32, 0.0),), 0)
    upd = UOp(device.ACCSTORE, f32, (acc, ld))
    prog = UOp(device.PROGRAM, VOID, (gid, ld, acc, upd), "E_16")
    text = assert_roundtrip(prog)
    assert text.splitlines() == [
        "%0 = core.const 16 : index",
        "%1 = device.special %0 {kind = global_id, dim = 0} : index",
        "%2 = kernel.param {idx = 0} : ptr<f32, global>",
        "%3 = kernel.index %2, %1 : ptr<f32, global>",
        "%4 = kernel.load %3 : f32",
        "%5 = core.const 0.0 : f32",
        "%6 = device.acc %5 {id = 0} : f32",
        "%7 = device.accstore %6, %4 : f32",
        'device.program %1, %4, %6, %7 {name = "E_16"}',
    ]


# ---- tags are hash-consed bit-exactly, like args ---------------------------------------------------------------------
def test_nan_tag_round_trips() -> None:
    """A nan tag: hash-consing keys the tag by ==, and nan != nan, so the parsed node is a different UOp."""
    c = UOp.const(f32, 1.0).replace(tag=math.nan)
    assert parse_ir(print_ir(c)) is c


def test_tags_are_hash_consed_bit_exactly() -> None:
    """0.0 vs -0.0 and 1 vs 1.0 vs True are different tags (they print differently), so different UOps."""
    a = UOp.const(f32, 1.0).replace(tag=0.0)
    b = UOp.const(f32, 1.0).replace(tag=-0.0)
    assert a is not b
    c = UOp.const(f32, 1.0).replace(tag=1)
    d = UOp.const(f32, 1.0).replace(tag=True)
    assert c is not d
    assert print_ir(d).endswith("{tag = true} : f32\n")


def test_scalar_dtype_tag_round_trips() -> None:
    """A scalar DType tag prints as a bare word (`tag = i32`) and reads back as the DType, not the string "i32"."""
    c = UOp.const(f32, 1.0).replace(tag=i32)
    assert parse_ir(print_ir(c)) is c


def test_every_op_has_a_lit_example() -> None:
    """lit_tests/dialects/<dialect>/ops.uop shows every op of its dialect; invalid.uop exists next to it."""
    root = Path(__file__).resolve().parents[1] / "lit_tests" / "dialects"
    for dialect in sorted({REGISTRY[n].dialect for n in real_op_names()}):
        ops = root / dialect / "ops.uop"
        assert ops.is_file(), f"missing {ops}"
        assert (root / dialect / "invalid.uop").is_file(), f"missing {root / dialect / 'invalid.uop'}"
        text = ops.read_text(encoding="utf-8")
        missing = [n for n in real_op_names() if REGISTRY[n].dialect == dialect
                   and not any(f"{n} " in ln or ln.endswith(n) for ln in text.split("\n") if not ln.startswith("//"))]
        assert not missing, f"{ops} does not use: {', '.join(missing)}"
