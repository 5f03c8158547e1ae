"""`UOPIR_VIZ`: record the pipeline of every realize of a Tensor program and, at exit, write the visualizer's trace
(JSON) and page (HTML), then print where they are.

    UOPIR_VIZ=1          ./uopir-viz.html and ./uopir-viz.json
    UOPIR_VIZ=out.html   out.html and out.json (a path ending in .json: that trace, and the page beside it)

The page comes from `uopir.viz.write_page`.
`save(trace, path)` is what `uop-opt --viz=FILE` uses too.
"""
from __future__ import annotations

import atexit
import json
import sys
from pathlib import Path
from typing import Any

from uopir.ir import env, trace
from uopir.viz import write_page

__all__ = ["VIZ_ENV", "from_env", "save", "viz_paths"]

VIZ_ENV = env.VIZ.name
DEFAULT_NAME = "uopir-viz"


def viz_paths(value: str) -> tuple[Path, Path]:
    """The (json, html) paths UOPIR_VIZ's value names: `1` -> ./uopir-viz.{json,html}, else the value's stem."""
    base = Path(DEFAULT_NAME) if value.strip().lower() in ("1", "true", "yes", "on") else Path(value)
    if base.suffix in (".json", ".html", ".htm"):
        base = base.with_suffix("")
    return base.with_name(base.name + ".json"), base.with_name(base.name + ".html")


def save(data: dict[str, Any], json_path: Path | None, html_path: Path | None) -> list[Path]:
    """Write the trace as JSON and/or the page (into existing folders: none is made); returns the files written."""
    written: list[Path] = []
    if json_path is not None:
        json_path.write_text(json.dumps(data), encoding="utf-8")
        written.append(json_path)
    if html_path is not None:
        written.append(Path(write_page(data, html_path)))
    return written


def _write_at_exit(tracer: trace.Tracer, value: str) -> None:
    json_path, html_path = viz_paths(value)
    try:
        files = save(tracer.to_dict(), json_path, html_path)
    except OSError as e:
        print(f"uopir: {VIZ_ENV}: could not write the trace: {e}", file=sys.stderr)
        return
    print(f"uopir: {VIZ_ENV}: {len(tracer.passes)} passes recorded; wrote "
          f"{', '.join(str(f.resolve()) for f in files)}", file=sys.stderr)


def from_env() -> trace.Tracer | None:
    """Start recording for the rest of the process when $UOPIR_VIZ is set (not `0`), writing at exit; idempotent."""
    value = env.VIZ.raw()
    if value in ("", "0") or trace.ACTIVE is not None:
        return trace.ACTIVE
    folder = viz_paths(value)[0].parent
    if not folder.is_dir():  # as the tools' output files: refused at once, never a folder made
        print(f"uopir: {VIZ_ENV}: cannot write '{value}': the folder '{folder}' does not exist (create it first); "
              "nothing is recorded", file=sys.stderr)
        return None
    tracer = trace.start(Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "uopir")
    atexit.register(_write_at_exit, tracer, value)
    return tracer
