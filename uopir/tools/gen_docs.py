"""Write the docs' tables from the registries, and find what the docs claim against them (issue 28): a list that is
generated cannot drift, and a sentence that calls a registered thing missing or planned is caught.

`python -m uopir.tools.gen_docs` rewrites every marked region of README.md and docs/*.md; `--check` changes nothing
and exits 1 naming each region that differs and each stale claim. A region is

    <!-- generated: NAME (python -m uopir.tools.gen_docs) -->
    ...
    <!-- /generated: NAME -->

with NAME one of TABLES. unit_tests/test_docs.py runs the check.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from uopir.ir import env

__all__ = ["TABLES", "FEATURES", "STALE", "doc_files", "regenerate", "stale_claims", "docstring_claims", "check",
           "main"]

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if v in ("", (), [], None):
        return "unset"
    return str(v)


def _user_passes() -> tuple[dict, dict]:
    """The registered passes and pipelines a user sees (every module loaded, the test-* passes left out)."""
    import uopir.backends  # noqa: F401  (the backends register their emit passes)
    from uopir.passes.registry import PASSES, PIPELINES, TEST_PASS_MODULES, load_passes

    load_passes(test_passes=False)
    passes = {n: p for n, p in PASSES.items() if p.fn.__module__ not in TEST_PASS_MODULES}
    pipelines = {n: p for n, p in PIPELINES.items() if p.expand.__module__ not in TEST_PASS_MODULES}
    return passes, pipelines


def _options(infos: tuple) -> str:
    return "; ".join(f"`{o.name}: {o.type_text()} = {_value_opt(o.default)}`" for o in infos) or "-"


def _value_opt(v: object) -> str:
    from uopir.passes.options import format_value

    return format_value(v) or "[]"


def passes_table() -> str:
    passes, _ = _user_passes()
    rows = ["| pass | from -> to | what it does | options |", "|---|---|---|---|"]
    for name in sorted(passes):
        p = passes[name]
        dial = f"{','.join(p.consumes) or '-'} -> {','.join(p.produces) or '-'}"
        rows.append(f"| `{name}` | {dial} | {_cell(p.summary)} | {_cell(_options(p.option_infos))} |")
    return "\n".join(rows)


def pipelines_table() -> str:
    _, pipelines = _user_passes()
    rows = ["| pipeline | runs | what it is | options |", "|---|---|---|---|"]
    for name in sorted(pipelines):
        pl = pipelines[name]
        got = pl.expand(pl.options() if pl.options is not None else None)  # with its default options
        runs = f"`{got if isinstance(got, str) else ','.join(got)}`"
        rows.append(f"| `{name}` | {_cell(runs)} | {_cell(pl.summary)} | {_cell(_options(pl.option_infos))} |")
    return "\n".join(rows)


def backends_table() -> str:
    from uopir.backends.registry import BACKENDS, DEVICES, PREFERENCE, get_backend, requirements

    needs = requirements()
    rows = ["| backend | Tensor device | best-available rank | realize runs | needs |", "|---|---|---|---|---|"]
    for name in BACKENDS:
        rank = str(PREFERENCE.index(name) + 1) if name in PREFERENCE else "-"
        pipeline = get_backend(name).pipeline  # building a backend imports its modules; it probes no device
        rows.append(f"| `{name}` | {'yes' if name in DEVICES else 'no'} | {rank} | `{pipeline}` | "
                    f"{_cell(needs.get(name, '-'))} |")
    return "\n".join(rows)


def environment_table() -> str:
    rows = ["| variable | tinygrad name | values | default | what it does |", "|---|---|---|---|---|"]
    for name, var in env.REGISTRY.items():
        alias = f"`{var.alias}`" if var.alias else "-"
        rows.append(f"| `{name}` | {alias} | {_cell(var.values)} | {_cell(_value(var.default))} | "
                    f"{_cell(var.help)} |")
    return "\n".join(rows)


TABLES: dict[str, Callable[[], str]] = {
    "passes": passes_table,
    "pipelines": pipelines_table,
    "backends": backends_table,
    "environment": environment_table,
}

_REGION = re.compile(r"(<!-- generated: ([a-z-]+) \(python -m uopir\.tools\.gen_docs\) -->\n)(.*?)"
                     r"(<!-- /generated: \2 -->)", re.S)


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def regenerate(text: str, where: str = "<text>") -> tuple[str, list[str]]:
    """`text` with every marked region rewritten, and the names of the regions that changed (`where: NAME`)."""
    changed: list[str] = []
    made: dict[str, str] = {}

    def one(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in TABLES:
            raise ValueError(f"{where}: unknown generated region {name!r} (known: {', '.join(TABLES)})")
        body = made.get(name) or made.setdefault(name, TABLES[name]() + "\n")
        if m.group(3) != body:
            changed.append(f"{where}: {name}")
        return m.group(1) + body + m.group(4)

    return _REGION.sub(one, text), changed


# ---- stale claims ------------------------------------------------------------------------------------------------
# What says a thing does not exist (yet): a sentence with one of these that names a registered thing is stale, and so
# is every sentence under a heading with one (a "Planned" section).
STALE = re.compile(r"\b(not (?:yet )?(?:written|implemented)(?: yet)?|still to come|planned|pendingbackend|"
                   r"(?:does not|doesn't|do not) exist yet|none of them exists?(?: yet)?|to be written|"
                   r"only\b[^.]*\bruns? (?:programs|anything|today))", re.I)

# Parts of the project a doc may call planned, by the word a sentence uses, and the module that shows they exist.
FEATURES: dict[str, str] = {
    "autograd": "uopir.frontend.gradient", "jit": "uopir.frontend.jit", "tinyjit": "uopir.frontend.jit",
    "visualizer": "uopir.viz", "onnx": "uopir.onnx", "nn": "uopir.nn", "pyrender": "uopir.ir.pyrender",
}
_COMMON = {"c", "python", "default", "cleanup"}  # registered names that are also plain words: only `quoted` counts


def _known_names() -> set[str]:
    import importlib.util

    passes, pipelines = _user_passes()
    from uopir.backends.registry import BACKENDS

    names = set(passes) | set(pipelines) | set(BACKENDS) | set(env.REGISTRY)
    return names | {f for f, mod in FEATURES.items() if importlib.util.find_spec(mod) is not None}


def _sentences(text: str) -> list[tuple[int, str, bool]]:
    """(line, sentence, under a heading that calls its section planned) of the prose of a markdown text: code blocks
    and generated regions left out."""
    out: list[tuple[int, str, bool]] = []
    text = _REGION.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    in_code = planned = False
    para: list[tuple[int, str]] = []
    for i, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        heading = line.startswith("#")
        if line.strip() and not heading and not line.lstrip().startswith(("- ", "* ")) or line.startswith("  ") \
                and line.strip() and para:
            para.append((i, line))
            continue
        if para:
            joined = " ".join(t for _, t in para)
            out += [(para[0][0], t, planned) for t in re.split(r"(?<=[.!?;])\s+|\s+\|\s+", joined)]
            para = []
        if heading:
            planned = bool(STALE.search(line))
        elif line.strip():
            para.append((i, line))
    return out


def stale_claims(text: str, where: str = "<text>", names: set[str] | None = None, first_line: int = 1) -> list[str]:
    """Each sentence of `text` that says a registered pass, pipeline, backend, variable or part of the project is
    missing, planned or not written: `where:LINE: names N as ...: sentence`."""
    names = _known_names() if names is None else names
    found = []
    for line, s, planned in _sentences(text):
        if not (planned or STALE.search(s)):
            continue
        quoted = {w.lower() for w in re.findall(r"`([^`]+)`", s)}
        quoted |= {q.split("{")[0].split("(")[0] for q in quoted}
        words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_-]*", s)}
        hit = sorted(n for n in names if n.lower() in quoted or n.lower() not in _COMMON and n.lower() in words)
        if hit:
            found.append(f"{where}:{line + first_line - 1}: names {', '.join(hit)} as missing or planned: {s.strip()}")
    return found


def docstring_claims(root: Path = ROOT, names: set[str] | None = None) -> list[str]:
    """The stale claims of the package's docstrings (a module's docstring that calls a backend "not written yet")."""
    import ast

    names = _known_names() if names is None else names
    found: list[str] = []
    for p in sorted((root / "uopir").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    found += stale_claims(doc, str(p.relative_to(root)), names, node.body[0].lineno)
    return found


def check(root: Path = ROOT) -> list[str]:
    """Every generated region that differs from the registries and every stale claim, in the docs and the package's
    docstrings under `root`."""
    names = _known_names()
    problems = docstring_claims(root, names)
    for f in doc_files(root):
        text = f.read_text(encoding="utf-8")
        rel = str(f.relative_to(root))
        problems += [f"{c}: differs from what the code registers (run python -m uopir.tools.gen_docs)"
                     for c in regenerate(text, rel)[1]]
        problems += stale_claims(text, rel, names)
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gen_docs", description="Write the docs' generated tables; --check: only "
                                 "report differences and stale claims.")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a doc is out of date")
    args = ap.parse_args(argv)
    if args.check:
        problems = check()
        for p in problems:
            print(p)
        return 1 if problems else 0
    for f in doc_files():
        text = f.read_text(encoding="utf-8")
        new, changed = regenerate(text, str(f.relative_to(ROOT)))
        if changed:
            f.write_text(new, encoding="utf-8")
            print("updated " + ", ".join(changed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
