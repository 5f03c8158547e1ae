"""The visualizer's rewrite trace (uopir.ir.trace): recorded steps replay to the recorded graphs, the JSON is
self-consistent and round-trips, the texts parse back to the recorded graphs, and tracing changes no result.
Also `uop-opt --viz` and `--view-op-graph` (Graphviz dot, rendered by `dot -Tsvg` where Graphviz is installed).

The replay works on the JSON alone (node ids, no UOps): starting from a rewrite call's input it rebuilds nodes on
rewritten sources and applies the recorded (before -> after) steps the way graph_rewrite applies patterns (top-down:
sources first; bottom-up: the node first), so a step that is missing or wrong shows as a different output id.
"""
from __future__ import annotations

import functools
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends import get_backend
from uopir.backends.realize import clear_schedule_cache
from uopir.ir import trace
from uopir.ir.dot import to_dot
from uopir.ir.parser import parse_ir, split_input
from uopir.tools import uop_opt

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# passes made only of graph_rewrite calls (on the graph or on its regions): their steps replay from the pass input to
# its output
PATTERN_PASSES = {"canonicalize", "kernel-simplify", "device-decompose", "device-devectorize"}


# ---- replay on the JSON ----------------------------------------------------------------------------------------------
class _Graph:
    """The trace's node table with hash-consing by (op, dtype, arg, tag, sources, regions), growing as a replay
    builds nodes the trace does not hold (negative ids)."""

    def __init__(self, nodes: dict[str, dict[str, Any]]):
        self.rows = {int(k): v for k, v in nodes.items()}
        self.src = {i: tuple(r["src"]) for i, r in self.rows.items()}
        self.regions = {i: tuple(r.get("regions", ())) for i, r in self.rows.items()}
        self.key = {i: (r["op"], r["dtype"], r["arg"], r.get("tag")) for i, r in self.rows.items()}
        self.by_key = {(self.key[i], self.src[i], self.regions[i]): i for i in self.rows}
        self.fresh = -1

    def rebuild(self, i: int, src: tuple[int, ...], regions: tuple[int, ...] | None = None) -> int:
        regions = self.regions[i] if regions is None else regions
        if src == self.src[i] and regions == self.regions[i]:
            return i
        k = (self.key[i], src, regions)
        got = self.by_key.get(k)
        if got is None:
            got = self.by_key[k] = self.fresh
            self.key[got], self.src[got], self.regions[got] = self.key[i], src, regions
            self.fresh -= 1
        return got

    def replay(self, root: int, subs: dict[int, int], bottom_up: bool) -> int:
        memo: dict[int, int] = {}
        stack: list[tuple[int, int, int]] = [(root, 0, 0)]
        while stack:
            n, stage, x = stack.pop()
            if stage == 0:
                if n in memo:
                    continue
                x = n
                if bottom_up:
                    while x in subs:
                        x = subs[x]
                    if x != n and x in memo:
                        memo[n] = memo[x]
                        continue
                todo = [s for s in self.src[x] if s not in memo]
                stack.append((n, 1, x))
                stack.extend((s, 0, 0) for s in reversed(todo))
            elif stage == 1:
                m = self.rebuild(x, tuple(memo[s] for s in self.src[x]))
                if not bottom_up:
                    while m in subs:
                        m = subs[m]
                if m == x and (bottom_up or all(memo.get(s) == s for s in self.src[m])):
                    memo[n] = m
                elif m in memo:
                    memo[n] = memo[m]
                else:
                    stack.append((n, 2, m))
                    stack.append((m, 0, 0))
            else:
                memo[n] = memo[x]
        return memo[root]

    def substitute(self, root: int, old: int, new: int) -> int:
        """root with the node `old` replaced by `new` (once, not to a fixed point), inside regions too (as
        map_regions rebuilds the ops holding a changed region)."""
        memo: dict[int, int] = {old: new}
        stack = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if n in memo:
                continue
            if not ready:
                stack.append((n, True))
                stack.extend((s, False) for s in (*self.src[n], *self.regions[n]) if s not in memo)
                continue
            memo[n] = self.rebuild(n, tuple(memo[s] for s in self.src[n]), tuple(memo[r] for r in self.regions[n]))
        return memo[root]

    def reachable(self, root: int) -> set[int]:
        """The nodes of root's graph, regions included."""
        seen, stack = set(), [root]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend((*self.src[n], *self.regions[n]))
        return seen


