"""uop-opt: parse .uop text, verify it, run a pass pipeline, print the result (mlir-opt's habits).

A thin layer over `uopir.passes.manager.PassManager`: everything here is argument handling, input splitting,
--verify-diagnostics and turning every failure into `file:line:col: error: ...` on stderr with exit code 1.
No input, however bad, ends in a Python traceback; a bug in uopir itself prints "internal error" and exits 2.
"""
from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import stat
import sys
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TextIO

from uopir.ir import env
from uopir.ir.diagnostics import Diagnostic, IRError, Location, source_line
from uopir.tools.common import (
    UsageError,
    add_plugin_options,
    add_version,
    check_environment,
    check_output_file,
    load_plugins,
)

PROG = "uop-opt"


# Characters never echoed raw to a terminal: C0 and C1 controls (a tab only outside source lines), DEL, lone
# surrogates (undecodable input) and the bidirectional overrides that can make text read differently than it is.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_NO_TAB = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _esc_char(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def escape_controls(text: str, keep_tabs: bool = False) -> str:
    """`text` with control characters written as \\xNN / \\uNNNN escapes, safe to print on a terminal."""
    return (_UNSAFE_NO_TAB if keep_tabs else _UNSAFE).sub(_esc_char, text)


def format_diagnostic(d: Diagnostic) -> str:
    """Diagnostic.format with everything that came from the input escaped; the caret stays under its column."""
    loc = d.loc
    where = f"{escape_controls(loc.file)}:{loc.line}:{loc.col}: " if loc is not None else ""
    head = f"{where}{d.severity}: {escape_controls(d.message)}"
    if loc is None or d.source_line is None:
        return head
    line = d.source_line.rstrip("\n")
    before = escape_controls(line[:max(0, loc.col - 1)], keep_tabs=True)
    pad = "".join("\t" if c == "\t" else " " for c in before)
    return f"{head}\n{escape_controls(line, keep_tabs=True)}\n{pad}^"


def _format_error(e: IRError) -> str:
    return "\n".join(format_diagnostic(d) for d in e.diagnostics)


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit 2
        raise UsageError(message)


def build_arg_parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog=PROG, description="Parse, verify, transform and print .uop IR.",
                   epilog="Pipeline syntax: 'a,b{opt=1 flag=true list=1,2},kernel(c)'. See --list-passes.")
    add_version(p)
    p.add_argument("input", nargs="?", default=None,
                   help="input .uop file (or .mlir: see --input-format; or an .onnx model), or - for stdin (default)")
    p.add_argument("-o", "--output", default="-", metavar="OUT", help="output file (default stdout)")
    p.add_argument("-p", "--pass-pipeline", action="append", default=[], metavar="PIPELINE",
                   help="the passes to run, e.g. 'canonicalize,dce' (repeatable: appended)")
    p.add_argument("--print-generic", action="store_true", help="print every op in the generic form")
    p.add_argument("--no-verify", action="store_true", help="do not verify the input nor the IR after each pass")
    p.add_argument("--split-input-file", action="store_true",
                   help="treat '// -----' lines as separators of independent inputs")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check the diagnostics against '// expected-error {{...}}' annotations")
    p.add_argument("--print-ir-before", action="append", default=[], metavar="PASS",
                   help="print the IR before PASS (repeatable, or comma-separated)")
    p.add_argument("--print-ir-after", action="append", default=[], metavar="PASS",
                   help="print the IR after PASS (repeatable, or comma-separated)")
    p.add_argument("--print-ir-before-all", action="store_true", help="print the IR before every pass")
    p.add_argument("--print-ir-after-all", action="store_true", help="print the IR after every pass")
    p.add_argument("--print-ir-after-change", action="store_true", help="print the IR after a pass that changed it")
    p.add_argument("--print-ir-after-failure", action="store_true", help="print the IR after a pass that failed")
    p.add_argument("--timing", action="store_true", help="print the wall time of each pass")
    p.add_argument("--pass-statistics", action="store_true", help="print per-pass pattern and change counts")
    p.add_argument("--list-passes", action="store_true", help="list the registered passes, pipelines and anchors")
    add_plugin_options(p)
    p.add_argument("--load-test-passes", action="store_true",
                   help="also load the test-* passes that test uop-opt itself (or set UOPIR_TEST_PASSES=1)")
    p.add_argument("--emit", metavar="LANG", default=None,
                   help="append the emit-LANG pass to the pipeline and print the source text it emits "
                        "(the text of every device.source op) instead of the IR")
    p.add_argument("--view-op-graph", action="store_true",
                   help="print the result as a Graphviz dot graph (regions as clusters) instead of .uop text")
    p.add_argument("--viz", metavar="FILE", default=None,
                   help="record the visualizer's trace of the run: FILE.json is the trace, FILE.html the page")
    p.add_argument("--input-format", choices=("uop", "mlir"), default=None,
                   help="how to read the input: uopir text, or MLIR of the subset emit-mlir writes (default: mlir for "
                        "a .mlir file, else uop)")
    p.add_argument("--dump-pass-pipeline", action="store_true",
                   help="print the expanded pipeline with every option's value")
    p.add_argument("--tuning-cache", metavar="FILE", default=None,
                   help="the tuning cache kernel-optimize{strategy=beam} reads and records to (a sqlite file, "
                        "created if missing; default: $UOPIR_TUNING_CACHE or tuning.sqlite in the cache folder; "
                        "'none': no cache)")
    p.add_argument("--run-reproducer", action="store_true",
                   help="INPUT is a crash reproducer: run it with the flags in its '// configuration:' header")
    p.add_argument("--reproducer", metavar="PATH", default=None,
                   help="where a crashing pass writes its reproducer (a file or a directory; default: "
                        "$UOPIR_REPRODUCER_DIR or the temp directory; 'none' writes none, the default when "
                        "replaying one)")
    return p


