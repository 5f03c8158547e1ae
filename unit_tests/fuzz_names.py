"""The `names` fuzz target: hostile program and variable names through one emitter, checked with the real tool.

`names_case(rng)` has the contract of the targets of fuzz.py (the input text, an extra string, and None or what went
wrong). It draws a few hostile names (`hostile_name`: line breaks, NUL, quotes, backslashes, comment delimiters,
injected LLVM IR / C / MLIR / HTML, unicode, keywords, 10k characters, look-alikes of mangled names), builds
`name_program` (a device program named by the first that reads one kernel.var per other name), sends it through one
emitter and checks it with `check(emitter, program)`:

  c       the C backend compiles it with the system C compiler and runs it to the right values
  llvm    llvmlite parses the module (no global, no module asm, no function but the kernel besides declarations)
          and the llvm backend runs it to the right values
  python  the reference interpreter runs it to the right values
  opencl  the OpenCL driver builds it (where the driver here builds any kernel at all)
  cuda    NVRTC or nvcc compiles it to PTX holding the kernel's entry (where either is installed)
  mlir    xDSL verifies and prints the module, uopir's MLIR importer reads the same names back, mlir-opt parses it
          (where installed)
  viz     the visualizer page of a trace of it: html.parser finds the page's three scripts, the trace's JSON parses
          back to the trace, the page is UTF-8
  dot     Graphviz's parser reads its `uop-opt --view-op-graph` text and counts exactly its nodes and edges
          (`gc`, where Graphviz is installed)

Every emitted source text must also be printable ASCII and newlines only (so a name's line break, NUL or non-ASCII
character never stands in it raw), and no line of it may start with an injected payload (`INJECTIONS`).
unit_tests/test_hostile_names.py runs the same checks on the fixed `HOSTILE` list and on hypothesis's names.
"""
from __future__ import annotations

import functools
import html.parser
import json
import random
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import uopir  # noqa: F401 - registers the dialects
from uopir.dialects import core as C
from uopir.dialects import device as D
from uopir.dialects import kernel as K
from uopir.ir.dtype import dtypes
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp

# payloads that would be code if a name's line break ended the comment holding it
INJECTIONS = (
    "@uopir_injected = global i32 7",
    'module asm "uopir_injected"',
    "#error uopir_injected",
    "int uopir_injected = 7;",
    "func.func @uopir_injected()",
    "</script><script>uopir_injected()</script>",
)
HOSTILE: tuple[str, ...] = (
    "", "\n", "\r", "\r\n", "\x00", "a\x00b", '"', "'", "\\", "a\\", "\\\n", "*/", "/*", "//", "#", "}", "{", ";",
    "??/", "a??/", "\t", "a b", "a\nb", "%x", "@x", "$", "k.0",
    *(f"x\n{p}\n;" for p in INJECTIONS), "x */ int uopir_injected = 7; /* y", 'x"]; uopir_injected [label="y',
    "</script>", "<!--", "\u2028", "\u2029", "\u0085", "x\u2028y", "\u00e9t\u00e9", "\u65e5\u672c", "\U0001f600",
    "\u202e", "\x7f", "\x1b[31m",
    "x" * 20000,
    "int", "void", "return", "main", "class", "this", "kernel", "global", "local", "half", "bool", "define", "declare",
    "threadIdx", "get_global_id", "memcpy", "free", "exp2f", "NAN", "INT8_MIN", "int64_t", "_Bool", "__global__",
    "v0", "data0", "acc0", "ridx0", "core_id", "f32_bits", "max_f32", "9lives", "_x", "a__b", "abc_h12345678",
)
KEYWORDS = ("int", "void", "for", "if", "class", "template", "namespace", "kernel", "__kernel", "__global__", "local",
            "private", "half", "define", "declare", "global", "module", "func", "script", "digraph", "node")
EMITTERS = ("c", "llvm", "python", "opencl", "cuda", "mlir", "viz", "dot")
_PIECES = "\n\r\x00\"'\\*/#{}<>!-%@$;:,.= \t?\u2028\u2029\u0085\x7f\x1b\u202e"
N = 8  # elements of each buffer


