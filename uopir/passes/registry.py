"""The pass registry: named passes, named pipelines and anchors, and the one table that says where each is defined.

A pass registers itself where it is written (`@register_pass("dce", ...)`), and its module is named once, in the
table `LAZY` (`register_lazy(module, *names)`, below; the backends add their emit passes when uopir.backends loads).
The table is how every name is found: the pipeline parser imports only the modules of the names it meets (a realize
imports the passes of its pipeline and no others), and `load_passes()` imports every module of the table (for
`--list-passes` and the did-you-mean of an unknown name). unit_tests/test_lazy_registry.py imports every module under
uopir.passes and fails on a registered name the table misses. A module of the table that fails to import is a
PipelineError naming the module and why, never a silently missing pass. The `test-*` passes of
`uopir.passes.testing` exist to test the pass manager and load only on request (`load_passes(test_passes=True)`,
`UOPIR_TEST_PASSES=1`, or `uop-opt --load-test-passes`).
"""
from __future__ import annotations

import importlib
import io
import re
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uopir.ir import env
from uopir.ir.registration import RegistrationError, Sites
from uopir.ir.uop import UOp
from uopir.passes.errors import PipelineError, did_you_mean
from uopir.passes.options import OptionInfo, format_value, option_infos

if TYPE_CHECKING:
    from uopir.passes.manager import PassContext

__all__ = ["PassInfo", "PipelineInfo", "AnchorInfo", "PASSES", "PIPELINES", "ANCHORS", "register_pass",
           "register_pipeline", "register_anchor", "load_passes", "get_pass", "check_pass_names", "as_names",
           "list_passes_text", "TEST_PASS_MODULES", "TEST_PASSES_ENV", "test_passes_requested", "LAZY",
           "register_lazy", "resolve"]

# Modules of test-only passes: imported only when test passes are requested.
TEST_PASS_MODULES: list[str] = ["uopir.passes.testing"]
TEST_PASSES_ENV = env.TEST_PASSES.name
# pass, pipeline or anchor name -> the module that registers it (imported when the name is first looked up): the one
# way a pass is found
LAZY: dict[str, str] = {}

_KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class PassInfo:
    """A registered pass: name, function, summary, options; `around_regions(options, total)`, when set, is the context
    an anchor enters around its regions when the pass runs inside it (a search's progress over kernels); `total()`
    counts the regions (a walk of the graph: called only when needed)."""

    name: str
    fn: Callable[[UOp, Any, PassContext], UOp]
    summary: str
    consumes: tuple[str, ...]
    produces: tuple[str, ...]
    options: type | None
    option_infos: tuple[OptionInfo, ...]
    around_regions: Callable[[Any, Callable[[], int]], AbstractContextManager[object]] | None = None


@dataclass(frozen=True)
class PipelineInfo:
    """A registered pipeline: name, what it expands to, summary."""

    name: str
    expand: Callable[[Any], str | Sequence[str]]
    summary: str
    options: type | None
    option_infos: tuple[OptionInfo, ...]


@dataclass(frozen=True)
class AnchorInfo:
    """A registered anchor: name, which region roots its nested pipeline runs on, summary."""

    name: str
    select: Callable[[UOp], bool]  # does the nested pipeline run on this region root?
    summary: str


PASSES: dict[str, PassInfo] = {}
PIPELINES: dict[str, PipelineInfo] = {}
ANCHORS: dict[str, AnchorInfo] = {}


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not _KEBAB.match(name):
        raise RegistrationError(f"{kind} name {name!r} must be kebab-case (lowercase words joined by '-')")


# one namespace for passes, pipelines and anchors (a pipeline text names any of them): where each was registered
_SITES = Sites("pass, pipeline or anchor")


def _claim(kind: str, name: str, replace: bool) -> None:
    """A name taken by another kind is always an error; by the same kind, an error naming both places unless
    `replace` or the same line again (a module reload)."""
    mod = LAZY.get(name)
    if mod is not None and mod not in sys.modules:  # a built-in name whose module is not loaded yet: load it, so a
        _import(mod)  # plugin that takes the name fails here, at its own line, not later in uopir's module
    for other, table in (("pass", PASSES), ("pipeline", PIPELINES), ("anchor", ANCHORS)):
        if other != kind and name in table:
            raise RegistrationError(f"{kind} name {name!r} is already a {other} (registered at "
                                    f"{_SITES.where(name) or '<unknown>'})")
    _SITES.claim(name, name in {"pass": PASSES, "pipeline": PIPELINES, "anchor": ANCHORS}[kind], replace, kind=kind)


