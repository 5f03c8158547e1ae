"""The textual IR: printer and parser round trip (identity, both forms), canonical text, edge-case literals, and
every kind of parse error with its message and file:line:col."""
from __future__ import annotations

import math
import random
import struct

import pytest

import uopir  # noqa: F401 - registers the dialects
from uopir.ir.diagnostics import IRError, ShapeError, get_loc, register_source, source_line
from uopir.ir.dtype import dtypes
from uopir.ir.lexer import TOKEN_RE
from uopir.ir.ops import (
    ANY,
    FLOAT,
    INT,
    REGION,
    REGISTRY,
    SCALAR,
    SHAPE,
    STR,
    Attr,
    EnumAttr,
    OptionalAttr,
    def_op,
    get_op,
)
from uopir.ir.parser import parse_ir, parse_type, split_input
from uopir.ir.printer import fmt_type, print_ir
from uopir.ir.uop import UOp

F32, I32, IDX, VOID = dtypes.float32, dtypes.int32, dtypes.index, dtypes.void


# ---- private test ops (dialect "testtext": graph generators skip dialects named test*) -------------------------------
def _shape_ew(u: UOp) -> tuple[int, ...] | None:
    out = None
    for s in u.src:
        if s.shape is not None:
            if out is not None and s.shape != out:
                raise ShapeError(f"operand shapes differ: {list(out)} vs {list(s.shape)}")
            out = s.shape
    return out


def _shape_boom(u: UOp) -> tuple[int, ...] | None:
    raise RuntimeError("boom")


def _norm(dtype, arg):
    return float(arg) if dtype.is_float else int(arg)


def _op(name: str, *a, **kw):
    return REGISTRY.get(name) or def_op(name, *a, summary="test", **kw)


LEAF = _op("testtext.leaf", 0, (Attr("n", INT),), positional=1)
POS2 = _op("testtext.pos2", (0, None), (Attr("a", INT), Attr("b", EnumAttr("x", "y")), Attr("c", FLOAT, 0.0),
                                        Attr("s", STR, "")), positional=2)
REG2 = _op("testtext.reg2", (0, None), (Attr("r1", REGION), Attr("r2", REGION), Attr("name", STR, "k")))
SHAPED = _op("testtext.shaped", 0, (Attr("dims", SHAPE, in_type=True),), shape=lambda u: u.arg)
EW = _op("testtext.ew", 2, shape=_shape_ew)
NORM = _op("testtext.norm", 0, (Attr("v", SCALAR),), positional=1, normalize_arg=_norm)
ANYOP = _op("testtext.any", (0, None), (Attr("x", ANY, None), Attr("o", OptionalAttr(INT), None)))
BOOM = _op("testtext.boom", 0, shape=_shape_boom)
FL = _op("testtext.fl", 0, (Attr("f", FLOAT),))


def leaf(n: int, dtype=I32) -> UOp:
    return UOp(LEAF, dtype, (), n)


def roundtrip(g: UOp) -> None:
    for generic in (False, True):
        text = print_ir(g, generic)
        u = parse_ir(text)
        assert u is g, text
        assert print_ir(u, generic) == text


def err(text: str, filename: str = "t.uop") -> IRError:
    with pytest.raises(IRError) as ei:
        parse_ir(text, filename)
    return ei.value


def where(e: IRError) -> tuple[int, int]:
    return e.loc.line, e.loc.col


# ---- round trip ------------------------------------------------------------------------------------------------------
DESIGN_EXAMPLE = """\
%0 = tensor.buffer {id = 0, device = "python"} : tensor<16xf32>
%1 = tensor.reshape %0 {shape = [4, 4]} : tensor<4x4xf32>
%2 = core.const 0.0 : f32
%3 = core.max %1, %2 : tensor<4x4xf32>
core.sink %3
"""

KERNEL_CALL = """\
%0 = tensor.buffer {id = 0, device = "python"} : tensor<16xf32>
%1 = tensor.buffer {id = 1, device = "python"} : tensor<16xf32>
%2 = tensor.call %0, %1 {name = "E_16"} ({
  %0 = kernel.param {idx = 0} : ptr<f32, global>
  %1 = core.const 16 : index
  %2 = kernel.range %1 {axis = 0, kind = global} : index
  %3 = kernel.index %0, %2 : ptr<f32, global>
  %4 = kernel.param {idx = 1} : ptr<f32, global>
  %5 = kernel.index %4, %2 : ptr<f32, global>
  %6 = kernel.load %5 : f32
  %7 = core.const 2.0 : f32
  %8 = core.mul %6, %7 : f32
  %9 = kernel.store %3, %8
  %10 = kernel.end %9, %2
  kernel.def %10 {name = "E_16"}
})
core.sink %2
"""


