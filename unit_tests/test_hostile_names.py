"""Hostile names never become code (issue 24, item 1): every program, kernel and variable name reaches generated
source through uopir.backends.codegen.names (or the visualizer's and Graphviz's own escaping).

The regression at the root: the LLVM renderer wrote `; kernel NAME: ... vars (...)` with the raw names, so a newline
in a `device.program` name of a .uop file, or in a `Variable("...")` name, ended the comment and the rest became LLVM
IR (`@uopir_injected = global i32 7` compiled and ran; `module asm "..."` aborted the process). The C, OpenCL and
CUDA renderers made different identifiers of the same name (two variables `a\\nb` and `a b` became one parameter),
kept names their headers define (`int64_t`, `threadIdx`, `class`), the MLIR export could give two functions one
name, the visualizer page let U+2028 and lone surrogates through, and dot text carried raw CRs and NULs.

The checks (unit_tests/fuzz_names.py, shared with the `names` fuzz target) use the real tools: the system C
compiler, llvmlite, NVRTC or nvcc, the OpenCL driver where it builds kernels, xDSL and mlir-opt, html.parser and
json, Graphviz; each run must give the values the reference interpreter gives.
"""
from __future__ import annotations

import ctypes
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fuzz_names import (
    EMITTERS,
    HOSTILE,
    INJECTIONS,
    check,
    check_mlir,
    check_text,
    cuda_compiler,
    expected,
    mlir_opt_all,
    name_program,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proptest import examples

from uopir import Tensor
from uopir.backends.c.compiler import CCompiler, find_cc
from uopir.backends.codegen.cprelude import HELPERS, bitcast_helper, float_helper, int_helper, vector_max, vector_type
from uopir.backends.codegen.names import (
    MAX_PLAIN,
    c_comment,
    c_ident,
    c_string,
    cuda_ident,
    llvm_comment,
    llvm_ident,
    llvm_string,
    mlir_ident,
    opencl_ident,
)
from uopir.backends.emit import programs
from uopir.backends.llvm.compiler import llvm_host
from uopir.backends.llvm.renderer import LLVMRenderer
from uopir.backends.registry import get_backend
from uopir.frontend.variable import Variable
from uopir.ir.dtype import dtypes
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.tools.uop_run import main as uop_run

needs_cc = pytest.mark.skipif(find_cc() is None, reason="no C compiler ($CC, clang or cc) is installed")
needs_llvm = pytest.mark.skipif(llvm_host() is None, reason="llvmlite is not installed")
IDENTS = {"c": c_ident, "opencl": opencl_ident, "cuda": cuda_ident, "llvm": llvm_ident, "mlir": mlir_ident}
# names the lit tests and the scheduler give kernels and variables: they must come out as they went in
ORDINARY = ("r_4_3", "E_16", "E_4_3", "r_64_128", "copy_8", "k", "gids", "local_sum", "divmod", "scale_exp", "n",
            "rows", "i", "N", "x1", "a_b_", "k" * MAX_PLAIN)
INJECT = "x\n@uopir_injected = global i32 7\n;"
OUTPUTS = tuple(e for e in EMITTERS if e != "python")  # the python check runs the reference, which writes no text


# ---- the rules themselves --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", sorted(IDENTS))
def test_ordinary_names_are_kept_and_every_other_becomes_a_distinct_identifier(lang: str) -> None:
    ident = IDENTS[lang]
    assert [ident(n) for n in ORDINARY] == list(ORDINARY)
    names = sorted(set(HOSTILE))
    got = [ident(n) for n in names]
    for n, g in zip(names, got, strict=True):
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", g) and "__" not in g, (n[:40], g)
        assert len(g) <= MAX_PLAIN and g == ident(n)  # short and deterministic
    assert len(set(got)) == len(names)  # no two names of the list meet, not even `a\nb`, `a b` and `a__b`
    # a name that looks like a changed one is changed too, so it cannot meet the name it imitates
    assert ident(ident("a\nb")) != ident("a\nb")


_DEFINED = re.compile(r"\b([A-Za-z_]\w*)\s*\(|typedef [^;]*?\b(\w+)\s*(?:__attribute__\(\(.*?\)\))?;|#define (\w+)")


def _defined(text: str) -> set[str]:
    """The names a piece of generated C text defines or calls: functions, typedefs, macros."""
    return {n for m in _DEFINED.finditer(text) for n in m.groups() if n}


def test_names_the_generated_code_defines_are_never_given_to_a_kernel_or_variable() -> None:
    """Every function, type and macro the C prelude and each gpu language's helpers and header define or call, and
    the locals the renderers write, are reserved: a kernel or variable of that name would clash with it or hide it.
    Read from the texts themselves, so a new helper cannot be forgotten."""
    from uopir.backends.cuda.language import CUDA
    from uopir.backends.opencl.language import OPENCL

    prelude = "\n".join(h.text for h in HELPERS.values())
    for d in (dtypes.int8, dtypes.uint64, dtypes.int32, dtypes.index):
        prelude += "\n".join(int_helper(k, d)[1].text for k in ("idiv", "mod", "f2i"))
    prelude += float_helper("max", dtypes.float64)[1].text + bitcast_helper(dtypes.bfloat16, dtypes.int16)[1].text
    for d in (dtypes.float32.vec(4), dtypes.float64.vec(8), dtypes.int32.vec(4), dtypes.uint8.vec(16)):
        prelude += vector_type(d)[1].text + vector_max(d)[1].text
    prelude += "__builtin_convertvector(v, i32x4)"  # integer vector code (uopir.backends.codegen.cvector)
    locals_ = {"data0", "unused3", "v12", "v3_1", "acc0", "ridx2", "reg0", "gidx0", "gsize0", "lidx1", "gid0",
               "lmem0", "core_id", "core_count", "NAN", "INFINITY", "calloc", "free", "abort"}
    for lang, ident, extra in (("c", c_ident, ""), ("llvm", llvm_ident, ""), ("mlir", mlir_ident, ""),
                               ("opencl", opencl_ident, OPENCL.header(prelude + "double NAN memcpy exp2f( f16_to_f32")
                                + "\n".join(h.text for h in OPENCL.helpers.values())),
                               ("cuda", cuda_ident, CUDA.header("UOPIR_CUDA_FP16 UOPIR_CUDA_BF16 NAN INFINITY")
                                + "\n".join(h.text for h in CUDA.helpers.values()))):
        names = _defined(prelude + extra) | locals_
        assert len(names) > 60
        kept = sorted(n for n in names if ident(n) == n)
        assert not kept, (lang, kept)
    assert [n for n in ("get_global_id", "barrier", "vload4", "as_uint", "uchar", "float4", "kernel", "local")
            if opencl_ident(n) == n] == []
    assert [n for n in ("threadIdx", "blockDim", "__syncthreads", "class", "this", "new", "atomicAdd", "float4",
                        "hsin", "half") if cuda_ident(n) == n] == []


TEXTS = [*HOSTILE[:60], "\x01\x7f\xff", "8?9??=", 'x"', "a\\", "\\012", "*\\/", "\U0001f600\u2028", "k\ud800"]


@needs_cc
def test_c_strings_hold_exactly_the_text_and_c_comments_never_end_early(tmp_path: Path) -> None:
    """The real C compiler reads each c_string back as the text's UTF-8 bytes, and a line of code after each
    `//` and `/* */` comment holding c_comment(text) is still code: every `keep_N` symbol exists, no injected one."""
    lines = []
    for i, t in enumerate(TEXTS):
        assert not any(s in c_comment(t) for s in ("\n", "*/", "/*"))
        lines += [f"const unsigned char str{i}[] = {c_string(t)};", f"const unsigned long len{i} = sizeof str{i} - 1;",
                  f"// {c_comment(t)}", f"int keep{i}(void) {{ return {i}; }}",
                  f"/* {c_comment(t)} */ int keep_b{i}(void) {{ return {i}; }}"]
    so = tmp_path / "strings.so"
    so.write_bytes(CCompiler().compile("\n".join(lines) + "\n"))
    lib = ctypes.CDLL(str(so))
    for i, t in enumerate(TEXTS):
        want = t.encode("utf-8", "surrogatepass")
        n = ctypes.c_ulong.in_dll(lib, f"len{i}").value
        assert bytes((ctypes.c_ubyte * n).in_dll(lib, f"str{i}")) == want, t[:40]
        assert lib[f"keep{i}"]() == i and lib[f"keep_b{i}"]() == i
    with pytest.raises(AttributeError):
        lib["uopir_injected"]


@needs_llvm
def test_llvm_strings_are_what_llvm_prints_and_llvm_comments_never_end_early() -> None:
    """LLVM parses a `c"..."` constant of each llvm_string with exactly the text's byte count and prints it back
    the same way; a `;` comment of llvm_comment(text) leaves the next line code and injects no global."""
    host = llvm_host()
    lines = []
    for i, t in enumerate(TEXTS):
        n = len(t.encode("utf-8", "surrogatepass"))
        lines += [f"; {llvm_comment(t)}", f"@s{i} = constant [{n} x i8] c{llvm_string(t)}"]
    mod = host.binding.parse_assembly("\n".join(lines) + "\n")
    printed = str(mod)
    for t in TEXTS:
        # (LLVM prints an all-zero constant as zeroinitializer)
        assert not t.strip("\x00") or f"c{llvm_string(t)}" in printed, t[:40]
    assert sorted(g.name for g in mod.global_variables) == sorted(f"s{i}" for i in range(len(TEXTS)))
    assert llvm_comment("r_4_3") == "r_4_3" and c_comment("r_4_3") == "r_4_3"  # plain names stay readable


# ---- every emitter, the real tools -----------------------------------------------------------------------------------
@pytest.mark.parametrize("emitter", OUTPUTS)
def test_hostile_program_names_through_every_emitter(emitter: str) -> None:
    """Each name of the list names a program that also reads a variable named by the next one; the emitter's text
    passes its tool and the program computes what the reference interpreter computes."""
    # the text check sees the old defects: the LLVM header comment's injected line, a raw NUL
    assert check_text(f"; kernel x\n{INJECTIONS[0]}: 1 buffers\n", "LLVM IR") is not None
    assert check_text("void k(void) {}\n// a\x00b\n", "C") is not None
    texts: list[str] = []  # mlir: every module through one mlir-opt run at the end
    for i, name in enumerate(HOSTILE):
        other = HOSTILE[(i + 1) % len(HOSTILE)]
        program = name_program(name, [other, "n"])
        why = check_mlir(program, texts) if emitter == "mlir" else check(emitter, program)
        assert why is None, (name[:60], why)
    assert mlir_opt_all(texts) is None


@pytest.mark.parametrize("emitter", OUTPUTS)
def test_every_hostile_name_as_a_variable_of_one_program(emitter: str) -> None:
    """All the names as variables of one kernel: their parameters never meet (`a\\nb`, `a b` and `a__b` were one
    C parameter) and each keeps its own value."""
    # what the checks expect, computed independently: out = x + 1*2 + 2*3 with x = 3i - 5
    np.testing.assert_array_equal(expected(name_program("k", ["a", "b"])), np.arange(8, dtype=np.int32) * 3 - 5 + 8)
    assert check(emitter, name_program("all_names", list(dict.fromkeys(HOSTILE)))) is None


@pytest.mark.parametrize("emitter", ["llvm", "mlir", "viz", "dot"])
def test_a_lone_surrogate_in_a_name_breaks_no_emitter(emitter: str) -> None:
    """A Python string need not be valid unicode (`Variable("\\ud800")`): the LLVM escape writes its bytes, the
    MLIR export and the page replace it, dot shows it as text; no encoder raises (C: see the c_string test)."""
    assert check(emitter, name_program("k\ud800", ["\udfff", "n"])) is None


_NAMES = st.one_of(st.text(max_size=24), st.sampled_from(HOSTILE),
                   st.text(alphabet="\n\r\x00\"'\\*/#{}<>;@%$ \u2028\u0085ab1_", max_size=12))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(_NAMES, min_size=1, max_size=4), emitter=st.sampled_from(EMITTERS))
