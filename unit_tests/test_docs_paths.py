"""The docs cannot silently go stale: every module path, module name and registered name they mention exists.

Read from README.md and docs/*.md:
- repository paths (`uopir/ir/folds.py`, `uopir/backends/python/{core,tensor}.py`, `lit_tests/passes/`) exist;
- dotted names (`uopir.passes.target`, `uopir.backends.registry.DEVICES`) import and resolve;
- in docs/internals.md, a bullet that starts with a module (`- `uopir.ir.folds`: ...`) names only members of that
  module in backticks (`fold_matcher(dialects)`, `PassManager.run`, `core.ADD`), and `dialect.op` names are
  registered ops;
- every registered pass, pipeline and anchor (test-only ones aside) is named somewhere in the docs;
- links stay inside the repository and point at files and headings that exist;
- IR examples name devices the frontend knows (`device = "python"`);
- the Python examples run;
- the README opens with the two set-up commands.
"""
from __future__ import annotations

import builtins
import dataclasses
import functools
import importlib
import inspect
import itertools
import pkgutil
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import uopir  # noqa: F401 - registers the dialects
from uopir.backends.registry import BACKENDS, DEVICES
from uopir.ir.ops import REGISTRY
from uopir.passes.registry import ANCHORS, PASSES, PIPELINES, TEST_PASS_MODULES, load_passes

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DIALECT_MODULES = ("core", "tensor", "kernel", "device")


def _text(p: Path) -> str:
    return p.read_text(encoding="utf-8")


def _prose(p: Path) -> str:
    """The text without fenced code blocks (their backticks would pair with the prose's)."""
    return re.sub(r"^```.*?^```", "", _text(p), flags=re.M | re.S)


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# ---- paths -----------------------------------------------------------------------------------------------------------
_PATH = re.compile(r"(?<![\w/.-])((?:uopir|unit_tests|lit_tests|tools|bench|examples|docs)/[\w./{},*-]*)")


def _expand_braces(path: str) -> list[str]:
    """`a/{b,c}.py` -> [`a/b.py`, `a/c.py`] (every brace group, one level each)."""
    parts = re.split(r"\{([^{}]*)\}", path)
    fixed, choices = parts[0::2], [g.split(",") for g in parts[1::2]]
    out = []
    for combo in itertools.product(*choices):
        out.append("".join(f + c for f, c in zip(fixed, [*combo, ""], strict=True)))
    return out


def mentioned_paths() -> list[tuple[str, str]]:
    """(doc, path) for every repository path a doc mentions."""
    out = []
    for doc in DOCS:
        for m in _PATH.finditer(_text(doc)):
            raw = m.group(1).rstrip(".,")
            out.extend((_rel(doc), p) for p in _expand_braces(raw))
    return out


def test_docs_mention_paths() -> None:
    paths = {p for _, p in mentioned_paths()}
    # the map must cover the package: each of these is named by path somewhere in the docs
    for must in ("uopir/ir/folds.py", "uopir/passes/target.py", "uopir/backends/interface.py",
                 "uopir/passes/registry.py", "uopir/ir/regions.py"):
        assert must in paths, must


def test_mentioned_paths_exist() -> None:
    missing = []
    for doc, p in mentioned_paths():
        hits = list(ROOT.glob(p)) if "*" in p else [ROOT / p] if (ROOT / p).exists() else []
        if not hits:
            missing.append(f"{doc}: {p}")
    assert not missing, "paths the docs mention that do not exist:\n" + "\n".join(missing)


# ---- dotted names ----------------------------------------------------------------------------------------------------
_DOTTED = re.compile(r"(?<![\w./-])uopir(?:\.[A-Za-z_]\w*)+")


def _has_member(obj: object, name: str) -> bool:
    """An attribute of a module or class, including instance attributes a class declares (annotations, slots,
    dataclass fields, `self.name = ...` in its methods)."""
    if hasattr(obj, name):
        return True
    if not isinstance(obj, type):
        return False
    for cls in obj.__mro__:
        if name in getattr(cls, "__annotations__", {}) or name in getattr(cls, "__slots__", ()):
            return True
        if dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}:
            return True
        try:
            src = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        if re.search(rf"\bself\.{re.escape(name)}\b\s*(?:[:=,]|$)", src, re.M):
            return True
    return False


