"""Custom pretty forms (uopir.ir.syntax): a declarative format and print/parse functions round-trip like the
built-in ops (pretty -> parse -> the same UOps; generic -> parse -> the same pretty text), and bad formats or bad
lines are located errors."""
from __future__ import annotations

import pytest

from uopir.dialects.core import elementwise_shape
from uopir.ir.diagnostics import IRError
from uopir.ir.ops import REGISTRY, def_op
from uopir.ir.parser import parse_ir
from uopir.ir.printer import print_ir
from uopir.ir.registration import RegistrationError
from uopir.ir.syntax import SYNTAX, register_syntax

SRC = """%0 = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>
%1 = tensor.buffer {id = 1, device = "python"} : tensor<4xf32>
%2 = testsyn.fma %0 * %1 + %0 : tensor<4xf32>
%3 = testsyn.clamp %2 between [%0 .. %1] : tensor<4xf32>
core.sink %3
"""


@pytest.fixture(scope="module")
def ops():
    fma = def_op("testsyn.fma", 3, shape=elementwise_shape, operands=("a", "b", "c"), summary="a * b + c")
    clamp = def_op("testsyn.clamp", 3, shape=elementwise_shape, summary="x between lo and hi")
    register_syntax(fma, "$a * $b + $c")

    def parse(c):  # `%x between [%lo .. %hi]`, written by hand
        x = c.operand()
        if c.peek() != "between":
            c.error(f"expected 'between', got '{c.peek()}'")
        c.expect("between")
        c.expect("[")
        lo = c.operand()
        c.expect(".")
        c.expect(".")
        hi = c.operand()
        c.expect("]")
        return [x, lo, hi]

    register_syntax(clamp, print_fn=lambda u, n: f"{n[0]} between [{n[1]} .. {n[2]}]", parse_fn=parse)
    yield fma, clamp
    for op in (fma, clamp):
        SYNTAX.pop(op)
        REGISTRY.pop(op.name)


def test_custom_forms_round_trip(ops) -> None:
    fma, clamp = ops
    root = parse_ir(SRC)
    assert root.src[0].op is clamp and root.src[0].src[0].op is fma
    assert print_ir(root) == SRC
    generic = print_ir(root, generic=True)
    assert '"testsyn.fma"(%0, %1, %0)' in generic
    assert parse_ir(generic) is root and parse_ir(print_ir(root)) is root


@pytest.mark.parametrize("line,message", [
    ("%2 = testsyn.fma %0, %1, %0 : tensor<4xf32>", "3:20: error: expected '*', got ','"),
    ("%2 = testsyn.fma %0 * %1 + %7 : tensor<4xf32>", "3:28: error: use of undefined value '%7'"),
    ("%2 = testsyn.clamp %0 within [%0 .. %1] : tensor<4xf32>", "3:23: error: expected 'between', got 'within'"),
])
def test_a_line_off_the_form_is_a_located_error(ops, line: str, message: str) -> None:
    lines = SRC.splitlines()
    text = "\n".join([*lines[:2], line, "core.sink %2"]) + "\n"
    with pytest.raises(IRError) as e:
        parse_ir(text, "f.uop")
    assert str(e.value).splitlines()[0] == f"f.uop:{message}"


def test_bad_formats_are_refused(ops) -> None:
    fma, _ = ops
    op = def_op("testsyn.two", 2, operands=("x", "y"), summary="t")
    try:
        with pytest.raises(RegistrationError, match=r"'\$z' is not an operand \(operands: \$x, \$y\)"):
            register_syntax(op, "$x + $z")
        with pytest.raises(RegistrationError, match="must name each of its 2 operands once"):
            register_syntax(op, "$x + $x")
        with pytest.raises(RegistrationError, match="'{' cannot be a literal"):
            register_syntax(op, "$x { $y")
        with pytest.raises(RegistrationError, match=r"custom syntax of op 'testsyn.fma' is already registered"):
            register_syntax(fma, "$a $b $c")
    finally:
        REGISTRY.pop("testsyn.two")