def test_design_example_exact():
    u = parse_ir(DESIGN_EXAMPLE)
    assert print_ir(u) == DESIGN_EXAMPLE
    assert u.op is get_op("core.sink")
    mx = u.src[0]
    assert mx.op is get_op("core.max") and mx.shape == (4, 4) and mx.dtype is F32
    buf = mx.src[0].src[0]
    assert buf.op is get_op("tensor.buffer") and buf.arg == (0, "python", (16,))
    roundtrip(u)


def test_kernel_call_region_real_ops():
    u = parse_ir(KERNEL_CALL)
    assert print_ir(u) == KERNEL_CALL
    call = u.src[0]
    body = call.op.attr_values(call.arg)["kernel"]
    assert isinstance(body, UOp) and body.op is get_op("kernel.def") and body.arg == "E_16"
    rng = body.src[0].src[1]
    assert rng.op is get_op("kernel.range") and rng.arg == (0, "global")
    roundtrip(u)
    gen = print_ir(u, generic=True)
    assert '%2 = "tensor.call"(%0, %1) {name = "E_16"} ({' in gen
    assert "}) : (tensor<16xf32>, tensor<16xf32>) -> void" in gen
    assert '  %9 = "kernel.store"(%3, %8) : (ptr<f32, global>, f32) -> void' in gen


def test_real_ops_built_in_python():
    c = UOp.const(F32, 1.5)
    x = UOp(get_op("tensor.buffer"), F32, (), (3, "python", (2, 3)))
    y = UOp(get_op("tensor.permute"), F32, (x,), (1, 0))
    z = UOp(get_op("core.add"), F32, (y, c))
    r = UOp(get_op("kernel.range"), IDX, (UOp.const(IDX, 8),), (1, "loop"))
    g = UOp.sink(z, r)
    text = print_ir(g)
    assert text == ("%0 = tensor.buffer {id = 3, device = \"python\"} : tensor<2x3xf32>\n"
                    "%1 = tensor.permute %0 {perm = [1, 0]} : tensor<3x2xf32>\n"
                    "%2 = core.const 1.5 : f32\n"
                    "%3 = core.add %1, %2 : tensor<3x2xf32>\n"
                    "%4 = core.const 8 : index\n"
                    "%5 = kernel.range %4 {axis = 1} : index\n"  # kind = loop is the default: not printed
                    "core.sink %3, %5\n")
    roundtrip(g)


def test_const_forms():
    v = UOp.const(F32.vec(4), (1.0, -0.0, math.inf, math.nan))
    t = parse_ir("%0 = core.const 0.0 : tensor<3x4xf32>\n")
    assert t.shape == (3, 4) and print_ir(t) == "%0 = core.const 0.0 : tensor<3x4xf32>\n"
    assert print_ir(v) == "%0 = core.const [1.0, -0.0, inf, nan] : vector<4xf32>\n"
    roundtrip(v)
    roundtrip(t)
    # normalize_arg: an int literal for a float const is 1.0; an int literal must fit its type (no silent wrap)
    assert parse_ir("%0 = core.const 1 : f32\n") is UOp.const(F32, 1.0)
    assert parse_ir("%0 = core.const -128 : i8\n") is UOp.const(dtypes.int8, -128)
    with pytest.raises(IRError, match=r"integer 255 does not fit i8 \(range \[-128, 127\]\)"):
        parse_ir("%0 = core.const 255 : i8\n")
    with pytest.raises(IRError, match="expected an integer for i32, got 1.5"):
        parse_ir("%0 = core.const 1.5 : i32\n")
    assert parse_ir("%0 = core.const true : bool\n").arg is True


def test_private_ops_roundtrip_all_features():
    a = leaf(1)
    p = UOp(POS2, I32, (a, a), (7, "y", -0.0, 'q"\\'))
    p2 = UOp(POS2, I32, (), (-3, "x", 0.0, ""))
    inner2 = UOp(REG2, VOID, (), (UOp.sink(leaf(5)), UOp.sink(leaf(6)), "in"))
    inner = UOp.sink(leaf(1), inner2)  # a region holding a region; numbering restarts at %0 in each
    r = UOp(REG2, VOID, (p, p2), (inner, UOp.sink(leaf(2)), "k"))
    s = UOp(SHAPED, F32, (), (0, 3))
    e = UOp(EW, F32, (s, UOp(SHAPED, F32, (), (0, 3))))
    n = UOp(NORM, I32, (), 5)
    g = UOp.sink(r, e, n, UOp(SHAPED, F32, (), ()), UOp(ANYOP, VOID, (), ((1, "a", (2.5, False)), None)))
    text = print_ir(g)
    assert text == """\
%0 = testtext.leaf 1 : i32
%1 = testtext.pos2 %0, %0 7, y {c = -0.0, s = "q\\"\\\\"} : i32
%2 = testtext.pos2 -3, x : i32
%3 = testtext.reg2 %1, %2 ({
  %0 = testtext.leaf 1 : i32
  %1 = testtext.reg2 {name = "in"} ({
    %0 = testtext.leaf 5 : i32
    core.sink %0
  }) ({
    %0 = testtext.leaf 6 : i32
    core.sink %0
  })
  core.sink %0, %1
}) ({
  %0 = testtext.leaf 2 : i32
  core.sink %0
})
%4 = testtext.shaped : tensor<0x3xf32>
%5 = testtext.ew %4, %4 : tensor<0x3xf32>
%6 = testtext.norm 5 : i32
%7 = testtext.shaped : tensor<f32>
%8 = testtext.any {x = [1, "a", [2.5, false]]}
core.sink %3, %5, %6, %7, %8
"""
    roundtrip(g)


