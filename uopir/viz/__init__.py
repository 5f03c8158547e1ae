"""The pipeline visualizer: one self-contained HTML page drawn from a rewrite trace (docs/visualizer.md).

`write_page(trace, path)` writes the page; `render_page(trace)` returns its text; `load_trace(path)` reads and checks a
trace file. The page embeds the trace, its own script and style, and the dagre graph-layout library (MIT, shipped in
uopir/viz/static/ with its license), so it opens from disk without a server or a network.
"""
from uopir.viz.page import TRACE_VERSION, TraceError, load_trace, render_page, validate_trace, write_page

__all__ = ["TRACE_VERSION", "TraceError", "load_trace", "render_page", "validate_trace", "write_page"]