def _replay_pass(g: _Graph, p: dict[str, Any]) -> tuple[int, int]:
    """Check every rewrite call of a pass; returns (calls replayed, steps replayed)."""
    steps = p["steps"]
    for k, rw in enumerate(p["rewrites"]):
        subs: dict[int, int] = {}
        for s in steps:
            if s["rewrite"] == k:
                subs.setdefault(s["before"], s["after"])
        got = g.replay(rw["input"], subs, rw["bottom_up"])
        assert got == rw["output"], (f"pass {p['name']}: rewrite call {k} ({rw['matcher']}, {len(subs)} steps) "
                                     f"replays to node {got}, recorded {rw['output']}")
    return len(p["rewrites"]), len(steps)


def _replay_whole_pass(g: _Graph, p: dict[str, Any]) -> None:
    """A pattern-only pass: its rewrite calls, each replacing its input by its output (in the graph or in one of its
    regions) in order from the pass input, give the pass output."""
    for i, (start, end) in enumerate(zip(p["input"], p["output"], strict=True)):
        cur = start
        for k, rw in enumerate(p["rewrites"]):
            if rw["input"] in g.reachable(cur):
                subs = {s["before"]: s["after"] for s in reversed(p["steps"]) if s["rewrite"] == k}
                out = g.replay(rw["input"], subs, rw["bottom_up"])
                cur = out if rw["input"] == cur else g.substitute(cur, rw["input"], out)
        assert cur == end, f"pass {p['name']} (root {i}): its steps replay to node {cur}, recorded {end}"


# ---- the programs ----------------------------------------------------------------------------------------------------
def _relu_sum(dev: str) -> Tensor:
    a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4) - 5, device=dev)
    return (a * 2 + 1).relu().sum(axis=1)


def _matmul(dev: str) -> Tensor:
    a = Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), device=dev)
    b = Tensor(np.linspace(0, 2, 8, dtype=np.float32).reshape(4, 2), device=dev)
    return (a @ b).exp()


def _softmax(dev: str) -> Tensor:
    a = Tensor(np.linspace(-2, 2, 10, dtype=np.float32).reshape(2, 5), device=dev)
    return a.softmax(axis=1)


PROGRAMS = {"relu_sum": (_relu_sum, "c"), "matmul": (_matmul, "c"), "softmax": (_softmax, "python")}


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def recorded(request: pytest.FixtureRequest) -> tuple[str, trace.Tracer, dict[str, Any], np.ndarray, dict]:
    """(program name, the recorder, its trace, the value computed, the id of each UOp in the trace)."""
    build, dev = PROGRAMS[request.param]
    clear_schedule_cache()  # a cached plan would skip the lowering we record
    with trace.tracing(request.param) as tr:
        value = build(dev).numpy()
    ids: dict = {}
    return request.param, tr, tr.to_dict(ids), value, ids


def test_steps_replay_to_the_recorded_output(recorded) -> None:
    name, _, d, _, _ = recorded
    g = _Graph(d["nodes"])
    calls = steps = 0
    for p in d["passes"]:
        c, s = _replay_pass(g, p)
        calls, steps = calls + c, steps + s
        if p["name"] in PATTERN_PASSES:
            _replay_whole_pass(g, p)
    assert calls >= 3 and steps >= 1, (name, calls, steps)  # the programs do fire patterns


def test_trace_json_is_consistent_and_round_trips(recorded) -> None:
    name, tr, d, _, _ = recorded
    again = json.loads(json.dumps(d))
    assert again == d
    assert d["version"] == 1 and d["title"] == name
    nodes = d["nodes"]
    for k, row in nodes.items():
        assert all(s < int(k) for s in row["src"]), "sources are numbered before their users"
        assert row["dialect"] == row["op"].split(".")[0]
        assert all(str(r) in nodes for r in row.get("regions", ()))
    names = [p["name"] for p in d["passes"]]
    dev = PROGRAMS[name][1]
    # the host-cpu pipelines split large reductions first (tensor-split-reduce); the interpreter's does not
    assert names[:3] == ["canonicalize", "tensor-split-reduce", "tensor-to-kernel"] if dev == "c" else \
        names[:2] == ["canonicalize", "tensor-to-kernel"], names
    assert all(p["time_ms"] >= 0 for p in d["passes"])
    if dev == "c":  # the whole lowering, kernel by kernel: one entry per pipeline element, each kernel one root
        assert names[-1] == "device-linearize" and "kernel-to-device" in names, names
        scheduled = tr.passes[names.index("tensor-to-kernel")].outputs[0]
        assert len(d["passes"][-1]["input"]) == sum(1 for u in scheduled.toposort() if u.op.name == "tensor.call")
    for p in d["passes"]:
        assert len(p["input"]) == len(p["output"]) >= 1
        for s in p["steps"]:
            assert str(s["before"]) in nodes and str(s["after"]) in nodes and s["before"] != s["after"]
            assert re.fullmatch(r".+\.py:\d+(, .+\.py:\d+)*", s["location"]), s["location"]
        assert p["stats"] == {k: sum(1 for s in p["steps"] if s["pattern"] == k) for k in p["stats"]}
    fired = {s["pattern"] for p in d["passes"] for s in p["steps"]}
    assert fired, "some pattern fired"
    if dev == "c":  # a compiling backend: the emitted C of each kernel
        assert d["sources"] and all(s["lang"] == "c" and "void" in s["text"] for s in d["sources"])
    else:
        assert d["sources"] == []