# ---- names and the program -------------------------------------------------------------------------------------------
def hostile_name(rng: random.Random) -> str:
    """One name an attacker might write (no lone surrogates: the fuzzer saves its inputs as UTF-8)."""
    r = rng.random()
    if r < 0.3:
        return rng.choice(HOSTILE)
    if r < 0.5:
        pool = _PIECES + "abcxyz019_"
        return "".join(rng.choice(pool) if rng.random() < 0.8 else chr(rng.choice(
            (rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0x10FFFF)))) for _ in range(rng.randint(1, 12)))
    if r < 0.7:
        return rng.choice(("", "\n", " ", "*/", "\r")).join(rng.choice(HOSTILE[:40]) for _ in range(rng.randint(2, 3)))
    if r < 0.8:
        return rng.choice(KEYWORDS)
    if r < 0.9:
        return rng.choice(HOSTILE) * rng.randint(100, 2000)
    stem = rng.choice("abcNx") + "".join(rng.choice("abc019_") for _ in range(rng.randint(0, 8)))
    return stem + (f"_h{rng.getrandbits(32):08x}" if rng.random() < 0.5 else "")


def name_program(name: str, var_names: Sequence[str]) -> UOp:
    """A device program `name`: for i < 8, out[i] = x[i] + sum_j (j + 1) * var_j (int32; one kernel.var per name)."""
    i32 = dtypes.int32
    out, x = UOp(K.PARAM, i32.ptr(), (), 0), UOp(K.PARAM, i32.ptr(), (), 1)
    loop = UOp(D.LOOP, dtypes.index, (UOp.const(dtypes.index, N),), 0)
    total = UOp.const(dtypes.index, 0)
    for j, v in enumerate(var_names):
        total = total + UOp(K.VAR, dtypes.index, (), (v, 0, 100)) * UOp.const(dtypes.index, j + 1)
    value = UOp(K.LOAD, i32, (UOp(K.INDEX, x.dtype, (x, loop)),)) + UOp(C.CAST, i32, (total,))
    store = UOp(K.STORE, dtypes.void, (UOp(K.INDEX, out.dtype, (out, loop)), value))
    return UOp(D.PROGRAM, dtypes.void, (*store.toposort(), UOp(D.ENDLOOP, dtypes.void, (loop, store))), name)


def var_names(program: UOp) -> list[str]:
    """The program's variable names, in the order name_program added them (by their factor j + 1)."""
    muls = [u for u in program.toposort() if u.op is C.MUL and u.src[0].op is K.VAR]
    return [m.src[0].arg[0] for m in sorted(muls, key=lambda m: m.src[1].arg)]


def inputs(program: UOp) -> tuple[np.ndarray, dict[str, int]]:
    """The x buffer and a value for each variable (the j-th gets j + 2)."""
    return np.arange(N, dtype=np.int32) * 3 - 5, {v: j + 2 for j, v in enumerate(var_names(program))}


def expected(program: UOp) -> np.ndarray:
    x, vals = inputs(program)
    return x + np.int32(sum((j + 1) * vals[v] for j, v in enumerate(var_names(program))))


# ---- checks every emitted text gets ----------------------------------------------------------------------------------
def check_text(text: str, what: str) -> str | None:
    """Printable ASCII and newlines only; no line starts with an injected payload."""
    bad = next((c for c in text if not (" " <= c <= "~" or c == "\n")), None)
    if bad is not None:
        return f"{what}: the text holds {bad!r} (only printable ASCII and newlines may reach generated code)"
    for line in text.split("\n"):
        hit = next((p for p in INJECTIONS if line.lstrip().startswith(p)), None)
        if hit is not None:
            return f"{what}: a name's payload became a line of its own: {line[:120]!r}"
    return None


def _ran(program: UOp, got: np.ndarray, who: str) -> str | None:
    want = expected(program)
    return None if np.array_equal(got, want) else f"{who}: computed {got.tolist()}, expected {want.tolist()}"


@functools.cache
def _c_backend() -> Any:
    from uopir.backends.c.backend import CBackend
    from uopir.backends.c.compiler import CCompiler

    be = CBackend(CCompiler())  # an explicit compiler: the system C compiler's binary from the first launch
    return be if be.available else None


def check_c(program: UOp) -> str | None:
    from uopir.backends.c.renderer import CRenderer

    why = check_text(CRenderer().render(program), "C")
    be = _c_backend()
    if why is not None or be is None:
        return why
    x, vals = inputs(program)
    out = np.zeros(N, np.int32)
    be.runtime.launch(be.compile(program), [out, x], var_vals=vals)
    return _ran(program, out, "the C backend")


