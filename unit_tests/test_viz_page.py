"""The visualizer page (uopir.viz) and uop-viz: the trace checks, the CLI, and the page itself in headless Chromium.

The browser tests load the page from disk with `chromium --headless --dump-dom` at several URL hashes (the page keeps
its whole view there: pass, step, search, collapsed nodes, "show all") and read the DOM the page's script built: the
passes listed, the pattern of the chosen step, the node counts of the before/after graphs and of the step's matched
and result subgraphs. They are skipped, with the reason, where no Chromium is installed (tools/run_tests.py installs
Debian's `chromium` when it runs as root). One screenshot is kept as a test artifact: test-artifacts/viz-page.png.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import uopir.backends  # noqa: F401 - registers the targets the pipelines name
from uopir import PassManager, parse_ir
from uopir.ir.trace import tracing
from uopir.tools import uop_viz
from uopir.viz import TraceError, load_trace, render_page, validate_trace, write_page

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (Debian package `chromium`; "
                                                             "tools/run_tests.py installs it when run as root)")


def _reach(nodes: dict, roots: list) -> set[str]:
    """Ids reachable from roots through sources and regions (the test's own walk, not the page's)."""
    seen: set[str] = set()
    stack = [str(r) for r in roots]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(str(s) for s in nodes[i]["src"] + nodes[i].get("regions", []))
    return seen


@pytest.fixture(scope="module")
def relu_trace() -> dict:
    """The real trace of `canonicalize,dce` on examples/relu.uop: relu(x) * (2 * 3 - 5) -> relu(x)."""
    root = parse_ir((ROOT / "examples" / "relu.uop").read_text())
    with tracing("relu.uop") as tr:
        PassManager.parse("canonicalize,dce").run(root)
    return json.loads(json.dumps(tr.to_dict()))  # as the page gets it: through JSON


@pytest.fixture(scope="module")
def mlp_trace() -> dict:
    """The real trace of the C pipeline on examples/mlp-forward.uop: tensor -> kernels -> device programs."""
    root = parse_ir((ROOT / "examples" / "mlp-forward.uop").read_text())
    with tracing("mlp-forward.uop") as tr:
        PassManager.parse("default{target=c}").run(root)
    return json.loads(json.dumps(tr.to_dict()))


def _big_trace() -> dict:
    """A hand-made one-pass trace over the page's node cap (200): a chain of 260 adds and a call of a 30-op kernel."""
    nodes: dict[str, dict] = {"0": {"op": "tensor.buffer", "dialect": "tensor", "dtype": "f32", "arg": "0", "src": [],
                                    "name": "%0"}}
    for i in range(1, 261):
        nodes[str(i)] = {"op": "core.add", "dialect": "core", "dtype": "f32", "arg": None, "src": [i - 1, i - 1],
                         "name": f"%{i}"}
    body = list(range(300, 330))
    nodes["300"] = {"op": "kernel.param", "dialect": "kernel", "dtype": "ptr", "arg": "0", "src": [], "name": None}
    for i in body[1:]:
        nodes[str(i)] = {"op": "core.neg", "dialect": "core", "dtype": "f32", "arg": None, "src": [i - 1], "name": None}
    nodes["400"] = {"op": "kernel.def", "dialect": "kernel", "dtype": "void", "arg": '"k0"', "src": [329], "name": None}
    nodes["401"] = {"op": "tensor.call", "dialect": "tensor", "dtype": "f32", "arg": "{...}", "src": [0],
                    "regions": [400], "name": "%261"}
    nodes["402"] = {"op": "core.sink", "dialect": "core", "dtype": "void", "arg": None, "src": [260, 401], "name": None}
    p = {"name": "identity", "options": "", "time_ms": 0.5, "input": [402], "output": [402], "before_text": "",
         "after_text": "", "steps": [{"pattern": "deep", "location": "x.py:1", "before": 5, "after": 5}]}
    return {"version": 1, "title": "big", "nodes": nodes, "passes": [p], "sources": []}


