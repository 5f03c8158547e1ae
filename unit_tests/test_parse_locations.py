"""Diagnostics point into the file each graph came from (issue 24, item 7).

Two files that write the same ops parse to one graph (hash-consing), so the root alone cannot say which file an error
belongs to. Regression: after b.uop (the same ops on other lines) was parsed, a verification error in the graph
parsed from a.uop was located in b.uop, because only the newest parse of a root counted. A caller that holds its own
parse (`parse_with_source_map`) now gives its SourceMap to the verifier and the pass manager, and the tools do.
"""
from __future__ import annotations

import pytest

from uopir import verify
from uopir.ir.diagnostics import IRError, located, source_map
from uopir.ir.parser import parse_ir, parse_with_source_map
from uopir.ir.verify import collect_diagnostics
from uopir.passes.manager import PassManager

BODY = ['%x = tensor.buffer {id = 0, device = "python"} : tensor<3xf32>',
        "%c = core.const 2 : i32",
        "%y = core.mul %x, %c : tensor<3xf32>",  # f32 * i32: the verifier refuses it
        "core.sink %y"]
A = "// a.uop: the error is on line 4\n" + "\n".join(BODY) + "\n"
B = "\n".join(BODY[:2]) + "\n\n\n\n" + "\n".join(BODY[2:]) + "\n"  # b.uop: the same ops, the error on line 6
ERROR = "error: 'core.mul' op operand dtypes differ: f32 vs i32"


def test_the_same_ops_in_two_files_are_one_graph_with_two_maps() -> None:
    a, a_map = parse_with_source_map(A, "a.uop")
    b, b_map = parse_with_source_map(B, "b.uop")
    assert a is b and a_map is not b_map
    mul = a.src[0]
    assert str(a_map.loc(mul)) == "a.uop:4:1" and str(b_map.loc(mul)) == "b.uop:6:1"
    assert source_map(a) is b_map  # what the root alone names: its newest parse
    assert parse_ir(A, "a.uop") is a


def test_verify_locates_in_the_parse_it_is_given() -> None:
    a, a_map = parse_with_source_map(A, "a.uop")
    b, b_map = parse_with_source_map(B, "b.uop")  # parsed after a: it used to take a's diagnostics over
    with pytest.raises(IRError) as e:
        verify(a, source=a_map)
    assert str(e.value) == f"a.uop:4:1: {ERROR}\n{BODY[2]}\n^"
    with pytest.raises(IRError) as e:
        verify(b, source=b_map)
    assert str(e.value) == f"b.uop:6:1: {ERROR}\n{BODY[2]}\n^"
    assert [str(d.loc) for d in collect_diagnostics(a, a_map)] == ["a.uop:4:1"]
    with located(a_map):  # the same, for a block of calls
        assert [str(d.loc) for d in collect_diagnostics(a)] == ["a.uop:4:1"]
    del b, b_map


def test_the_pass_manager_locates_in_the_parse_it_is_given() -> None:
    a, a_map = parse_with_source_map(A, "a.uop")
    b, b_map = parse_with_source_map(B, "b.uop")
    pm = PassManager.parse("test-diagnostics{op=core.mul severity=error}")
    for root, smap, where in ((a, a_map, "a.uop:4:1"), (b, b_map, "b.uop:6:1"), (a, a_map, "a.uop:4:1")):
        with pytest.raises(IRError) as e:
            pm.run(root, source=smap, verify=False, reproducer=False)
        assert [str(d.loc) for d in e.value.diagnostics] == [where]