def check_llvm(program: UOp) -> str | None:
    from uopir.backends.llvm.compiler import llvm_host
    from uopir.backends.llvm.renderer import LLVMRenderer, kernel_signature
    from uopir.backends.registry import get_backend

    src = LLVMRenderer().render(program)
    why = check_text(src, "LLVM IR")
    host = llvm_host()
    if why is not None or host is None:
        return why
    mod = host.binding.parse_assembly(src)
    mod.verify()
    defined = [f.name for f in mod.functions if not f.is_declaration]
    if defined != [kernel_signature(program).name] or list(mod.global_variables) or "module asm" in str(mod):
        return f"LLVM IR: the module defines {defined} and globals {[g.name for g in mod.global_variables]}"
    be = get_backend("llvm")
    x, vals = inputs(program)
    out = np.zeros(N, np.int32)
    be.runtime.launch(be.compile(program), [out, x], var_vals=vals)
    return _ran(program, out, "the llvm backend")


def check_python(program: UOp) -> str | None:
    from uopir.backends.registry import get_backend

    be = get_backend("python")
    x, vals = inputs(program)
    bufs = [be.allocator.from_numpy(np.zeros(N, np.int32), dtypes.int32), be.allocator.from_numpy(x, dtypes.int32)]
    be.runtime.launch(be.compile(program), bufs, var_vals=vals)
    return _ran(program, bufs[0].numpy(), "the reference interpreter")


@functools.cache
def opencl_compiler() -> Any:
    """The OpenCL backend's compiler when the driver here builds a trivial kernel, else None."""
    from uopir.backends.registry import get_backend

    be = get_backend("opencl")
    if not be.available:
        return None
    try:
        be.compiler.compile("__kernel void k(__global int* a) { a[0] = 1; }")
    except Exception:  # noqa: BLE001 - a driver that builds nothing: nothing to check against
        return None
    return be.compiler


def check_opencl(program: UOp) -> str | None:
    from uopir.backends.gpu.renderer import GpuRenderer
    from uopir.backends.opencl.language import OPENCL

    src = GpuRenderer(OPENCL).render(program)
    why = check_text(src, "OpenCL C")
    comp = opencl_compiler()
    if why is None and comp is not None:
        comp.compile(src)
    return why


@functools.cache
def cuda_compiler() -> Any:
    """A CUDACompiler with NVRTC or nvcc (whichever is installed), else None."""
    from uopir.backends.cuda.compiler import CUDACompiler, find_nvcc, find_nvrtc

    tool = "nvrtc" if find_nvrtc() is not None else "nvcc" if find_nvcc() is not None else None
    return CUDACompiler("sm_90", tool) if tool else None


def check_cuda(program: UOp) -> str | None:
    from uopir.backends.cuda.language import CUDA
    from uopir.backends.gpu.renderer import GpuRenderer, kernel_name

    src = GpuRenderer(CUDA).render(program)
    why = check_text(src, "CUDA C")
    comp = cuda_compiler()
    if why is not None or comp is None:
        return why
    ptx = comp.compile(src).decode()
    return None if f".entry {kernel_name(program, CUDA)}(" in ptx else "CUDA: the PTX lacks the kernel's entry"


def check_mlir(program: UOp, texts: list[str] | None = None) -> str | None:
    """The MLIR checks; with `texts`, the module's text is appended there for the caller's one mlir-opt run over
    many modules (`mlir_opt_all`: a process per module cost most of the check) instead of a run of its own."""
    from uopir.backends.codegen.names import mlir_text
    from uopir.backends.mlir.export import export_module, print_module
    from uopir.backends.mlir.importer import import_module

    text = print_module(export_module(UOp.sink(program)))
    why = check_text(text, "MLIR")
    if why is not None:
        return why
    back = import_module(text, "<export>").src[0]  # the names as the export promises them (mlir_text)
    got, want = ([mlir_text(u.arg[0]) for u in p.toposort() if u.op is K.VAR] for p in (back, program))
    if back.arg != mlir_text(program.arg) or sorted(got) != sorted(want):
        return f"MLIR: the names read back are {back.arg!r} and {got!r}"
    if texts is not None:
        texts.append(text)
        return None
    return mlir_opt_all([text])