def test_random_names_through_a_random_emitter(names: list[str], emitter: str) -> None:
    program = name_program(names[0], list(dict.fromkeys(names[1:])))
    assert check(emitter, program) is None


# ---- the observed injection, end to end ------------------------------------------------------------------------------
def _program_file(tmp_path: Path, name: str) -> Path:
    f = tmp_path / "prog.uop"
    f.write_text(print_ir(name_program(name, ["n"])), encoding="utf-8")
    return f


@needs_llvm
def test_a_uop_program_name_cannot_inject_llvm_ir(tmp_path: Path) -> None:
    """`device.program {name = "x\\n@uopir_injected = global i32 7\\n;"}` through uop-run --backend=llvm: the run
    matches the reference interpreter bit for bit and the module uop-opt --emit=llvm prints has no global."""
    from uopir.tools.uop_opt import main as uop_opt

    f = _program_file(tmp_path, INJECT)
    out, err = io.StringIO(), io.StringIO()
    assert uop_run([str(f), "--backend=llvm", "--check", "--var", "n=3"], out, err) == 0, err.getvalue()
    assert out.getvalue().splitlines()[-1] == "check %0: bit-exact"
    out, err = io.StringIO(), io.StringIO()
    assert uop_opt([str(f), "--emit=llvm"], out, err) == 0, err.getvalue()
    mod = llvm_host().binding.parse_assembly(out.getvalue())
    assert list(mod.global_variables) == []
    assert out.getvalue().startswith('; kernel "x\\0A@uopir_injected = global i32 7\\0A;": 2 buffers, vars (n)\n')


