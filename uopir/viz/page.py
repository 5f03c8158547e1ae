"""Checks a rewrite trace (version 1) and assembles the visualizer page from it and the files in static/."""
from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

TRACE_VERSION = 1
DAGRE_VERSION = "3.1.3"  # static/dagre.min.js: the npm package @dagrejs/dagre, dist/dagre.min.js
_PASS_KEYS = {"name": str, "input": list, "output": list, "steps": list}
_STEP_KEYS = {"pattern": str, "before": None, "after": None}


class TraceError(ValueError):
    """The input is not a visualizer trace this page can show; the message says where and why."""


def _static(name: str) -> str:
    return resources.files("uopir.viz").joinpath("static", name).read_text(encoding="utf-8")


def validate_trace(trace: Any, where: str = "trace") -> dict:
    """Checks the shape of a version-1 trace (every id it names is a node) and returns it; TraceError otherwise."""
    if not isinstance(trace, dict):
        raise TraceError(f"{where}: not a visualizer trace (a JSON object with 'version', 'nodes', 'passes' expected, "
                         f"got {type(trace).__name__})")
    if "version" not in trace or "nodes" not in trace or "passes" not in trace:
        missing = [k for k in ("version", "nodes", "passes") if k not in trace]
        raise TraceError(f"{where}: not a visualizer trace (missing {', '.join(repr(k) for k in missing)})")
    if trace["version"] != TRACE_VERSION:
        raise TraceError(f"{where}: trace version {trace['version']!r} is not supported (this uopir reads version "
                         f"{TRACE_VERSION})")
    nodes = trace["nodes"]
    if not isinstance(nodes, dict):
        raise TraceError(f"{where}: 'nodes' must be an object of id -> node")
    for nid, n in nodes.items():
        if not isinstance(n, dict) or not isinstance(n.get("op"), str):
            raise TraceError(f"{where}: nodes[{nid!r}] must be an object with a string 'op'")
        for key in ("src", "regions"):
            for s in n.get(key) or ():
                if str(s) not in nodes:
                    raise TraceError(f"{where}: nodes[{nid!r}].{key} names node {s!r}, which is not in 'nodes'")
    if not isinstance(trace["passes"], list):
        raise TraceError(f"{where}: 'passes' must be a list")
    for i, p in enumerate(trace["passes"]):
        at = f"{where}: passes[{i}]"
        if not isinstance(p, dict):
            raise TraceError(f"{at} must be an object")
        for key, typ in _PASS_KEYS.items():
            if not isinstance(p.get(key), typ):
                raise TraceError(f"{at}.{key} missing or not a {typ.__name__}")
        for key in ("input", "output"):
            for r in p[key]:
                if str(r) not in nodes:
                    raise TraceError(f"{at}.{key} names node {r!r}, which is not in 'nodes'")
        for j, s in enumerate(p["steps"]):
            if not isinstance(s, dict) or not isinstance(s.get("pattern"), str):
                raise TraceError(f"{at}.steps[{j}] must be an object with a string 'pattern'")
            for key in ("before", "after"):
                if str(s.get(key)) not in nodes:
                    raise TraceError(f"{at}.steps[{j}].{key} names node {s.get(key)!r}, which is not in 'nodes'")
    for i, s in enumerate(trace.get("sources") or ()):
        if not isinstance(s, dict) or not isinstance(s.get("text"), str):
            raise TraceError(f"{where}: sources[{i}] must be an object with a string 'text'")
    return trace


def load_trace(path: str | Path) -> dict:
    """Reads and checks a trace file (JSON); TraceError with the file name when it is not one."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise TraceError(f"{p}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{p}: not a visualizer trace (not UTF-8 text)") from None
    try:
        trace = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{p}:{e.lineno}:{e.colno}: not a visualizer trace (invalid JSON: {e.msg})") from None
    return validate_trace(trace, str(p))


# inside a <script> element's JSON: what could end the element or start a comment (`</script`, `<!--`), what an
# HTML-aware tool may read as markup (`>`, `&`), the line separators older JavaScript parsers end a line at
# (U+2028/2029), and lone surrogates (no UTF-8 encodes them): each as its JSON escape \uXXXX, the same string
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def script_json(value: Any) -> str:
    """`value` as JSON text that can sit inside a <script> element of a UTF-8 page and parses back to the same value
    (every string in it, a user's names included, escaped as above)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def html_text(text: str) -> str:
    """`text` as HTML character data or a quoted attribute value: `& < > " '` as references, a lone surrogate
    (which no UTF-8 page can hold) as U+FFFD."""
    return html.escape(text.encode("utf-8", "surrogatepass").decode("utf-8", "replace"), quote=True)


def _script_safe(text: str) -> str:
    # inside <script>, "</script" (any case) and "<!--" would end or confuse the element; both can only occur in
    # string or regex literals, where the escape \u003c means the same character
    return re.sub(r"<(?=/script|!--)", lambda m: "\\u003c", text, flags=re.IGNORECASE)


def render_page(trace: dict) -> str:
    """The page's HTML text for a (checked) trace."""
    validate_trace(trace)
    data = script_json(trace)
    dagre = _static("dagre.min.js")
    dagre = re.sub(r"^//# sourceMappingURL=.*$", "", dagre, flags=re.MULTILINE)  # the map is not shipped
    dagre = f"/*! @dagrejs/dagre {DAGRE_VERSION}, MIT license:\n{_static('dagre.LICENSE').strip()}\n*/\n{dagre}"
    title = str(trace.get("title") or "trace")
    parts = {"TITLE": html_text(title), "CSS": _static("page.css"), "TRACE": data, "DAGRE": _script_safe(dagre),
             "JS": _script_safe(_static("page.js"))}
    return re.sub(r"@(TITLE|CSS|TRACE|DAGRE|JS)@", lambda m: parts[m.group(1)], _static("page.html"))


def write_page(trace: dict, path: str | Path) -> Path:
    """Writes the self-contained page for `trace` to `path` (its folder must exist: no folder is made) and returns
    the path."""
    p = Path(path)
    p.write_text(render_page(trace), encoding="utf-8")
    return p