def mlir_opt_all(texts: list[str]) -> str | None:
    """None when mlir-opt (where installed) parses every module of `texts`: one process, each module checked on its
    own (--split-input-file), the failing one named by its index."""
    from uopir.backends.mlir.tools import find_mlir_tool

    opt = find_mlir_tool("mlir-opt")
    if opt is None or not texts:
        return None
    sep = "\n// -----\n"
    r = subprocess.run([opt, "--split-input-file", "-"], input=sep.join(texts), capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        return f"mlir-opt rejects a module: {r.stderr[:300]}"
    if r.stdout.count("module") < len(texts):
        return f"mlir-opt printed {r.stdout.count('module')} modules for {len(texts)}"
    return None


class _Scripts(html.parser.HTMLParser):
    """The text of every <script> element of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[list[str]] = []
        self.inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append([])
            self.inside = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.inside = False

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.scripts[-1].append(data)


def viz_trace(program: UOp) -> dict:
    """A trace of one pass over the program, titled by its name, its C source recorded under its name."""
    from uopir.backends.c.renderer import CRenderer
    from uopir.ir.trace import tracing
    from uopir.passes.manager import PassManager

    with tracing(program.arg) as tr:
        PassManager.parse("dce").run(UOp.sink(program))
        tr.add_source(program.arg, "c", CRenderer().render(program))
    return tr.to_dict()


def check_viz(program: UOp) -> str | None:
    from uopir.viz.page import render_page

    trace = viz_trace(program)
    page = render_page(trace)
    page.encode("utf-8")  # a lone surrogate would raise here, as writing the page would
    p = _Scripts()
    p.feed(page)
    p.close()
    if len(p.scripts) != 3:
        return f"viz: the page has {len(p.scripts)} script elements, expected 3 (a name closed one)"
    data = "".join(p.scripts[0])
    if json.loads(data) != json.loads(json.dumps(trace)):
        return "viz: the trace in the page does not parse back to the trace"
    if any(s in data for s in ("\u2028", "\u2029", "<", "&")):
        return "viz: the trace's JSON holds a character that is not escaped for a script element"
    return None


def check_dot(program: UOp) -> str | None:
    from uopir.ir.dot import to_dot

    root = UOp.sink(program)
    text = to_dot(root, program.arg)
    if any(c in text for c in "\r\x00\u2028\u2029\u0085"):
        return "dot: a line break or NUL of a name stands raw in the text"
    gc = shutil.which("gc")  # Graphviz's graph counter: its parser (cgraph, dot's) without a layout
    if gc is None:
        return None
    r = subprocess.run([gc, "-n", "-e"], input=text.encode("utf-8"), capture_output=True, timeout=60)
    if r.returncode != 0 or r.stderr or not r.stdout.strip():  # gc exits 0 on a syntax error: it says so
        return f"Graphviz rejects the graph: {r.stderr.decode(errors='replace')[:300]}"
    nodes, edges = (int(w) for w in r.stdout.split()[:2])
    want = len(root.toposort()), sum(len(u.src) for u in root.toposort())
    return None if (nodes, edges) == want else f"dot: Graphviz reads {nodes} nodes and {edges} edges, expected {want}"


CHECKS: dict[str, Callable[[UOp], str | None]] = {
    "c": check_c, "llvm": check_llvm, "python": check_python, "opencl": check_opencl, "cuda": check_cuda,
    "mlir": check_mlir, "viz": check_viz, "dot": check_dot,
}


def check(emitter: str, program: UOp) -> str | None:
    """None when `program` goes through `emitter` as the module docstring says, else what went wrong."""
    try:
        return CHECKS[emitter](program)
    except Exception as e:  # noqa: BLE001 - a crash is a finding: report it, with the tool's message
        return f"{emitter}: {type(e).__name__}: {str(e)[:2000]}"


def names_case(rng: random.Random) -> tuple[str, str, str | None]:
    """One fuzz case: the program (as .uop text, the names in a comment line above it), the emitter, the verdict."""
    names = [hostile_name(rng) for _ in range(rng.randint(1, 4))]
    program = name_program(names[0], list(dict.fromkeys(names[1:])))
    emitter = rng.choice(EMITTERS)
    text = f"// names: {json.dumps(names)}\n{print_ir(program)}"
    return text, emitter, check(emitter, program)