def register_pass(name: str, summary: str = "", consumes: Iterable[str] = (), produces: Iterable[str] = (),
                  options: type | None = None,
                  around_regions: Callable[[Any, Callable[[], int]], AbstractContextManager[object]] | None = None,
                  *, replace: bool = False) -> Callable[[Callable], Callable]:
    """Register `fn(root, options, ctx) -> UOp` as pass `name`. `options` is a dataclass whose fields (typed, each
    with a default) are the pass's options, or None; `around_regions`: see PassInfo. A name registered on another
    line is a RegistrationError naming both, unless `replace` (the same line again, a module reload, replaces)."""
    _check_name("pass", name)
    infos = option_infos(f"pass '{name}'", options)

    def deco(fn: Callable) -> Callable:
        _claim("pass", name, replace)
        PASSES[name] = PassInfo(name, fn, summary.strip(), tuple(consumes), tuple(produces), options, infos,
                                around_regions)
        return fn
    return deco


def register_pipeline(name: str, options: type | None, expand: Callable[[Any], str | Sequence[str]],
                      summary: str = "", *, replace: bool = False) -> None:
    """Register a named pipeline: `expand(options)` returns pipeline text (or a list of elements) that replaces
    `name{...}` where it is written. `options` is a dataclass type or None (then `expand` gets None). A name taken
    elsewhere is a RegistrationError unless `replace`."""
    _check_name("pipeline", name)
    _claim("pipeline", name, replace)
    PIPELINES[name] = PipelineInfo(name, expand, summary.strip(), options, option_infos(f"pipeline '{name}'", options))


def register_anchor(name: str, select: Callable[[UOp], bool], summary: str = "", *, replace: bool = False) -> None:
    """Register `name(...)`: a nested pipeline that runs on every region root for which `select` is true. The
    dialect that owns the region's root op registers its anchor (see uopir.passes.kernel.anchors)."""
    _check_name("anchor", name)
    _claim("anchor", name, replace)
    ANCHORS[name] = AnchorInfo(name, select, summary)


register_anchor("any", lambda r: True, "run the nested pipeline on every nested region (outermost first)")


def register_lazy(module: str, *names: str) -> None:
    """Say that importing `module` registers the passes, pipelines or anchors `names`: looking one of them up
    imports that module only (unit_tests/test_lazy_registry.py checks the table against what the modules register)."""
    for name in names:
        LAZY[name] = module


# the built-in passes, pipelines and anchors, by the module that registers each
register_lazy("uopir.passes.core", "canonicalize", "dce", "cleanup")
register_lazy("uopir.passes.default", "default")
register_lazy("uopir.passes.tensor.canonicalize", "tensor-canonicalize")
register_lazy("uopir.passes.tensor.split_reduce", "tensor-split-reduce")
register_lazy("uopir.passes.lower_dialects", "lower-dialects")
register_lazy("uopir.passes.tensor_to_kernel", "tensor-to-kernel")
register_lazy("uopir.passes.kernel.anchors", "kernel")
register_lazy("uopir.passes.kernel.simplify", "kernel-simplify")
register_lazy("uopir.passes.kernel.peel", "kernel-peel")
register_lazy("uopir.passes.kernel.optimize", "kernel-optimize")
register_lazy("uopir.passes.kernel.expand", "kernel-expand")
register_lazy("uopir.passes.kernel_to_device", "kernel-to-device")
register_lazy("uopir.passes.device.decompose", "device-decompose")
register_lazy("uopir.passes.device.transcendental", "device-transcendental")
register_lazy("uopir.passes.device.devectorize", "device-devectorize")
register_lazy("uopir.passes.device.contract", "device-contract")
register_lazy("uopir.passes.device.linearize", "device-linearize")


# ---- loading -------------------------------------------------------------------------------------------------------
_loaded = False
_test_loaded = False
_lazy_loaded: set[str] = set()  # the modules of LAZY imported (to completion) by resolve or load_passes
_loading = False  # a load_passes call is importing the modules (its thread holds the lock)
_LOAD_LOCK = threading.RLock()


def test_passes_requested() -> bool:
    """Whether the environment asks for the test-* passes ($UOPIR_TEST_PASSES set to anything but '' or '0')."""
    return env.TEST_PASSES.get()


