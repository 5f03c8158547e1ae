"""Capabilities, not branches (issue 11 item 4): the generic passes read what a target can do from its description
(uopir.passes.target.Target), never which backend it is.

1. A source scan of uopir/passes: no comparison, membership test, match case or dict key uses a backend or device
   name, and no other code names a backend (docstrings, option help texts and the target registry excepted).
2. Two targets that differ in ONE capability lower the same program differently, in the way that capability says,
   and both lowerings compute the same values.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.buffers import graph_buffers
from uopir.backends.differential import backend_status
from uopir.backends.python.interpreter import evaluate
from uopir.backends.registry import BACKENDS, get_backend
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects.semantics import values_equal
from uopir.ir.dtype import dtypes
from uopir.ir.regions import regions_of
from uopir.ir.uop import UOp
from uopir.passes.manager import PassManager
from uopir.passes.target import ALL_DTYPES, CPU, register_target
from uopir.tools.uop_run import run_schedule

PASSES = Path(__file__).resolve().parent.parent / "uopir" / "passes"
NAMES = frozenset(BACKENDS) | {"cpu", "gpu", "host"}  # devices and target names: never compared, matched or keys
# Names no code may even mention: the backends ("c" is also every pattern's favourite variable name, `UPat.cvar("c")`,
# so it counts only where compared or used as a key). The generic targets cpu and gpu are descriptions, not
# backends: a pass option may default to one (`target: str = "cpu"`).
MENTIONED = frozenset(BACKENDS) - {"c"}
# The modules that define and register the target descriptions: naming devices is their job.
REGISTRY_MODULES = frozenset({"target.py"})
# Mentions that are data, not branches, each with its reason (the list may only shrink).
EXEMPT: dict[tuple[str, str], str] = {
    ("tensor_to_kernel/schedule.py", "python"):
        "the device label put on a new buffer when the graph names no device at all (a label, not a branch)",
}
# Fields of a Target that are capabilities even though their values are words: the execution model ("cpu": loops,
# "gpu": hardware thread ids) is what a description says, not which backend reads it.
CAPABILITY_ATTRS = frozenset({"kind"})


def _strs(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strs(e)]
    return []


def _docstring_and_help_nodes(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings or `metadata={"help": ...}` texts."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value in ("help", "summary"):
                    skip.update(id(n) for n in ast.walk(v))
        if isinstance(node, ast.keyword) and node.arg in ("summary", "help"):
            skip.update(id(n) for n in ast.walk(node.value))
        if isinstance(node, ast.JoinedStr):  # messages (f-strings) may name a target
            skip.update(id(n) for n in ast.walk(node))
    return skip


def name_uses(source: str, filename: str = "<src>") -> list[tuple[int, str, str]]:
    """(line, name, how) for every use of a backend/target name in code that could be a branch on it."""
    tree = ast.parse(source, filename)
    skip = _docstring_and_help_nodes(tree)
    found: list[tuple[int, str, str]] = []
    branch_ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr in CAPABILITY_ATTRS for s in sides):
                branch_ids.update(id(n) for s in sides for n in ast.walk(s))
                continue
            for s in sides:
                for v in _strs(s):
                    if v in NAMES:
                        found.append((node.lineno, v, "compared"))
                branch_ids.update(id(n) for n in ast.walk(s))
        elif isinstance(node, ast.match_case):
            for n in ast.walk(node.pattern):
                if isinstance(n, ast.MatchValue):
                    for v in _strs(n.value):
                        if v in NAMES:
                            found.append((n.lineno, v, "match case"))
                    branch_ids.update(id(x) for x in ast.walk(n.value))
        elif isinstance(node, ast.Dict):
            for k in node.keys:
                if k is not None:
                    for v in _strs(k):
                        if v in NAMES:
                            found.append((k.lineno, v, "dict key"))
                            branch_ids.add(id(k))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MENTIONED \
                and id(node) not in skip and id(node) not in branch_ids:
            found.append((node.lineno, node.value, "named"))
    return sorted(found)


def test_the_scan_sees_branches_on_names():
    """The scan itself: each way of branching on a backend is found; capability reads and docstrings are not."""
    bad = '''
def f(t, options):
    if t.name == "c":
        return 1
    if options.target in ("llvm", "opencl"):
        return 2
    match t.name:
        case "cuda":
            return 3
    widths = {"python": 1, "gpu": 4}
    return widths.get(t.name, "mlir")
'''
    assert [(n, how) for _, n, how in name_uses(bad)] == [
        ("c", "compared"), ("llvm", "compared"), ("opencl", "compared"), ("cuda", "match case"),
        ("gpu", "dict key"), ("python", "dict key"), ("mlir", "named")]
    good = '''
"""Lowers for the c backend, cuda too."""
from dataclasses import field
def f(t, u):
    """On "cuda" this is a special."""
    if t.kind == "gpu" and t.has_local and u.op.name == "core.sink":
        return t.vector_width(u.dtype)
    x = field(default="cpu", metadata={"help": "a target: cpu, gpu, c"})
    pat = UPat.cvar("c")
    raise ValueError(f"target {t.name!r} is not 'c'")
'''
    assert name_uses(good) == []


def test_no_generic_pass_branches_on_a_backend_name():
    found = []
    used_exempt = set()
    for path in sorted(PASSES.rglob("*.py")):
        rel = path.relative_to(PASSES).as_posix()
        if rel in REGISTRY_MODULES:
            continue
        for line, name, how in name_uses(path.read_text(encoding="utf-8"), str(path)):
            if (rel, name) in EXEMPT:
                used_exempt.add((rel, name))
                continue
            found.append(f"uopir/passes/{rel}:{line}: {how} {name!r}")
    assert not found, "a generic pass names a backend; read a capability of the Target instead:\n" + "\n".join(found)
    assert used_exempt == set(EXEMPT), f"stale exemptions: {set(EXEMPT) - used_exempt}"


# ---- one capability apart --------------------------------------------------------------------------------------------
BASE = CPU.derive(name="test-caps-base", max_vector_bytes=0)
NO_F16 = BASE.derive(name="test-caps-no-f16", dtypes=ALL_DTYPES - {dtypes.float16})
NO_BF16 = BASE.derive(name="test-caps-no-bf16", dtypes=ALL_DTYPES - {dtypes.bfloat16})
NO_MULACC = BASE.derive(name="test-caps-no-mulacc", native_ops=frozenset(C.ALU_OPS) - {C.MULACC})
VEC = BASE.derive(name="test-caps-vec", max_vector_bytes=32)
for _t in (BASE, NO_F16, NO_BF16, NO_MULACC, VEC):
    register_target(_t, replace=True)


def _lower(graph: UOp, target: str) -> UOp:
    return PassManager.parse(f"default{{target={target}}}").run(graph)


def _programs(lowered: UOp) -> list[UOp]:
    """The device programs of a lowered schedule (the bodies of its calls)."""
    return [r for u in lowered.toposort() for r in regions_of(u) if r.op is D.PROGRAM]


def _arith(lowered: UOp, scalar) -> set[str]:
    """Names of the arithmetic ops (core ALU, not casts) computing in `scalar` anywhere in the lowered graph."""
    out = set()
    for p in _programs(lowered):
        for u in p.toposort():
            if u.op in C.ALU_OPS and (u.dtype.scalar is scalar or any(s.dtype.scalar is scalar for s in u.src)):
                out.add(u.op.name)
    return out


def _inputs(graph: UOp) -> dict[int, np.ndarray]:
    return {i: b.numpy() for i, b in graph_buffers(graph).items()}


def _run(lowered: UOp, graph: UOp, backend: str = "python") -> list[np.ndarray]:
    """The lowered schedule run kernel by kernel on a backend (as uop-run runs it)."""
    return run_schedule(get_backend(backend), lowered, _inputs(graph), {})


def _f16_program(dtype: str) -> UOp:
    rng = np.random.default_rng(5)
    a = Tensor(rng.standard_normal((4, 8)).astype(np.float32), device="python").cast(dtype)
    b = Tensor(rng.standard_normal((8,)).astype(np.float32), device="python").cast(dtype)
    outs = ((a * b + a).maximum(b), (a / (b.abs() + 1)).sqrt(), a < b, a @ a.transpose(), -a)
    return UOp.sink(*(t.uop for t in outs))


@pytest.mark.parametrize("narrow,target", [("float16", NO_F16), ("bfloat16", NO_BF16)], ids=["f16", "bf16"])
def test_a_target_without_a_half_type_computes_it_in_f32(narrow, target):
    graph = _f16_program(narrow)
    full, emulated = _lower(graph, BASE.name), _lower(graph, target.name)
    d = dtypes.from_name(narrow)
    assert {"core.add", "core.mul", "core.fdiv", "core.max", "core.cmplt", "core.sqrt"} <= _arith(full, d)
    assert _arith(emulated, d) == set()  # no arithmetic in the missing dtype: only loads, stores and casts
    assert {"core.add", "core.mul", "core.fdiv", "core.max", "core.cmplt", "core.sqrt"} <= \
        _arith(emulated, dtypes.float32)
    # and it is exact: both lowerings give the reference interpreter's values, bit for bit
    ref = evaluate(graph, _inputs(graph))
    for lowered in (full, emulated):
        got = _run(lowered, graph)
        assert all(values_equal(g, r) for g, r in zip(got, ref, strict=True))


def test_other_targets_keep_their_f16_arithmetic():
    graph = _f16_program("float16")
    assert _arith(_lower(graph, NO_BF16.name), dtypes.float16)  # removing bf16 leaves f16 alone


def test_a_target_without_mulacc_gets_mul_and_add():
    a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="python")
    x = UOp(C.MULACC, a.uop.dtype, (a.uop, a.uop, a.uop))
    graph = UOp.sink(x)
    with_, without = _lower(graph, BASE.name), _lower(graph, NO_MULACC.name)
    ops = lambda g: {u.op.name for p in _programs(g) for u in p.toposort()}  # noqa: E731
    assert "core.mulacc" in ops(with_) and "core.mulacc" not in ops(without)
    assert {"core.mul", "core.add"} <= ops(without)
    ref = evaluate(graph, _inputs(graph))
    for lowered in (with_, without):
        assert all(values_equal(g, r) for g, r in zip(_run(lowered, graph), ref, strict=True))


def test_vector_width_is_read_from_the_target():
    a = Tensor(np.arange(64, dtype=np.float32), device="python")
    graph = UOp.sink((a * 2 + 1).uop)
    lanes = lambda g: max(u.dtype.count for p in _programs(g) for u in p.toposort() if u.dtype.scalar  # noqa: E731
                          is dtypes.float32)
    assert lanes(_lower(graph, BASE.name)) == 1  # max_vector_bytes=0: scalar code
    wide = _lower(graph, VEC.name)
    assert lanes(wide) <= VEC.vector_width(dtypes.float32) == 8


def test_the_c_backend_runs_an_emulated_f16_program():
    """Where a C compiler is present: the f32-emulated f16 program runs on c too and matches the reference."""
    if "c" not in [s.name for s in backend_status() if s.available]:
        pytest.skip("the c backend is not available here")
    graph = _f16_program("float16")
    ref = evaluate(graph, _inputs(graph))
    got = _run(_lower(graph, NO_F16.name), graph, "c")
    assert all(values_equal(g, r) for g, r in zip(got, ref, strict=True))