def test_texts_parse_back_to_the_recorded_graphs(recorded) -> None:
    _, tr, d, _, ids = recorded
    for rec, p in zip(tr.passes, d["passes"], strict=True):
        for roots, key, names in ((rec.inputs, "before_text", "before_names"), (rec.outputs, "after_text",
                                                                                 "after_names")):
            chunks = [t for _, t in split_input(p[key])]
            assert len(chunks) == len(roots)
            for text, root in zip(chunks, roots, strict=True):
                assert parse_ir(text) is root
            lines = p[key].splitlines()
            k = 0
            for u in roots[0].toposort():  # the top-level block: each node's %name is the line defining it
                if u is roots[0] and u.dtype.name == "void":
                    continue
                nm = f"%{k}"
                k += 1
                assert p[names][str(ids[u])] == nm
                assert any(ln.startswith(f"{nm} = {u.op.name}") for ln in lines), (nm, u.op.name)


def test_tracing_changes_no_result(recorded) -> None:
    name, _, _, traced, _ = recorded
    build, dev = PROGRAMS[name]
    clear_schedule_cache()
    plain = build(dev).numpy()
    np.testing.assert_array_equal(traced, plain)
    ref = {"relu_sum": lambda: np.maximum(2 * (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) + 1, 0).sum(1)}
    if name in ref:
        np.testing.assert_allclose(traced, ref[name]())


def test_tracing_gives_the_same_kernels() -> None:
    """The same device programs (identical UOps, identical C source) with and without tracing."""
    build, _ = PROGRAMS["matmul"]
    be = get_backend("c")
    root = build("c").uop
    clear_schedule_cache()
    plain = be.lower(root)
    with trace.tracing("x") as tr:
        traced = be.lower(root)
    assert traced is plain and tr.passes
    assert trace.ACTIVE is None


# ---- uop-opt ---------------------------------------------------------------------------------------------------------
def _uop_opt(*args: str) -> subprocess.CompletedProcess:
    """uop-opt in this process (main(argv, out, err)): exit code, stdout and stderr as a CompletedProcess."""
    out, err = io.StringIO(), io.StringIO()
    rc = uop_opt.main(list(args), out, err)
    return subprocess.CompletedProcess(["uop-opt", *args], rc, out.getvalue(), err.getvalue())