def _import(mod: str) -> None:
    """Import a pass module; one that fails (missing, or raising while it loads) is a PipelineError that names it and
    the passes it should have registered: a broken module must never look like a pass that does not exist."""
    try:
        importlib.import_module(mod)
    except Exception as e:
        names = sorted(n for n, m in LAZY.items() if m == mod)
        what = f" (which registers {', '.join(names)})" if names else ""
        raise PipelineError(f"pass module {mod}{what} could not be imported: {type(e).__name__}: {e}") from e


def resolve(name: str) -> bool:
    """Make sure `name` is registered if any module registers it: the module `LAZY` names for it first, else every
    pass module (load_passes). Whether it is a registered pass, pipeline or anchor now.

    A name counts once the import of its module has completed: a module registers its passes while it runs, so
    another thread importing it may have registered the name before the globals the pass uses exist. The first
    lookup of a name of `LAZY` therefore imports its module under the lock (waiting for a thread that is importing
    it); later lookups take no lock."""
    mod = LAZY.get(name)
    if name in PASSES or name in PIPELINES or name in ANCHORS:
        if mod is None or mod in _lazy_loaded:
            return True
    if mod is not None:
        with _LOAD_LOCK:
            if mod not in _lazy_loaded:
                _import(mod)
                _lazy_loaded.add(mod)
        if name in PASSES or name in PIPELINES or name in ANCHORS:
            return True
    load_passes()
    return name in PASSES or name in PIPELINES or name in ANCHORS


def load_passes(test_passes: bool | None = None) -> None:
    """Import every pass module of `LAZY` once (also those a layer above registers: the backends' emit passes), so
    the registry is complete; a module that fails to import is a PipelineError naming it.

    test_passes: also import the test-* passes (None: only when $UOPIR_TEST_PASSES asks for them). Safe from several
    threads: one loads, the others wait until the registry is complete."""
    global _loaded, _test_loaded, _loading
    if test_passes is None:
        test_passes = test_passes_requested()
    if _loaded and (_test_loaded or not test_passes) and _lazy_loaded.issuperset(LAZY.values()):
        return
    with _LOAD_LOCK:
        if _loading:  # called again by a module being imported: the outer call completes the registry
            return
        _loading = True
        try:
            import uopir.dialects  # noqa: F401 - passes build ops of every dialect

            for mod in dict.fromkeys(LAZY.values()):
                if mod not in _lazy_loaded:
                    _import(mod)
                    _lazy_loaded.add(mod)
            _loaded = True
            if test_passes and not _test_loaded:
                for mod in TEST_PASS_MODULES:
                    _import(mod)
                _test_loaded = True
        finally:
            _loading = False


def get_pass(name: str) -> PassInfo:
    resolve(name)
    if name not in PASSES:
        raise PipelineError(f"unknown pass '{name}'{did_you_mean(name, PASSES)}")
    return PASSES[name]


def as_names(v: str | Iterable[str] | None) -> frozenset[str]:
    """Pass names from a name, a comma-separated list, or an iterable of either."""
    if v is None:
        return frozenset()
    if isinstance(v, str):
        v = [v]
    return frozenset(x.strip() for item in v for x in item.split(",") if x.strip())


def check_pass_names(names: Iterable[str]) -> None:
    """Raise PipelineError for a name (in a list or comma-separated) that is not a registered pass."""
    for nm in sorted(as_names(list(names))):
        if not resolve(nm) or nm not in PASSES:
            load_passes()  # every name, for the closest spellings
            raise PipelineError(f"unknown pass '{nm}' in --print-ir-before/--print-ir-after{did_you_mean(nm, PASSES)}")


def list_passes_text() -> str:
    """What `uop-opt --list-passes` prints."""
    load_passes()
    out = io.StringIO()

    def opts(infos: tuple[OptionInfo, ...]) -> None:
        for o in infos:
            hlp = f"  {o.help}" if o.help else ""
            out.write(f"      {o.name}: {o.type_text()} = {format_value(o.default)}{hlp}\n")

    out.write("Passes:\n")
    for name in sorted(PASSES):
        p = PASSES[name]
        dial = f"  [{','.join(p.consumes) or '-'} -> {','.join(p.produces) or '-'}]"
        out.write(f"  {name}  -  {p.summary}{dial}\n")
        opts(p.option_infos)
    if PIPELINES:
        out.write("Pass pipelines:\n")
        for name in sorted(PIPELINES):
            pl = PIPELINES[name]
            out.write(f"  {name}  -  {pl.summary}\n")
            opts(pl.option_infos)
    out.write("Anchors (ANCHOR(pass,...)):\n")
    for name in sorted(ANCHORS):
        out.write(f"  {name}(...)  -  {ANCHORS[name].summary}\n")
    return out.getvalue()