FLOAT_EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e300, -1e300,
               1.7976931348623157e308, 0.1, 1 / 3, 1e16, 1e-7, 123456789.0, 3.4028234663852886e38]


@pytest.mark.parametrize("v", FLOAT_EDGES, ids=repr)
def test_float_bits_roundtrip(v: float):
    for g in (UOp(FL, VOID, (), v), UOp.const(dtypes.float64, v)):
        for generic in (False, True):
            u = parse_ir(print_ir(g, generic))
            assert u is g
            got = u.arg
            assert struct.pack("<d", got) == struct.pack("<d", v) or (math.isnan(v) and math.isnan(got))


def test_float_random_bits_roundtrip():
    rng = random.Random(1)
    for _ in range(300):
        v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isnan(v):
            continue
        u = parse_ir(print_ir(UOp(FL, VOID, (), v)))
        assert struct.pack("<d", u.arg) == struct.pack("<d", v)


NASTY = ["", 'a"b', "back\\slash", "\\", '"', "line\nbreak", "tab\there", "cr\rlf\n", "\x00\x01\x1f\x7f",
         "héllo wörld", "中文", "😀", "\u2028\u2029\x85\x0b\x0c", "\\x41", "// -----", "}) ({", "%0 = core.sink",
         "{a = 1}", "a" * 300]


@pytest.mark.parametrize("s", NASTY, ids=repr)
def test_string_roundtrip(s: str):
    g = UOp(POS2, I32, (), (1, "x", 0.0, s))
    roundtrip(g)
    assert parse_ir(print_ir(g)).arg[3] == s
    t = UOp.sink(leaf(0).replace(tag=s))
    roundtrip(t)


def test_string_escapes_parse():
    u = parse_ir('%0 = testtext.pos2 1, x {s = "\\x41\\n\\t\\r\\"\\\\"} : i32\n')
    assert u.arg[3] == 'A\n\t\r"\\'


@pytest.mark.parametrize("tag", [0, -7, 10**30, "t", 'q"', (1, "a", (2, 3)), (), True, False, 2.5, F32.vec(4),
                                 F32.ptr("local", 16), I32, (I32, dtypes.bool)], ids=repr)
def test_tag_roundtrip(tag):
    g = UOp.sink(leaf(3).replace(tag=tag), UOp(EW, F32, (UOp(SHAPED, F32, (), (2,)),) * 2, tag=tag))
    roundtrip(g)
    assert g.src[0].tag == tag


@pytest.mark.parametrize("dt", [F32, dtypes.bfloat16, dtypes.uint64, IDX, dtypes.bool, F32.vec(4),
                                dtypes.int8.vec(16), F32.ptr(), F32.ptr("local", 16), F32.vec(4).ptr("register", 0),
                                dtypes.uint8.ptr("global", 7)], ids=str)
def test_dtypes_roundtrip(dt):
    g = UOp.sink(leaf(1, dt), UOp(SHAPED, dt, (), (2, 0)) if not dt.is_ptr else leaf(2, dt))
    roundtrip(g)
    assert parse_type(dt.name) == (dt, None)


def test_tensor_types():
    assert parse_type("tensor<4x4xf32>") == (F32, (4, 4))
    assert parse_type("tensor<f32>") == (F32, ())
    assert parse_type("tensor<0x3xf32>") == (F32, (0, 3))
    assert parse_type("tensor<2xvector<4xf32>>") == (F32.vec(4), (2,))
    assert parse_type("ptr<f32,local,16>") == (F32.ptr("local", 16), None)
    assert fmt_type(F32, ()) == "tensor<f32>" and fmt_type(F32, (0, 3)) == "tensor<0x3xf32>"
    for shape in [(), (0,), (0, 3), (4, 4), (1, 1, 1, 7)]:
        roundtrip(UOp(SHAPED, F32, (), shape))


def test_deep_chain_no_recursion():
    x = UOp.const(F32, 0.0)
    for i in range(10000):
        x = UOp(get_op("core.add"), F32, (x, UOp.const(F32, float(i % 7))))
    g = UOp.sink(x)
    text = print_ir(g)
    assert text.count("\n") == 10000 + 7 + 1
    assert parse_ir(text) is g
    assert parse_ir(print_ir(g, generic=True)) is g