# ---- the trace checks and the CLI (no browser) ---------------------------------------------------------------------
@pytest.mark.parametrize("bad, words", [
    ([], "not a visualizer trace"),
    ({"nodes": {}, "passes": []}, "missing 'version'"),
    ({"version": 2, "nodes": {}, "passes": []}, "trace version 2 is not supported"),
    ({"version": 1, "nodes": {"0": {"op": "core.add", "src": [7]}}, "passes": []}, "nodes['0'].src names node 7"),
    ({"version": 1, "nodes": {}, "passes": [{"name": "p", "input": [3], "output": [], "steps": []}]},
     "passes[0].input names node 3"),
    ({"version": 1, "nodes": {"0": {"op": "core.sink", "src": []}},
      "passes": [{"name": "p", "input": [0], "output": [0], "steps": [{"pattern": "x", "before": 0, "after": 9}]}]},
     "passes[0].steps[0].after names node 9"),
])
def test_bad_traces_are_refused_with_where_and_why(bad: object, words: str) -> None:
    with pytest.raises(TraceError, match=re.escape(words)):
        validate_trace(bad)


def test_page_is_self_contained_and_embeds_the_trace(relu_trace: dict, tmp_path: Path) -> None:
    relu_trace = dict(relu_trace, title="</script><b>x</b>")  # a title that would end the script element
    page = write_page(relu_trace, tmp_path / "page.html").read_text()
    assert "<link" not in page and not re.search(r"(src|href)=[\"']?https?:", page)  # nothing from the network
    assert page.count("</script>") == 3  # the trace, dagre, the page's script: nothing ended early
    data = re.search(r'<script type="application/json" id="uopir-trace">(.*?)</script>', page, re.S).group(1)
    assert json.loads(data) == relu_trace
    assert "Copyright (c) 2012-2014 Chris Pettitt" in page  # dagre's license comment travels with it
    assert "&lt;/script&gt;&lt;b&gt;" in page.split("</title>")[0]