# ---- --verify-diagnostics ------------------------------------------------------------------------------------------
_EXPECT = re.compile(r"expected-(error|warning|note|remark)\s*(?:@\s*(above|below|unknown|[+-]\d+))?\s*\{\{(.*?)\}\}")


@dataclass
class Expectation:
    severity: str
    text: str
    line: int | None  # the line the diagnostic must be on (None: @unknown, an unlocated diagnostic)
    at: Location  # where the annotation is written
    matched: bool = False


def parse_expectations(text: str, filename: str, first_line: int = 1) -> list[Expectation]:
    """The `expected-*` annotations of one input chunk; raises IRError for a malformed one."""
    out: list[Expectation] = []
    lines = text.split("\n")

    def plain(i: int) -> bool:  # a line that can carry a diagnostic: not blank, not only a comment
        s = lines[i].strip()
        return bool(s) and not s.startswith("//")

    pending_below: list[Expectation] = []
    for i, line in enumerate(lines):
        lineno = first_line + i
        cpos = line.find("//")
        hits = list(_EXPECT.finditer(line, cpos)) if cpos >= 0 else []
        if cpos >= 0 and not hits and re.search(r"expected-(error|warning|note|remark)", line[cpos:]):
            col = line.find("expected-", cpos) + 1
            raise IRError("malformed expected-* annotation: write // expected-error @+1 {{text}}",
                          Location(filename, lineno, col), source_line=line)
        if plain(i):
            for e in pending_below:
                e.line = lineno
            pending_below = []
        for m in hits:
            sev, where, msg = m.group(1), m.group(2), m.group(3)
            at = Location(filename, lineno, m.start() + 1)
            e = Expectation(sev, msg.strip(), lineno, at)
            if where is None:
                pass
            elif where == "unknown":
                e.line = None
            elif where == "above":
                j = i - 1
                while j >= 0 and not plain(j):
                    j -= 1
                if j < 0:
                    raise IRError("'@above' has no line above it", at, source_line=line)
                e.line = first_line + j
            elif where == "below":
                e.line = -1
                pending_below.append(e)
            else:
                e.line = lineno + int(where)
            out.append(e)
    for e in pending_below:
        raise IRError("'@below' has no line below it", e.at, source_line=lines[e.at.line - first_line])
    return out


def check_diagnostics(expected: list[Expectation], diags: list[Diagnostic], filename: str) -> list[Diagnostic]:
    """Match produced diagnostics against expectations; the returned errors are the mismatches (empty: success).

    A diagnostic matches an expectation of the same severity on its line whose text it contains."""
    errors: list[Diagnostic] = []
    for d in diags:
        line = d.loc.line if d.loc is not None and d.loc.file == filename else None
        cands = [e for e in expected if e.severity == d.severity and e.line == line and e.text in d.message]
        pick = next((e for e in cands if not e.matched), cands[0] if cands else None)
        if pick is None:
            errors.append(Diagnostic("error", f"unexpected {d.severity}: {d.message}", d.loc,
                                     d.source_line or source_line(d.loc)))
        else:
            pick.matched = True
    for e in expected:
        if not e.matched:
            errors.append(Diagnostic("error", f'expected {e.severity} "{e.text}" was not produced', e.at,
                                     source_line(e.at)))
    return errors