# ---- canonical text and the lenient reader ---------------------------------------------------------------------------
def test_canonical_text_stable():
    for text in (DESIGN_EXAMPLE, KERNEL_CALL, "%0 = testtext.leaf -1 : i32\n", "%0 = testtext.norm 1.5 : f32\n",
                 '%0 = testtext.pos2 1, y {c = nan, s = "\\x00"} : i32\n'):
        assert print_ir(parse_ir(text)) == text
        assert print_ir(parse_ir(print_ir(parse_ir(text), generic=True))) == text


def test_named_values_comments_and_mixed_forms():
    text = """\
// a comment line

  %buf.0 = tensor.buffer {device = "python", id = 0}   :   tensor<16xf32>   // trailing comment
%x$1-a = "tensor.reshape"(%buf.0) {shape = [4, 4]} : (tensor<16xf32>) -> tensor<4x4xf32>
%_c = core.const 0 : f32
%9 = "core.max"(%x$1-a, %_c) : (tensor<4x4xf32>, f32) -> tensor<4x4xf32>
core.sink %9 // done
"""
    u = parse_ir(text)
    assert u is parse_ir(DESIGN_EXAMPLE)
    assert print_ir(u) == DESIGN_EXAMPLE


def test_defaults_and_in_type_from_type():
    u = parse_ir("%0 = testtext.pos2 4, x : i32\n")
    assert u.arg == (4, "x", 0.0, "")
    u = parse_ir('%0 = testtext.pos2 4, x {c = 0.0, s = ""} : i32\n')  # explicit defaults: same UOp
    assert print_ir(u) == "%0 = testtext.pos2 4, x : i32\n"
    assert parse_ir("%0 = testtext.shaped : tensor<5x6xf32>\n").arg == (5, 6)
    assert parse_ir("%0 = testtext.leaf 0x1f : i32\n").arg == 31
    assert parse_ir("%0 = testtext.leaf 1 {} : i32\n") is leaf(1)
    assert parse_ir("%0 = testtext.leaf 1 {tag = 5} : i32\n") is leaf(1).replace(tag=5)
    assert parse_ir("%0 = testtext.pos2 {a = 2, b = x} : i32\n").arg == (2, "x", 0.0, "")  # positional by name


def test_locations_and_source_registered():
    u = parse_ir("%0 = testtext.leaf 1 : i32\n\n    %1 = testtext.leaf 2 : i32\ncore.sink %0, %1\n", "loc.uop")
    assert str(get_loc(u)) == "loc.uop:4:1"
    assert str(get_loc(u.src[1])) == "loc.uop:3:5"
    assert source_line(get_loc(u.src[1])) == "    %1 = testtext.leaf 2 : i32"


# ---- split_input -----------------------------------------------------------------------------------------------------
def test_split_input_line_numbers():
    text = ("%0 = testtext.leaf 1 : i32\n"
            "// -----\n"
            "// comment\n"
            "%0 = testtext.leaf 2 : i32\n"
            "// -----   \n"
            "%0 = testtext.leaf 3 : i32\n"
            "%1 = testtext.bogus %0\n")
    chunks = split_input(text)
    assert [n for n, _ in chunks] == [1, 3, 6]
    assert chunks[1][1] == "// comment\n%0 = testtext.leaf 2 : i32\n"
    u = parse_ir(chunks[1][1], "s.uop", first_line=chunks[1][0])
    assert u.arg == 2 and str(get_loc(u)) == "s.uop:4:1"
    with pytest.raises(IRError) as ei:
        parse_ir(chunks[2][1], "s.uop", first_line=chunks[2][0])
    assert str(ei.value.loc) == "s.uop:7:6"
    assert "unknown op 'testtext.bogus'" in ei.value.message
    assert ei.value.diagnostics[0].source_line == "%1 = testtext.bogus %0"
    assert split_input("no marks\n") == [(1, "no marks\n")]


def test_register_source_merges_chunks():
    register_source("m.uop", "a\nb\n")
    register_source("m.uop", "x\ny\n", first_line=4)
    from uopir.ir.diagnostics import Location
    assert source_line(Location("m.uop", 2, 1)) == "b"
    assert source_line(Location("m.uop", 5, 1)) == "y"