@functools.cache
def _kernel_graph_dot() -> str:
    r = _uop_opt(str(EXAMPLES / "mlp-forward.uop"), "-p", "canonicalize,tensor-to-kernel", "--view-op-graph")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_uop_opt_viz_writes_the_trace(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    r = _uop_opt(str(EXAMPLES / "relu.uop"), "-p", "default{target=c}", "--emit=c", f"--viz={out}")
    assert r.returncode == 0, r.stderr
    assert f"trace written to {out}" in r.stderr
    d = json.loads(out.read_text())
    assert [p["name"] for p in d["passes"]][-1] == "emit-c"
    assert d["title"] == "relu.uop" and d["sources"] and d["sources"][0]["lang"] == "c"
    g = _Graph(d["nodes"])
    for p in d["passes"]:
        _replay_pass(g, p)
    bad = _uop_opt(str(EXAMPLES / "relu.uop"), "--viz=t.txt")
    assert bad.returncode == 1 and "ends in .json" in bad.stderr and "Traceback" not in bad.stderr


def _counts(dot: str) -> tuple[int, int, int]:
    nodes = len(re.findall(r"^\s*n\d+ \[label=", dot, re.M))
    edges = len(re.findall(r"^\s*n\d+ -> n\d+ \[taillabel=", dot, re.M))
    clusters = len(re.findall(r"subgraph cluster_\d+", dot))
    return nodes, edges, clusters


def test_view_op_graph_counts_nodes_edges_and_regions() -> None:
    text = (EXAMPLES / "mlp-forward.uop").read_text()
    root = parse_ir(text)
    dot = to_dot(root)
    nodes, edges, clusters = _counts(dot)
    topo = root.toposort()
    assert (nodes, edges, clusters) == (len(topo), sum(len(u.src) for u in topo), 0)
    dot2 = _kernel_graph_dot()
    n2, e2, c2 = _counts(dot2)
    assert c2 >= 2 and n2 > nodes // 2  # each kernel body is a cluster
    assert dot2.count("label=region") == c2


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (dot) is not installed")
def test_view_op_graph_renders_with_graphviz() -> None:
    dot = _kernel_graph_dot()
    svg = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=120)
    assert svg.returncode == 0, svg.stderr
    nodes, edges, clusters = _counts(dot)
    assert svg.stdout.count('class="node"') == nodes
    assert svg.stdout.count('class="edge"') == edges + clusters
    assert svg.stdout.count('class="cluster"') == clusters


def test_uopir_viz_env_writes_the_trace_at_exit(tmp_path: Path) -> None:
    """UOPIR_VIZ=PATH.html: the program's realizes are recorded and written at exit (the JSON beside the page)."""
    code = ("import numpy as np; from uopir import Tensor; "
            "print((Tensor(np.arange(6, dtype=np.float32), device='python') * 3).sum().item())")
    env = {**os.environ, "UOPIR_VIZ": str(tmp_path / "out.html")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "45.0"
    written = tmp_path / "out.json"
    assert f"wrote {written}" in r.stderr
    d = json.loads(written.read_text())
    assert [p["name"] for p in d["passes"]][:2] == ["canonicalize", "tensor-to-kernel"] and d["runs"]


def test_pipelines_in_two_threads_record_their_own_steps() -> None:
    """The recorder keeps one stack of running passes per thread: steps of a pipeline never land in another's pass."""
    import threading

    from uopir.passes.manager import PassManager

    texts = [(EXAMPLES / "mlp-forward.uop").read_text(), (EXAMPLES / "relu.uop").read_text()]
    roots = [parse_ir(t) for t in texts]
    with trace.tracing("threads") as tr:
        threads = [threading.Thread(target=lambda r=r: [PassManager.parse("canonicalize").run(r) for _ in range(5)])
                   for r in roots]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    d = tr.to_dict()
    g = _Graph(d["nodes"])
    assert len(d["passes"]) == 10
    assert sorted(len(p["steps"]) for p in d["passes"]) == [3] * 5 + [4] * 5  # each run: its own graph's folds
    for p in d["passes"]:
        _replay_pass(g, p)
        _replay_whole_pass(g, p)


def test_tracing_compiles_each_op_matcher_once() -> None:
    """Regression: the traced table once kept an op's interpreted (first-tier) function, which after HOT_CALLS
    calls regenerated the matcher code on every further call of that graph_rewrite. A spy counts the generations."""
    from uopir.dialects import core  # noqa: F401 - registers core.add
    from uopir.ir.dtype import dtypes
    from uopir.ir.pattern_compiler import HOT_CALLS, PatternMatcher
    from uopir.ir.rewrite import graph_rewrite
    from uopir.ir.uop import UOp
    from uopir.ir.upat import UPat

    pm = PatternMatcher([(UPat("core.add", src=(UPat(name="x"), UPat.cvar("c"))),
                          lambda x, c: x if c.arg == 0 else None)], name="add-zero")
    generated = []
    compile_op = pm._compile_op

    def spy(op, with_names):
        generated.append(op.name)
        return compile_op(op, with_names)

    pm._compile_op = spy
    zero, one = UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, 1)
    x = UOp.const(dtypes.int32, 7)
    for i in range(4 * HOT_CALLS):
        x = x + (zero if i % 2 else one)
    with trace.tracing("hot") as tr:  # steps are recorded inside a pass: open one as the pass manager does
        tr.begin_run("test")
        tr.begin_pass("k", "test", "", x, 0)
        out = graph_rewrite(x, pm)
        tr.end_pass(out)
    assert generated == ["core.add"]
    assert len(tr.passes[0].steps) == 2 * HOT_CALLS  # every add of zero fired once