def test_uop_viz_writes_the_page_and_refuses_bad_input(relu_trace: dict, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    trace_path = tmp_path / "t.json"
    trace_path.write_text(json.dumps(relu_trace))
    assert uop_viz.main([str(trace_path), "-o", str(tmp_path / "p.html")]) == 0
    assert "2 passes" in capsys.readouterr().out
    assert (tmp_path / "p.html").read_text() == render_page(load_trace(trace_path))
    (tmp_path / "v2.json").write_text(json.dumps(dict(relu_trace, version=2)))
    for bad, words in ((tmp_path / "v2.json", "trace version 2 is not supported"),
                       (ROOT / "pyproject.toml", "not a visualizer trace (invalid JSON"),
                       (tmp_path / "missing.json", "cannot read")):
        assert uop_viz.main([str(bad), "-o", str(tmp_path / "x.html")]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"uop-viz: error: {bad}") and words in err, err
    assert not (tmp_path / "x.html").exists()
    with socket.socket() as taken:  # a port in use, and one that is no port: said, not a traceback
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert uop_viz.main([str(trace_path), "--port", str(port)]) == 1
        assert f"uop-viz: error: cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert uop_viz.main([str(trace_path), "--port", "99999"]) == 1
    assert "--port 99999 is not a port number" in capsys.readouterr().err


def test_uop_viz_serves_the_page_on_localhost(relu_trace: dict, tmp_path: Path) -> None:
    trace_path = tmp_path / "t.json"
    trace_path.write_text(json.dumps(relu_trace))
    proc = subprocess.Popen([sys.executable, "-m", "uopir.tools.uop_viz", str(trace_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.read().decode() == render_page(relu_trace)
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(url + "trace.json", timeout=10)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


# ---- the page in a browser -----------------------------------------------------------------------------------------
def _chromium(url: str, profile: Path, *extra: str) -> str:
    """The DOM of the page at that URL once its script ran (`--screenshot=...` in extra: a picture too)."""
    args = [CHROMIUM, "--headless", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--virtual-time-budget=5000", *extra]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    r = subprocess.run(args + [url], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.fixture(scope="module")
def doms(relu_trace: dict, mlp_trace: dict, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The DOM at each view the tests read, keyed 'page#hash'; Chromium runs them side by side (its start dominates),
    and takes the screenshot (the MLP's kernel-to-device pass at its second step) into test-artifacts/viz-page.png."""
    if CHROMIUM is None:
        pytest.skip("no Chromium")
    tmp = tmp_path_factory.mktemp("viz")
    with_sources = dict(relu_trace, sources=[{"kernel": "r_4_16", "lang": "c",
                                             "text": "void r_4_16(float* restrict data0) { }\n"}])
    pages = {"relu": write_page(relu_trace, tmp / "relu.html"), "big": write_page(_big_trace(), tmp / "big.html"),
             "src": write_page(with_sources, tmp / "src.html"), "mlp": write_page(mlp_trace, tmp / "mlp.html")}
    views = ["relu#pass=1&step=3", "relu#pass=1&step=1&q=core.mul", "big#pass=1&step=1&q=%25259",
             "big#pass=1&all=1&t=400", "src#view=sources", f"mlp#pass={_lowering(mlp_trace)}&step=2"]
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "viz-page.png"
    shot.unlink(missing_ok=True)
    jobs = [(pages[v.split("#")[0]].as_uri() + "#" + v.split("#")[1], ["--dump-dom"]) for v in views]
    jobs[-1][1].extend(["--window-size=1400,900", f"--screenshot={shot}"])  # the kernel lowering, step 2
    with ThreadPoolExecutor(4) as ex:
        out = list(ex.map(lambda ij: _chromium(ij[1][0], tmp / f"profile{ij[0]}", *ij[1][1]), enumerate(jobs)))
    return dict(zip(views, out, strict=True))


def _by_id(dom: str, el_id: str) -> str:
    """The opening tag and text of the element with that id (the page puts counts in data- attributes)."""
    m = re.search(rf'<[a-z0-9]+ [^>]*id="{el_id}"[^>]*>[^<]*', dom)
    assert m, f"no #{el_id} in the DOM"
    return m.group(0)


def _attr(dom: str, el_id: str, name: str) -> int:
    return int(re.search(rf'data-{name}="(\d+)"', _by_id(dom, el_id)).group(1))


def _drawn(dom: str, graph: str) -> list[str]:
    """The ops of the nodes drawn in one graph pane, in drawing order."""
    start = dom.index(f'id="graph-{graph}"')
    end = dom.index("</svg>", start) if "<svg" in dom[start:start + 400] else start
    return re.findall(r'<g class="node[^"]*" data-id="\d+" data-op="([^"]+)"', dom[start:end])


@needs_chromium
def test_page_steps_through_the_passes_of_a_real_trace(relu_trace: dict, doms: dict[str, str]) -> None:
    canon = relu_trace["passes"][0]
    assert [s["pattern"] for s in canon["steps"]] == ["fold-constant", "fold-constant", "mul-one"]
    n_in, n_out = len(_reach(relu_trace["nodes"], canon["input"])), len(_reach(relu_trace["nodes"], canon["output"]))
    assert (n_in, n_out) == (10, 4)  # 9 ops + the sink; buffer, const 0, max, sink

    dom = doms["relu#pass=1&step=3"]
    assert re.findall(r'<li class="pass[^"]*" data-pass="(\d)"[^>]*><span class="name">([a-z-]+)<', dom) == [
        ("1", "canonicalize"), ("2", "dce")]
    assert '<li class="pass current" data-pass="1"' in dom
    assert _by_id(dom, "step-pattern").endswith(">mul-one")
    assert "uopir/" in _by_id(dom, "step-location")  # where the pattern is written
    assert "step 3 / 3" in _by_id(dom, "step-pos")
    assert (_attr(dom, "before-count", "nodes"), _attr(dom, "before-count", "changed")) == (10, 7)
    assert (_attr(dom, "after-count", "nodes"), _attr(dom, "after-count", "changed")) == (4, 0 + 1)  # the new sink
    assert sorted(_drawn(dom, "before")) == sorted(relu_trace["nodes"][i]["op"] for i in _reach(
        relu_trace["nodes"], canon["input"]))
    # mul-one: core.mul(max, const 1) -> max: the mul and the 1 are replaced, the result is a node that was there
    assert _attr(dom, "step-before-count", "nodes") == 2 and _attr(dom, "step-after-count", "nodes") == 0
    assert sorted(_drawn(dom, "step-before")) == ["core.const", "core.max", "core.mul"]
    assert _drawn(dom, "step-after") == ["core.max"]
    assert re.findall(r'<li class="(step[a-z ]*)" title="uopir/[^"]+">([a-z-]+)</li>', dom) == [
        ("step", "fold-constant"), ("step", "fold-constant"), ("step current", "mul-one")]
    assert re.search(r'<div class="line del"><span class="ln">- \d+</span>%\d+ = core.sub', dom)  # the text diff

    dom = doms["relu#pass=1&step=1&q=core.mul"]
    assert _by_id(dom, "step-pattern").endswith(">fold-constant")
    assert _attr(dom, "search-count", "matches") == 2  # relu(x) * c and 2 * 3
    assert len(re.findall(r'<g class="node[^"]* match', dom)) >= 2
    before = dom[dom.index('id="graph-before"'):dom.index('id="graph-after"')]
    assert re.findall(r'<g class="node[^"]*step-node[^"]*" data-id="\d+" data-op="([^"]+)"', before) == ["core.mul"]
    # 2 * 3 -> 6: the mul and its two constants replaced by one new constant
    assert _attr(dom, "step-before-count", "nodes") == 3 and _drawn(dom, "step-after") == ["core.const"]



def _lowering(trace: dict) -> int:
    """The number (from 1) of the kernel-to-device pass, the lowering with rewrite steps."""
    return next(i for i, p in enumerate(trace["passes"], 1) if p["name"] == "kernel-to-device")


@needs_chromium
def test_page_shows_a_kernel_pipeline_as_recorded(mlp_trace: dict, doms: dict[str, str]) -> None:
    k = _lowering(mlp_trace)
    p, nodes = mlp_trace["passes"][k - 1], mlp_trace["nodes"]
    dom = doms[f"mlp#pass={k}&step=2"]
    assert re.findall(r'data-pass="\d+"[^>]*><span class="name">([a-z-]+)<', dom) == [
        q["name"] for q in mlp_trace["passes"]]
    assert [q["name"] for q in mlp_trace["passes"]][:4] == ["canonicalize", "tensor-split-reduce", "tensor-to-kernel",
                                                             "kernel-simplify"]
    assert len(p["steps"]) > 10  # the kernels are lowered by rewrite steps
    assert _by_id(dom, "step-pattern").endswith(">" + p["steps"][1]["pattern"])
    assert f"step 2 / {len(p['steps'])}" in _by_id(dom, "step-pos")
    n_in, n_out = _reach(nodes, p["input"]), _reach(nodes, p["output"])
    for side, mine, other in (("before", n_in, n_out), ("after", n_out, n_in)):
        assert (_attr(dom, f"{side}-count", "nodes"), _attr(dom, f"{side}-count", "changed")) == (
            len(mine), len(mine - other))
    # over the 200-node cap: each kernel.def drawn collapsed into one node
    defs = sum(nodes[i]["op"] == "kernel.def" for i in n_in)
    assert defs >= 2 and _drawn(dom, "before").count("kernel.def") == defs
    assert len(re.findall(r"kernel\.def \[\+\d+ ops\]", dom[dom.index('id="graph-before"'):])) >= defs
    assert dom.count('<li class="step') == len(p["steps"])


@needs_chromium
def test_page_caps_collapses_and_shows_all(doms: dict[str, str]) -> None:
    dom = doms["big#pass=1&step=1&q=%25259"]  # over the cap: the kernel collapsed, the 200 nodes nearest the root
    assert (_attr(dom, "before-count", "nodes"), _attr(dom, "before-count", "drawn")) == (294, 200)
    # ... and the step's node, 255 adds deep, drawn with what it reads in place of the last ones
    assert re.search(r'<g class="node[^"]*step-node[^"]*" data-id="5" data-op="core.add"', dom)
    assert re.search(r'<g class="node[^"]*" data-id="4" data-op="core.add"', dom)
    assert "kernel.def [+30 ops]" in dom and "kernel.param" not in _drawn(dom, "before")
    assert _attr(dom, "search-count", "matches") == 1  # by %name
    dom = doms["big#pass=1&all=1&t=400"]  # show all, and the kernel clicked open
    assert _attr(dom, "before-count", "drawn") == 294 and "kernel.param" in _drawn(dom, "before")


@needs_chromium
def test_page_shows_the_emitted_sources_and_a_screenshot(doms: dict[str, str]) -> None:
    dom = doms["src#view=sources"]
    assert '<section id="sources-view">' in dom and '<h3 class="kernel">r_4_16 (c)</h3>' in dom
    assert "void r_4_16(float* restrict data0)" in dom and "emitted sources (1)" in dom
    shot = ARTIFACTS / "viz-page.png"  # taken with the mlp view
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