# ---- errors ----------------------------------------------------------------------------------------------------------
ERRORS = [
    # (text, message fragment, line, col)
    ("%0 = core.add %1 %3 : f32\n", "use of undefined value '%1'", 1, 15),
    ("%0 = testtext.leaf 1 : i32\n%1 = testtext.ew %0 %0 : i32\n", "expected ',', ':' or end of line, got '%0'", 2, 21),
    # regression: a trailing ',' said "expected ',' ..., got ','"
    ("%0 = testtext.leaf 1 : i32\n%1 = testtext.ew %0,\n  %0 : i32\n",
     "expected an operand ('%name') after ',', got end of line (an op and its operands go on one line)", 2, 21),
    ("%0 = testtext.leaf 1 : i32\n%1 = testtext.ew %0, : i32\n", "expected an operand ('%name') after ',', got ':'",
     2, 22),
    ("%0 = core.ad %1, %2 : f32\n", "unknown op 'core.ad'; did you mean 'core.add'?", 1, 6),
    ("%0 = cor.const 1.0 : f32\n", "unknown dialect 'cor' in op 'cor.const'; did you mean 'core.const'?", 1, 6),
    ("%0 = zzz.qqq : f32\n", "unknown dialect 'zzz'", 1, 6),
    ("%0 = testtext.leaf 1 : i32\n%0 = testtext.leaf 2 : i32\ncore.sink %0\n",
     "redefinition of '%0' (first defined at t.uop:1:1)", 2, 1),
    ("%0 = testtext.leaf 1 : i32\n%1 = testtext.ew %0 : i32\n", "'testtext.ew' takes 2 operands, got 1", 2, 6),
    ("core.sink\n%0 = core.add : f32\n", "'core.add' takes 2 operands, got 0", 2, 6),
    ("%0 = testtext.pos2 1, z : i32\n", "attribute 'b' of 'testtext.pos2': expected one of x, y, got z", 1, 23),
    ("%0 = testtext.pos2 1, x {q = 1} : i32\n", "'testtext.pos2' has no attribute 'q'", 1, 26),
    ("%0 = testtext.pos2 1, x {c = 1, c = 2} : i32\n", "attribute 'c' given twice", 1, 33),
    ("%0 = testtext.reg2 {name = 3}\n", "'testtext.reg2' requires attribute 'r1'", 1, 6),
    ("%0 = testtext.reg2 ({\n  %0 = testtext.leaf 1 : i32\n}) {name = \"a\"}\n",
     "expected '({', ':' or end of line, got '{'", 3, 4),
    ("%0 = testtext.leaf 1 : f33\n", "unknown type 'f33'; did you mean 'f32'?", 1, 24),
    ("%0 = testtext.leaf 1 : vector<1xf32>\n", "a vector type needs at least 2 lanes", 1, 24),
    ("%0 = testtext.leaf 1 : ptr<f32, shared>\n", "unknown address space 'shared'", 1, 24),
    ("%0 = testtext.shaped : tensor<4x4xf32>\n%1 = testtext.shaped : tensor<4x3xf32>\n%2 = testtext.ew %0, %1 : "
     "tensor<4x4xf32>\n", "operand shapes differ: [4, 4] vs [4, 3]", 3, 1),
    ("%0 = tensor.buffer {id = 0, device = \"python\"} : tensor<12xf32>\n%1 = tensor.reshape %0 {shape = [4, 3]} : "
     "tensor<4x4xf32>\n", "result type tensor<4x4xf32> does not match the inferred tensor<4x3xf32>", 2, 43),
    ("%0 = testtext.shaped : tensor<4xf32>\n%1 = \"testtext.ew\"(%0, %0) : (tensor<4xf32>, tensor<5xf32>) -> "
     "tensor<4xf32>\n", "operand 1 type tensor<5xf32> does not match the type of '%0' (tensor<4xf32>)", 2, 46),
    ("%0 = testtext.leaf 1 : i32\n%1 = testtext.leaf 2 : i32\ncore.sink %1\n",
     "'%0' is not reachable from the root (the last op of the block)", 1, 1),
    ("core.sink\ncore.sink\n", "this op's result (it has no name) is not reachable from the root", 1, 1),
    ("", "empty input: expected at least one op", 1, 1),
    ("  // only a comment\n\n", "empty input", 1, 1),
    ("%0 = testtext.pos2 1, x {s = \"abc} : i32\n", "unterminated string", 1, 30),
    ("%0 = testtext.pos2 1, x {s = \"a\\qb\"} : i32\n", "invalid escape '\\q' in string", 1, 30),
    ("%0 = testtext.reg2 ({\n  %0 = testtext.leaf 1 : i32\n", "unterminated region: expected '})'", 1, 20),
    ("%0 = testtext.reg2 ({\n}) ({\n  core.sink\n})\n", "empty region", 1, 20),
    ("})\n", "unexpected '}' outside a region", 1, 1),
    ("%0 = testtext.leaf 1 : i32\n%1 = testtext.reg2 ({\n  core.sink %0\n}) ({\n  core.sink\n})\ncore.sink %1\n",
     "use of undefined value '%0' (a region cannot use values of the enclosing block)", 3, 13),
    ("%0 = testtext.boom\n", "cannot infer the shape of 'testtext.boom': RuntimeError: boom", 1, 1),
    ("%0 = testtext.leaf 99999999999999999999 : i32\n%1 = core.const [1, 2, 3] : vector<2xf32>\n",
     "a const of vector<2xf32> needs 2 values, got 3", 2, 6),
    ("%0 = testtext.leaf " + "9" * 5000 + " : i32\n", "integer literal too long (5000 digits)", 1, 20),
    ("%0 = testtext.leaf [" + "[" * 200 + " : i32\n", "lists nested more than 64 deep", 1, 84),
    # regression: a hex literal was not length-checked and crashed the printer (decimal ints are)
    ("%0 = testtext.leaf 0x" + "f" * 5000 + " : i32\n", "integer literal too long (5002 digits)", 1, 20),
    ("%0 = testtext.leaf  0x" + "f" * 5000 + " : i32\n", "integer literal too long (5002 digits)", 1, 21),
    ("%0 = testtext.pos2 1, x {c = 0x" + "f" * 5000 + "} : i32\n", "integer literal too long", 1, 30),
    # regression: `1_0` was 10 on the fast path (canonical spacing) and an error on the slow one
    ("%0 = testtext.leaf 1_0 : i32\n", "invalid number '1_0' ('_' digit separators are not allowed)", 1, 20),
    ("%0 = testtext.leaf  1_0 : i32\n", "invalid number '1_0' ('_' digit separators are not allowed)", 1, 21),
    ("%0 = testtext.leaf 0x1_f : i32\n", "invalid number '0x1_f'", 1, 20),
    ("%0 = \"testtext.leaf\"() {n = 1_0} : () -> i32\n", "invalid number '1_0'", 1, 29),
    ("%0 = testtext.pos2 1, x {c = 1.5_0} : i32\n", "invalid number '1.5_0'", 1, 30),
    ("%0 = testtext.leaf [1, 2_0] : i32\n", "invalid number '2_0'", 1, 24),
    ("%0 = testtext.leaf 1 : i32 extra\n", "expected end of line, got 'extra'", 1, 28),
    ("%0 testtext.leaf 1 : i32\n", "expected '=' after '%0', got 'testtext.leaf'", 1, 4),
    ("%0 = 42\n", "expected an op name, got '42'", 1, 6),
    ("%0 = \"core.add\"(%1 : f32\n", "use of undefined value '%1'", 1, 17),
    ("%0 = testtext.leaf 1 : i32\n%1 = \"core.add\"(%0, %0) : f32\n",
     "expected '(' starting the operand types, got 'f32'", 2, 27),
    ("%0 = \"testtext.leaf\"() {n = 1}\n", "expected ':' and the function type", 1, 31),
    ("%0 = tensor.buffer {id = 0, device = \"python\"} : f32\n",
     "'tensor.buffer' needs a tensor result type (its 'shape' attribute is the type's shape), got f32", 1, 50),
    ("%0 = tensor.buffer {id = -1, device = \"python\"} : tensor<4xf32>\n", "attribute 'id' of 'tensor.buffer'", 1, 21),
    ("%0 = testtext.ew ⊕ : f32\n", "expected ':' or end of line, got '⊕'", 1, 18),
    ("%0 = testtext.leaf 1 : i32 // ok\n%1 = testtext.leaf 2 {tag = %0} : i32\ncore.sink %0, %1\n",
     "expected a value, got '%0'", 2, 29),
]