def resolve(dotted: str) -> str | None:
    """None when `dotted` names an importable module or a member of one; else why not."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        modname = ".".join(parts[:i])
        try:
            obj: object = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name is not None and modname.startswith(e.name):
                continue
            return f"importing {modname} fails: {e}"
        for j, name in enumerate(parts[i:], i):
            if obj is None or not _has_member(obj, name):
                return f"{'.'.join(parts[:j])} has no member {name!r}"
            obj = getattr(obj, name, None)  # None for an instance attribute: it ends the chain
        return None
    return "no such module"


def test_dotted_names_resolve() -> None:
    bad = []
    for doc in DOCS:
        for m in sorted(set(_DOTTED.findall(_text(doc)))):
            why = resolve(m)
            if why is not None:
                bad.append(f"{_rel(doc)}: {m}: {why}")
    assert not bad, "module names the docs mention that do not resolve:\n" + "\n".join(bad)


# ---- internals.md: each module bullet names members of its module ----------------------------------------------------
_BULLET = re.compile(r"^- `(uopir(?:\.\w+)+)`")
_TICKS = re.compile(r"`([^`]+)`")
_NAME_PATH = re.compile(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\(.*\))?(?:\s*->.*)?$")


def module_bullets(text: str) -> list[tuple[str, int, str]]:
    """(module, first line number, the bullet's text with its continuation lines and sub-bullets)."""
    out: list[tuple[str, int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _BULLET.match(lines[i])
        if not m:
            i += 1
            continue
        start, body = i + 1, [lines[i][m.end():]]
        i += 1
        while i < len(lines) and lines[i].startswith("  "):
            body.append(lines[i])
            i += 1
        out.append((m.group(1), start, "\n".join(body)))
    return out


@functools.cache
def package_index() -> dict[str, object]:
    """Module-level names defined in some uopir module -> the object (a bullet may name another module's class)."""
    out: dict[str, object] = {}
    for info in pkgutil.walk_packages(uopir.__path__, "uopir."):
        mod = importlib.import_module(info.name)
        for n, v in vars(mod).items():
            if getattr(v, "__module__", None) == info.name:
                out.setdefault(n, v)
    return out


@functools.cache
def registered_names() -> frozenset[str]:
    load_passes()
    return frozenset(PASSES) | frozenset(PIPELINES) | frozenset(ANCHORS)


def _context(module: types.ModuleType, tokens: list[str]) -> set[str]:
    """Names a bullet may use besides its module's members: parameters of the callables it names and members of the
    classes it names (`PassContext.stats` may be written `stats` after `PassContext`)."""
    out: set[str] = set()
    for token in tokens:
        m = _NAME_PATH.match(token.strip())
        if not m:
            continue
        obj: object = module
        for name in m.group(1).split("."):
            obj = getattr(obj, name, None)
        if obj is None or not callable(obj):
            continue
        try:
            out.update(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            pass
        if isinstance(obj, type):
            for cls in obj.__mro__:
                out.update(vars(cls))
                out.update(getattr(cls, "__annotations__", {}))
    return out


def check_token(module: types.ModuleType, token: str, context: set[str]) -> str | None:
    """None when `token` (a name, `Class.member`, `fn(args)`, `dialect.op`, `uopir.x.y`) exists; else why not.
    Tokens that are not names (text, types, pipelines, operators) are not checked."""
    m = _NAME_PATH.match(token.strip())
    if not m:
        return None
    parts = m.group(1).split(".")
    head = parts[0]
    if head == "uopir":
        return resolve(m.group(1))
    if head in DIALECT_MODULES:
        if len(parts) == 1 or ".".join(parts[:2]) in REGISTRY:
            return None
        obj: object = importlib.import_module(f"uopir.dialects.{head}")
        rest = parts[1:]
    elif _has_member(module, head):
        obj, rest = module, parts
    elif len(parts) == 1 and (head in context or head in registered_names() or head in BACKENDS
                              or hasattr(builtins, head)):
        return None
    elif head in package_index():
        obj, rest = package_index()[head], parts[1:]
    else:
        return f"{module.__name__} has no member {head!r}"
    for name in rest:
        if obj is None or not _has_member(obj, name):
            return f"{token!r}: no member {name!r}"
        obj = getattr(obj, name, None)  # None for an instance attribute: it ends the chain
    return None


def test_internals_module_bullets_name_existing_members() -> None:
    doc = ROOT / "docs" / "internals.md"
    bullets = module_bullets(_prose(doc))
    assert len(bullets) >= 40, "docs/internals.md should map every module, one bullet each"
    bad = []
    for modname, line, body in bullets:
        why = resolve(modname)
        if why is not None:
            bad.append(f"docs/internals.md:{line}: {modname}: {why}")
            continue
        module = importlib.import_module(modname)
        tokens = _TICKS.findall(body)
        context = _context(module, tokens)
        for token in tokens:
            why = check_token(module, token, context)
            if why is not None:
                bad.append(f"docs/internals.md:{line}: {why}")
    assert not bad, "names in docs/internals.md that its modules lack:\n" + "\n".join(bad)


def test_internals_maps_every_module() -> None:
    listed = {m for m, _, _ in module_bullets(_text(ROOT / "docs" / "internals.md"))}
    modules = set()
    for p in (ROOT / "uopir").rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__" and len(p.read_text(encoding="utf-8").splitlines()) <= 3:
            continue  # a package whose __init__ only imports its modules needs no bullet of its own
        if len(parts) > 2 or parts[-1] != "__init__":
            modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    missing = sorted(modules - listed)
    assert not missing, "modules docs/internals.md does not map (add a bullet):\n" + "\n".join(missing)


def test_op_names_in_docs_are_registered() -> None:
    """`core.add` is a registered op; `core.ADD`, `core.const_value(u)` are members of the dialect's module."""
    bad = []
    for doc in DOCS:
        for token in _TICKS.findall(_prose(doc)):
            for m in re.finditer(r"(?<![\w./%])(core|tensor|kernel|device)\.([A-Za-z_]\w*)", token):
                name = f"{m.group(1)}.{m.group(2)}"
                mod = importlib.import_module(f"uopir.dialects.{m.group(1)}")
                if name not in REGISTRY and not hasattr(mod, m.group(2)):
                    bad.append(f"{_rel(doc)}: {name}")
    assert not bad, "names that are neither ops nor dialect members:\n" + "\n".join(sorted(set(bad)))


# ---- registered names are documented ---------------------------------------------------------------------------------
def _user_facing() -> list[str]:
    load_passes()
    names = [n for n, p in PASSES.items() if p.fn.__module__ not in TEST_PASS_MODULES]
    names += [n for n, p in PIPELINES.items() if p.expand.__module__ not in TEST_PASS_MODULES]
    names += [f"{n}(" for n in ANCHORS]
    return names


def test_every_registered_pass_is_documented() -> None:
    ticks = "\n".join(t for doc in DOCS for t in _TICKS.findall(_prose(doc)))
    missing = [n for n in _user_facing()
               if not re.search(rf"(?<![\w-]){re.escape(n)}" + ("" if n.endswith("(") else r"(?![\w-])"), ticks)]
    assert not missing, ("registered passes, pipelines or anchors no doc names (say what they do in "
                         "docs/architecture.md):\n" + "\n".join(missing))


# ---- links -----------------------------------------------------------------------------------------------------------
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    h = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def _anchors(p: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", _text(p), re.M)}


def test_links_stay_inside_the_repository() -> None:
    bad = []
    for doc in DOCS:
        text = _text(doc)
        for url in re.findall(r"\b(?:https?|ftp)://\S+", text):
            bad.append(f"{_rel(doc)}: a link outside the repository: {url}")
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("//"):
                bad.append(f"{_rel(doc)}: a link outside the repository: {target}")
                continue
            path, _, frag = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if ROOT not in dest.parents and dest != ROOT:
                bad.append(f"{_rel(doc)}: {target} leaves the repository")
            elif not dest.exists():
                bad.append(f"{_rel(doc)}: {target} does not exist")
            elif frag and dest.suffix == ".md" and frag not in _anchors(dest):
                bad.append(f"{_rel(doc)}: {target}: no heading '#{frag}' in {_rel(dest)}")
    assert not bad, "\n".join(bad)


# ---- vocabulary ------------------------------------------------------------------------------------------------------
def test_ir_examples_use_device_names() -> None:
    files = [*DOCS, *sorted((ROOT / "examples").glob("*.uop"))]
    bad = []
    for f in files:
        for name in re.findall(r'device = "([^"]*)"', _text(f)):
            if name not in DEVICES and name not in BACKENDS:
                bad.append(f"{_rel(f)}: device = {name!r} (devices: {', '.join(DEVICES)})")
    assert not bad, "\n".join(bad)


def test_device_and_target_are_defined_once() -> None:
    defs = [_rel(d) for d in DOCS if re.search(r"^- \*\*target\*\*:", _text(d), re.M)]
    assert defs == ["docs/architecture.md"]
    arch = _text(ROOT / "docs" / "architecture.md")
    for word in DEVICES:
        assert f"`{word}`" in arch.split("- **target**")[0], word


# ---- examples --------------------------------------------------------------------------------------------------------
def python_blocks() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for i, m in enumerate(re.finditer(r"^```python\n(.*?)^```", _text(doc), re.M | re.S)):
            out.append((f"{_rel(doc)}#{i}", m.group(1)))
    return out


@pytest.mark.parametrize("where,code", python_blocks(), ids=[w for w, _ in python_blocks()])
def test_python_examples_run(where: str, code: str) -> None:
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{where} fails:\n{r.stderr[-3000:]}"


def test_readme_opens_with_the_two_setup_commands() -> None:
    first = _text(ROOT / "README.md").split("```")[1]
    assert first.splitlines()[1:3] == [
        'make demo   # installs into .venv, then takes a small MLP through every stage that exists and runs it',
        'make test   # installs into .venv, runs pytest and lit; ends with one line "N passed, N failed, N skipped"',
    ]