# ---- one input chunk -------------------------------------------------------------------------------------------------
@dataclass
class ChunkResult:
    output: str | None  # the printed IR when everything succeeded
    diagnostics: list[Diagnostic]  # what parsing, verifying and the passes reported (errors and warnings)
    failed: bool
    crash: str | None = None  # the crash message (already including the reproducer's path)


def run_chunk(text: str, filename: str, first_line: int, pm, args: argparse.Namespace, err: TextIO) -> ChunkResult:
    from uopir.dialects import device
    from uopir.ir.diagnostics import source_map
    from uopir.ir.parser import parse_with_source_map
    from uopir.ir.printer import print_ir
    from uopir.ir.verify import collect_diagnostics
    from uopir.passes.errors import PassCrash

    try:  # diagnostics point into this parse, also when another file (another thread) parsed to the same graph
        if _input_format(args, filename) == "uop":
            root, smap = parse_with_source_map(text, filename, first_line)
        else:
            root = _import_mlir(text, filename, first_line)
            smap = source_map(root)
    except IRError as e:
        return ChunkResult(None, e.diagnostics, True)
    diags: list[Diagnostic] = []
    if not args.no_verify:
        diags = collect_diagnostics(root, smap)
        if any(d.severity == "error" for d in diags):
            return ChunkResult(None, diags, True)
    try:
        out = pm.run(root, source=smap, verify=not args.no_verify, print_ir_before=args.print_ir_before,
                     print_ir_after=args.print_ir_after, print_ir_before_all=args.print_ir_before_all,
                     print_ir_after_all=args.print_ir_after_all, print_ir_after_change=args.print_ir_after_change,
                     print_ir_after_failure=args.print_ir_after_failure, timing=args.timing,
                     pass_statistics=args.pass_statistics, print_generic=args.print_generic, out=err,
                     reproducer=False if args.reproducer == "none" else args.reproducer,
                     reproducer_flags="--no-verify" if args.no_verify else "")
    except IRError as e:
        return ChunkResult(None, diags + pm.report.diagnostics + e.diagnostics, True)
    except PassCrash as c:
        lines = [f"{PROG}: error: {escape_controls(str(c))}"]
        if env.DEBUG.is_set():
            lines.append(c.traceback.rstrip())
        if c.reproducer:
            path = escape_controls(c.reproducer)
            lines.append(f"note: crash reproducer written to {path}")
            lines.append(f"note: replay it with: {PROG} --run-reproducer {path}")
        elif args.reproducer != "none":
            lines.append("note: no reproducer could be written")
        return ChunkResult(None, diags + pm.report.diagnostics, True, "\n".join(lines))
    diags = diags + pm.report.diagnostics
    if args.view_op_graph:
        from uopir.ir.dot import to_dot

        return ChunkResult(to_dot(out, os.path.basename(filename)), diags, False)
    if args.emit is None:
        return ChunkResult(print_ir(out, generic=args.print_generic), diags, False)
    sources = [u for u in out.toposort() if u.op is device.SOURCE]
    _trace_sources(sources)
    if not sources:
        return ChunkResult(None, diags + [Diagnostic("error", f"--emit={args.emit}: the pipeline produced no "
                                                               "device.source op to print",
                                                      Location(filename, first_line, 1))], True)
    return ChunkResult("".join(_source_text(u) for u in sources), diags, False)


def _trace_sources(sources: list) -> None:
    from uopir.ir import trace

    if trace.ACTIVE is not None:  # --viz: the page shows the emitted code
        for u in sources:
            a = u.attrs
            trace.ACTIVE.add_source(a.name, a.lang, a.text)


def _input_format(args: argparse.Namespace, filename: str) -> str:
    return args.input_format or ("mlir" if filename.endswith(".mlir") else "uop")


def _import_mlir(text: str, filename: str, first_line: int):
    from uopir.backends.mlir.importer import import_module

    return import_module(text, filename, first_line)