@pytest.mark.parametrize("text,msg,line,col", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_errors(text: str, msg: str, line: int, col: int):
    e = err(text)
    assert msg in e.message, e.format()
    assert e.loc.file == "t.uop"
    assert where(e) == (line, col), e.format()
    lines = text.split("\n")
    if line <= len(lines) and lines[line - 1]:
        assert e.diagnostics[0].source_line == lines[line - 1]
        assert e.format().splitlines()[2] == " " * (col - 1) + "^"


def test_error_format_has_caret():
    e = err("%0 = core.const 1.0 : f32\n%1 = core.add %0, %7 : f32\n", "f.uop")
    assert e.format() == ("f.uop:2:19: error: use of undefined value '%7'\n"
                          "%1 = core.add %0, %7 : f32\n"
                          "                  ^")


def test_arity_text_variadic():
    e = err("%0 = core.const 1 : index\n%1 = kernel.end %0 : index\n")
    assert e.message == "'kernel.end' takes at least 2 operands, got 1"


def test_region_count_error():
    e = err("%0 = testtext.reg2 ({\n  core.sink\n}) ({\n  core.sink\n}) ({\n  core.sink\n})\n")
    assert e.message == "'testtext.reg2' takes 2 regions, got 3" and where(e) == (1, 6)


def test_not_text():
    with pytest.raises(IRError):
        parse_ir(b"%0 = core.sink")  # type: ignore[arg-type]


# ---- fuzz: every mutation of valid text ends in a located IRError or a graph, nothing else ---------------------------
def _fuzz_texts() -> list[str]:
    g1 = parse_ir(KERNEL_CALL)
    g2 = parse_ir(DESIGN_EXAMPLE)
    a = leaf(1)
    g3 = UOp.sink(UOp(POS2, I32, (a, a), (7, "y", -0.0, 'q"\\\n')).replace(tag=(1, "x")),
                  UOp(REG2, VOID, (), (UOp.sink(leaf(2)), UOp.sink(UOp.const(F32.vec(2), (math.nan, 1e300))), "k")))
    return [print_ir(g, gen) for g in (g1, g2, g3) for gen in (False, True)]


JUNK = ["%", '"', "{", "}", "(", ")", "[", "]", ",", "=", ":", "->", "<", ">", "\n", "({", "})", "//", "é", "\u2028",
        "\x00", "9" * 5000, "-", ".", "tensor<", "vector<0xf32>", "ptr<f32, foo>", "[" * 3000, "({\n" * 100, "inf",
        "nan", "1e999", "0x", "%0", "%999", "core.add", "\\", '"\\q"', "tag", " ", "\t", "\r", "// -----"]


def _mutate(r: random.Random, t: str) -> str:
    k = r.randrange(7)
    if k == 0:
        i = r.randrange(len(t))
        return t[:i] + t[i + r.randrange(1, 4):]
    if k == 1:
        i = r.randrange(len(t) + 1)
        return t[:i] + r.choice(JUNK) + t[i:]
    toks = list(TOKEN_RE.finditer(t))
    a, b = r.choice(toks), r.choice(toks)
    if k == 2:
        return t[:a.start()] + t[a.end():]
    if k == 3:
        return t[:a.start()] + a.group() + " " + t[a.start():]
    if k == 4 and a.end() <= b.start():
        return t[:a.start()] + b.group() + t[a.end():b.start()] + a.group() + t[b.end():]
    ls = t.split("\n")
    i, j = r.randrange(len(ls)), r.randrange(len(ls))
    if k == 5:
        ls[i], ls[j] = ls[j], ls[i]
    else:
        ls.insert(i, ls[j])
    return "\n".join(ls)


def test_fuzz_only_irerror():
    r = random.Random(1234)
    texts = _fuzz_texts()
    n_err = 0
    for _ in range(3000):
        t = r.choice(texts)
        for _ in range(r.randrange(1, 4)):
            t = _mutate(r, t)
        try:
            u = parse_ir(t, "fz.uop")
        except IRError as e:
            n_err += 1
            assert e.loc is not None and e.loc.file == "fz.uop" and e.loc.line >= 1 and e.loc.col >= 1
            assert "internal parser error" not in e.message, (e.format(), t)
            e.format()
        else:
            assert isinstance(u, UOp)
            assert parse_ir(print_ir(u)) is u
    assert n_err > 1000


# ---- number grammar, one whatever the spacing (issue 8, item 7) ------------------------------------------------------
def test_number_grammar_does_not_depend_on_spacing():
    for tok in ["1_0", "0x1_0", "1e5_0", "1_000.5"]:
        fast, slow = err(f"%0 = testtext.leaf {tok} : i32\n"), err(f"%0 = testtext.leaf  {tok}  : i32\n")
        assert fast.message == slow.message == f"invalid number '{tok}' ('_' digit separators are not allowed)"
    for tok, v in [("0x1F", 31), ("-0x10", -16), ("0012", 12), ("7", 7)]:
        assert parse_ir(f"%0 = testtext.leaf {tok} : i32\n") is parse_ir(f"%0 = testtext.leaf  {tok}  : i32\n")
        assert parse_ir(f"%0 = testtext.leaf {tok} : i32\n").arg == v


def test_longest_accepted_hex_literal_prints_and_round_trips():
    u = parse_ir("%0 = testtext.leaf 0x" + "f" * 3000 + " : i32\n")  # 12000 bits: about 3600 decimal digits
    assert u.arg == 16 ** 3000 - 1
    assert parse_ir(print_ir(u)) is u


# ---- locations belong to a parse, not to a shared node (issue 8, item 9) ---------------------------------------------
_BAD_ADD = "%0 = core.const 1.0 : f32\n%1 = core.const 1 : i32\n%2 = core.add %0, %1 : f32\n"


def test_locations_do_not_leak_from_a_later_file():
    # regression: locations were stored per hash-consed node, so after parsing a.uop and then b.uop holding the
    # same ops, verifying a.uop's graph pointed into b.uop
    from uopir.ir.verify import collect_diagnostics
    a = parse_ir(_BAD_ADD + "core.sink %2\n", "a.uop")
    b = parse_ir("// b has the same ops further down\n\n" + _BAD_ADD + "%3 = core.const 2 : i32\ncore.sink %2, %3\n",
                 "b.uop")
    assert a.src[0] is b.src[0]  # the very same node
    (da,) = collect_diagnostics(a)
    assert str(da.loc) == "a.uop:3:1" and da.source_line == "%2 = core.add %0, %1 : f32"
    (db,) = collect_diagnostics(b)
    assert str(db.loc) == "b.uop:5:1" and db.source_line == "%2 = core.add %0, %1 : f32"
    assert str(get_loc(a.src[0])) == "b.uop:5:1"  # outside any parse's scope: the newest parse that wrote the node


def test_located_picks_the_file_when_two_parses_return_the_same_root():
    from uopir.ir.diagnostics import diag_at, located, source_map
    from uopir.ir.verify import collect_diagnostics
    a = parse_ir(_BAD_ADD + "core.sink %2\n", "a.uop")
    sm_a = source_map(a)
    b = parse_ir("\n\n" + _BAD_ADD + "core.sink %2\n", "b.uop")
    assert a is b and source_map(a) is not sm_a
    assert str(collect_diagnostics(a)[0].loc) == "b.uop:5:1"  # the newest parse of this root
    with located(sm_a):
        assert str(collect_diagnostics(a)[0].loc) == "a.uop:3:1"
        d = diag_at(a.src[0], "from a pass")  # what a pass's ctx.error(u, ...) builds
        assert str(d.loc) == "a.uop:3:1" and d.source_line == "%2 = core.add %0, %1 : f32"
        assert diag_at(UOp.const(F32, 12345.0), "new node").loc is None  # a node this parse never wrote
        with located(b):  # a root inside an explicit scope: the enclosing scope wins
            assert str(get_loc(a.src[0])) == "a.uop:3:1"


def test_split_chunks_with_the_same_ops_keep_their_own_lines():
    from uopir.ir.verify import collect_diagnostics
    text = _BAD_ADD + "core.sink %2\n// -----\n" + _BAD_ADD + "%3 = core.const 5 : i32\ncore.sink %2, %3\n"
    (c1, t1), (c2, t2) = split_input(text)
    r1, r2 = parse_ir(t1, "s.uop", c1), parse_ir(t2, "s.uop", c2)
    assert str(collect_diagnostics(r1)[0].loc) == "s.uop:3:1"
    assert str(collect_diagnostics(r2)[0].loc) == "s.uop:8:1"


def test_a_parse_map_and_its_text_go_with_the_graph():
    import gc
    import weakref

    from uopir.ir.diagnostics import source_map
    root = parse_ir("%0 = testtext.leaf 424242 : i32\ncore.sink %0\n", "gone.uop")
    sm = weakref.ref(source_map(root))
    assert sm() is not None and sm().line(1) == "%0 = testtext.leaf 424242 : i32"
    del root
    gc.collect()
    assert sm() is None


# ---- memory (issue 8, item 6) ----------------------------------------------------------------------------------------
def test_parsed_source_text_is_not_kept_forever():
    # regression: every parsed file's lines stayed in a global table (2000 files of 20 KB kept about 63 MB)
    import gc
    import tracemalloc
    body = "// " + "x" * 60 + "\n"
    texts = [f"%0 = testtext.leaf {k} : i32\n" + body * 300 for k in range(120)]  # 120 files of about 20 KB
    parse_ir(texts[0], "warm.uop")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k, t in enumerate(texts):
            parse_ir(t, f"file{k}.uop")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    total = sum(map(len, texts))
    assert kept < total / 4, f"kept {kept} bytes after parsing {total} bytes of text"  # a few recent files only


def test_long_string_literal_is_scanned_in_linear_memory():
    # regression: the string-literal regex kept backtracking state per char (a 4 MB literal peaked near 500 MB)
    import tracemalloc
    n = 1 << 20
    for body, value, bound in (("abcd" * (n // 4), "abcd" * (n // 4), 8), ("ab\\n" * (n // 4), "ab\n" * (n // 4), 32)):
        text = '%0 = testtext.pos2 1, x {s = "' + body + '"} : i32\n'
        tracemalloc.start()
        try:
            u = parse_ir(text)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert u.arg[3] == value
        assert peak < bound * len(text), f"peak {peak} bytes for a {len(text)}-byte line"
    for t in ('"' + "a" * n + '"', '"' + "a" * n, "tensor<" + "4x" * (n // 2) + "f32>"):
        tracemalloc.start()
        try:
            toks = TOKEN_RE.findall(t)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert toks[0][0] in '"t' and peak < 4 * len(t), (t[:10], peak)


def test_pass_diagnostics_point_into_the_file_the_pipeline_runs_on():
    # PassManager.run scopes diagnostics to its input's parse, so a later parse holding the same ops (still alive)
    # does not steal the location of a pass's diagnostic
    import os

    from uopir.passes.manager import PassManager
    os.environ.setdefault("UOPIR_TEST_PASSES", "1")
    text = "%0 = core.const 1 : i32\n%1 = core.const 2 : i32\n%2 = core.add %0, %1 : i32\ncore.sink %2\n"
    a = parse_ir(text, "a.uop")
    b = parse_ir("// b\n\n" + text.replace("core.sink %2", "%3 = core.const 7 : i32\ncore.sink %2, %3"), "b.uop")
    assert a.src[0] is b.src[0]
    pm = PassManager.parse("test-diagnostics{op=core.add}")
    pm.run(a)
    (d,) = pm.report.diagnostics
    assert str(d.loc) == "a.uop:3:1"
    pm.run(b)
    (d,) = pm.report.diagnostics
    assert str(d.loc) == "b.uop:5:1"