@needs_llvm
def test_a_variable_name_cannot_inject_llvm_ir_into_a_tensor_program() -> None:
    """`Variable("x\\n@uopir_injected = ...")` in a Tensor program on the llvm device: right values, and the LLVM IR
    of each of its kernels defines the kernel and nothing else."""
    x = np.arange(8, dtype=np.float32)
    v = Variable(INJECT, 1, 8).bind(5)
    t = Tensor(x, device="llvm")[:v] * 2 + 1
    np.testing.assert_array_equal(t.numpy(), x[:5] * 2 + 1)
    progs = programs(get_backend("llvm").lower((Tensor(x, device="llvm")[:v] * 2 + 1).uop))
    assert progs
    for p in progs:
        src = LLVMRenderer().render(p)
        assert check_text(src, "LLVM IR") is None
        mod = llvm_host().binding.parse_assembly(src)
        assert list(mod.global_variables) == [] and len([f for f in mod.functions if not f.is_declaration]) == 1


@needs_llvm
@pytest.mark.parametrize("backend", ["llvm", "c"])
def test_module_asm_in_a_name_does_not_abort_the_process(tmp_path: Path, backend: str) -> None:
    """`module asm "..."` on a line of its own made LLVM abort the process (SIGABRT), on llvm and on the c device's
    in-process tier; now the run ends normally with the reference interpreter's values."""
    if backend == "c" and find_cc() is None:
        pytest.skip("no C compiler")
    f = _program_file(tmp_path, 'x\nmodule asm "nop"\n;')
    code = "import sys; from uopir.tools.uop_run import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, UOPIR_C_TIERED="1", UOPIR_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", code, str(f), f"--backend={backend}", "--check", "--var", "n=2"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.splitlines()[-1] == "check %0: bit-exact"