def _source_text(u) -> str:
    text = u.attrs.text
    return text if text.endswith("\n") or not text else text + "\n"


# ---- main ------------------------------------------------------------------------------------------------------------
def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"cannot read '{name}': not UTF-8 text ({e.reason} at byte {e.start})") from None


def _read_stdin() -> str:
    stdin = sys.stdin
    if stdin is None:
        raise UsageError("cannot read '<stdin>': standard input is closed")
    try:
        buffer = getattr(stdin, "buffer", None)
        if buffer is not None:  # read bytes: the text is UTF-8 whatever the locale says
            return _decode(buffer.read(), "<stdin>")
        return stdin.read()
    except OSError as e:
        raise UsageError(f"cannot read '<stdin>': {e.strerror or e}") from None
    except ValueError as e:  # reading a closed file object
        raise UsageError(f"cannot read '<stdin>': {e}") from None


def _read_input(path: str) -> tuple[str, str]:
    if path == "-":
        return _read_stdin(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except FileNotFoundError:
        raise UsageError(f"cannot open '{path}': no such file") from None
    except IsADirectoryError:
        raise UsageError(f"cannot open '{path}': it is a directory") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"cannot read '{path}': not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"cannot open '{path}': {e.strerror or e}") from None


def _read_onnx(path: str) -> tuple[str, str]:
    """An ONNX model as input: its tensor-level IR (uopir.onnx), printed and then read like any .uop text."""
    try:
        from uopir.onnx.cli import load, model_ir
    except ImportError as e:
        raise UsageError(f"cannot read '{path}': {e}") from None
    from uopir.onnx.registry import OnnxImportError
    try:
        return model_ir(load(path, "python")), path
    except FileNotFoundError:
        raise UsageError(f"cannot open '{path}': no such file") from None
    except (OSError, OnnxImportError) as e:
        raise UsageError(f"{path}: {e}") from None


# What a reproducer's `// configuration:` line may set: the pipeline and verification, nothing that touches files.
_REPRODUCER_FLAGS = ("-p", "--pass-pipeline", "--no-verify")


def _reproducer_config(config: str, name: str) -> list[str]:
    """The flags of a reproducer's configuration line, checked: only the pipeline and --no-verify are honoured, so
    a hostile reproducer cannot make uop-opt write files (-o) or load anything."""
    try:
        words = shlex.split(config)
    except ValueError as e:
        raise UsageError(f"bad reproducer configuration in '{name}': {e}") from None
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        flag = w.split("=", 1)[0] if w.startswith("--") else w
        if flag not in _REPRODUCER_FLAGS:
            raise UsageError(f"reproducer '{name}': its configuration may only set --pass-pipeline and --no-verify, "
                             f"not '{w}'")
        if flag == "--no-verify":
            if "=" in w:
                raise UsageError(f"reproducer '{name}': --no-verify takes no value (got '{w}')")
            out.append(w)
        elif "=" in w and w.startswith("--"):
            out.append(w)
        else:
            if i + 1 >= len(words):
                raise UsageError(f"reproducer '{name}': '{w}' needs a pipeline after it")
            out.append(f"--pass-pipeline={words[i + 1]}")
            i += 1
        i += 1
    return out


def _replay_argv(argv: list[str], args: argparse.Namespace) -> list[str]:
    """The argument list a reproducer asks for: its checked configuration flags, the file, the user's other flags."""
    from uopir.passes.instruments import read_reproducer

    text, _ = _read_input(args.input)
    config = _reproducer_config(read_reproducer(text), args.input)
    rest = [a for a in argv if a != "--run-reproducer"]
    if args.reproducer is None:
        rest.append("--reproducer=none")  # replaying a crash should not write a new reproducer each time
    return [*config, *rest]


def _main(argv: list[str], out: TextIO, err: TextIO) -> int:
    args = build_arg_parser().parse_args(argv)
    check_environment()
    explicit_input = args.input is not None
    if args.input is None:
        args.input = "-"
    if args.run_reproducer:
        return _main(_replay_argv(argv, args), out, err)
    if args.tuning_cache is not None:
        with _tuning_cache(args.tuning_cache):
            return _run(args, explicit_input, out, err)
    return _run(args, explicit_input, out, err)


def _run(args: argparse.Namespace, explicit_input: bool, out: TextIO, err: TextIO) -> int:
    if args.output != "-":
        check_output_file(args.output, "-o")
    if args.reproducer not in (None, "none") and not os.path.isdir(args.reproducer):  # a folder: a new file in it
        check_output_file(args.reproducer, "--reproducer")
    if args.viz is not None:
        check_output_file(args.viz, "--viz")
    import uopir.backends  # noqa: F401 - registers each device's target description (`default{target=c}`) and emit-c
    import uopir.search  # noqa: F401 - installs kernel-optimize{strategy=beam}
    from uopir.passes.manager import PassManager
    from uopir.passes.registry import check_pass_names, list_passes_text, load_passes

    listing = load_plugins(args)
    if listing is not None:
        _write_stream(out, listing, "stdout")
        return 0

    if args.list_passes or args.load_test_passes:  # else each pass module loads when the pipeline names it
        load_passes(test_passes=True if args.load_test_passes else None)
    if args.list_passes:
        _write_stream(out, list_passes_text(), "stdout")
        return 0
    pipeline = ",".join(p for p in args.pass_pipeline if p.strip())
    try:
        pm = PassManager.parse(pipeline)
        check_pass_names([*args.print_ir_before, *args.print_ir_after])
    except IRError as e:
        err.write(_format_error(e) + "\n")
        return 1
    if args.emit is not None:
        _add_emitter(pm, args.emit)
    if args.dump_pass_pipeline:
        n = len(pm.steps)
        dump = f"Pass Manager with {n} pass{'es' if n != 1 else ''}:\n{pm.text()}\n"
        if not explicit_input:
            _write_stream(out, dump, "stdout")
            return 0
        err.write(dump)
    text, filename = _read_onnx(args.input) if args.input.lower().endswith(".onnx") else _read_input(args.input)
    if args.split_input_file:
        from uopir.ir.parser import split_input

        chunks = split_input(text)
    else:
        chunks = [(1, text)]
    if args.viz is not None:
        return _with_viz(args, filename, lambda: _run_chunks(chunks, filename, pm, args, out, err), err)
    return _run_chunks(chunks, filename, pm, args, out, err)


def _tuning_cache(path: str) -> AbstractContextManager[object]:
    """The --tuning-cache file, opened and checked before any work, as the one searches use during the run."""
    from uopir.search.cache import TuningCache, TuningCacheError, using_tuning_cache

    try:
        return using_tuning_cache(None if path == "none" else TuningCache(path))
    except TuningCacheError as e:
        raise UsageError(f"--tuning-cache: {e}") from None


def _with_viz(args: argparse.Namespace, filename: str, run, err: TextIO) -> int:
    """Run with the visualizer's trace on; write it (FILE.json: the trace, FILE.html: the page), even after errors."""
    from pathlib import Path

    from uopir.frontend.viz import save
    from uopir.ir import trace

    path = Path(args.viz)
    if path.suffix not in (".json", ".html"):
        raise UsageError(f"--viz={args.viz!r}: the file name ends in .json (the trace) or .html (the page)")
    html = path.suffix == ".html"
    with trace.tracing(os.path.basename(filename)) as tr:
        rc = run()
    try:
        files = save(tr.to_dict(), None if html else path, path if html else None)
    except OSError as e:
        err.write(f"{PROG}: error: --viz: cannot write {escape_controls(str(path))}: {e.strerror}\n")
        return 1
    err.write(f"{PROG}: visualizer {'page' if html else 'trace'} written to {escape_controls(str(files[0]))}\n")
    return rc


def _run_chunks(chunks: list[tuple[int, str]], filename: str, pm, args: argparse.Namespace, out: TextIO,
                err: TextIO) -> int:
    outputs: list[str] = []
    ok = True
    for first_line, chunk in chunks:
        res = run_chunk(chunk, filename, first_line, pm, args, err)
        if args.verify_diagnostics:
            try:
                expected = parse_expectations(chunk, filename, first_line)
            except IRError as e:
                err.write(_format_error(e) + "\n")
                ok = False
                continue
            mismatches = check_diagnostics(expected, res.diagnostics, filename)
            if res.crash is not None:
                err.write(res.crash + "\n")
                ok = False
            for d in mismatches:
                err.write(format_diagnostic(d) + "\n")
            if mismatches:
                ok = False
            if res.output is not None:
                outputs.append(res.output)
            continue
        for d in res.diagnostics:
            err.write(format_diagnostic(d) + "\n")
        if res.crash is not None:
            err.write(res.crash + "\n")
        if res.failed:
            ok = False
        elif res.output is not None:
            outputs.append(res.output)
    if ok or args.output == "-":  # an output file is written only on success: a failure leaves it as it was
        _write_output(args.output, outputs, out)
    return 0 if ok else 1


def _add_emitter(pm, lang: str) -> None:
    """Append `emit-LANG` (a pass or a named pipeline) to the pipeline; UsageError when there is none."""
    from uopir.passes.registry import PASSES, PIPELINES, load_passes, resolve

    if not re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*", lang):
        raise UsageError(f"--emit={lang!r}: a language name is lowercase letters and digits (e.g. --emit=c)")
    name = f"emit-{lang}"
    if not resolve(name):
        load_passes()  # the message lists every emitter
        known = sorted(n[len("emit-"):] for n in [*PASSES, *PIPELINES] if n.startswith("emit-"))
        have = f" (emitters: {', '.join(known)})" if known else ""
        raise UsageError(f"no emitter for '{lang}' is registered yet ({name}){have}")
    pm.add(name)


def _write_output(path: str, outputs: list[str], out: TextIO) -> None:
    """Write the result: to `out` for '-', else to the file `path`, atomically (a temporary file in the same
    folder renamed over it), so that a failure never leaves a truncated or half-written file behind."""
    text = "// -----\n".join(o if o.endswith("\n") else o + "\n" for o in outputs)
    if path == "-":
        _write_stream(out, text, "stdout")
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):  # /dev/null, a fifo, a terminal: no rename possible
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise UsageError(f"cannot write '{path}': {e.strerror or e}") from None
        return
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UsageError(f"cannot write '{path}': {e.strerror or e}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_stream(stream: TextIO, text: str, name: str) -> None:
    """Write and flush; a failing stream (a full disk, /dev/full) is a UsageError, not an internal error."""
    try:
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:  # .uop text is UTF-8 whatever the locale's encoding
            stream.flush()
            buffer.write(text.encode("utf-8"))
            buffer.flush()
        else:
            stream.write(text)
            stream.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        _silence(stream)
        raise UsageError(f"cannot write to {name}: {e.strerror or e}") from None


def _silence(stream: TextIO) -> None:
    """Point a failed stream's file descriptor at /dev/null, so the flush at exit does not fail again."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The uop-opt program; returns the exit code (0 ok, 1 bad input, failed checks or a failing environment
    (unreadable stdin, a full disk), 2 internal error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if err is None:  # stderr is closed: run anyway, the exit code still tells
        err = io.StringIO()
    try:
        return _main_reporting(argv, out, err)
    except OSError:  # the error stream itself fails (stderr on a full disk): nothing more can be said
        _silence(err)
        return 1


def _main_reporting(argv: list[str], out: TextIO | None, err: TextIO) -> int:
    try:
        if out is None:
            raise UsageError("cannot write to stdout: standard output is closed")
        return _main(argv, out, err)
    except UsageError as e:
        err.write(f"{PROG}: error: {escape_controls(str(e))}\n")
        return 1
    except IRError as e:
        err.write(_format_error(e) + "\n")
        return 1
    except KeyboardInterrupt:
        err.write(f"{PROG}: interrupted\n")
        return 130
    except BrokenPipeError:
        if out is not None:
            _silence(out)  # the flush at exit must not fail again
        return 1
    except RecursionError:
        err.write(f"{PROG}: error: input nested too deeply\n")
        return 1
    except SystemExit as e:  # argparse --help
        return int(e.code or 0) if isinstance(e.code, int) else 0
    except Exception as e:  # noqa: BLE001 - never a traceback for the user
        return internal_error(PROG, e, err)


def internal_error(prog: str, e: Exception, err: TextIO) -> int:
    """Report an exception that bad input cannot cause (a bug in uopir) in one line, with the traceback only under
    $UOPIR_DEBUG; returns the exit code 2."""
    import traceback

    err.write(f"{prog}: internal error: {type(e).__name__}: {escape_controls(str(e))}\n"
              "note: this is a bug in uopir; rerun with UOPIR_DEBUG=1 for the traceback and report it\n")
    if env.DEBUG.is_set():
        traceback.print_exception(e, file=err)
    return 2


if __name__ == "__main__":
    sys.exit(main())