def test_onnx_graph_and_value_names_stay_inside_their_comments(tmp_path: Path) -> None:
    """uop-opt reads an .onnx file as the .uop text model_ir writes, whose header comments name the graph, inputs and
    outputs: a line break in those names made the rest a line of IR (`unknown op 'boom'`, or IR of the attacker's).
    Now the text parses and runs as the model does."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from uopir.onnx.cli import load, model_ir
    from uopir.tools.uop_opt import main as uop_opt

    x, y = "x\nboom", "y\n%9 = core.const 1.0 : f32"
    g = helper.make_graph([helper.make_node("Relu", [x], [y], name="n\n}")], "g\n%0 = core.const 1.0 : f32\n//",
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info(y, TensorProto.FLOAT, [3])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    text = model_ir(load(str(path), "python"))
    assert all(line.startswith("//") for line in text.split("\n")[:3]) and "boom:" not in text
    out, err = io.StringIO(), io.StringIO()
    assert uop_opt([str(path)], out, err) == 0, err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert uop_run([str(path), "--backend=python"], out, err) == 0, err.getvalue()


def test_mlir_functions_of_one_name_stay_distinct() -> None:
    """Programs named `k`, `k` and `k_1` export as three functions with three names (the second `k` became `k_1`,
    the name the third one has)."""
    pytest.importorskip("xdsl")
    from uopir.backends.mlir.export import export_module

    names = [op.sym_name.data for op in export_module(UOp.sink(*(name_program(n, [s]) for n, s in (
        ("k", "a"), ("k", "b"), ("k_1", "c"))))).body.block.ops]
    assert len(set(names)) == 3 and names[0] == "k" and names[2] == "k_1"


@pytest.mark.skipif(cuda_compiler() is None, reason="neither NVRTC nor nvcc is installed")
def test_cuda_keeps_the_kernel_entry_the_runtime_looks_up() -> None:
    """The PTX entry is the name kernel_name gives (what the cuda runtime asks pycuda for), for a keyword too."""
    from uopir.backends.cuda.language import CUDA
    from uopir.backends.gpu.renderer import GpuRenderer, kernel_name

    p = name_program("class", ["this"])
    ptx = cuda_compiler().compile(GpuRenderer(CUDA).render(p)).decode()
    assert kernel_name(p, CUDA) == cuda_ident("class") != "class" and f".entry {cuda_ident('class')}(" in ptx
