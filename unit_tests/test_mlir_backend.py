"""The mlir backend (issue 14): MLIR text through LLVM's mlir-opt and mlir-translate, compiled by llvmlite, run on host
buffers; and the test command's installation of the Debian packages the tools come in (tools/debian_packages.py).

The compiler tests take hand-written MLIR of the exporter's shape (func.func over memrefs, scf.for, arith, math,
memref, vector) and skip where the tools are missing; the backend tests realize tensor graphs end to end and skip
where the backend is not available (the reason names what is missing). Every program of the differential suite also
runs on mlir (test_differential.py).
"""
from __future__ import annotations

import ctypes
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from uopir.backends.codegen.program import KernelSignature
from uopir.backends.cpu.runtime import bind
from uopir.backends.llvm.compiler import symbol
from uopir.backends.llvm.runtime import JIT
from uopir.backends.mlir.backend import MLIRBackend
from uopir.backends.mlir.compiler import MLIRCompileError, MLIRCompiler, entry_name, to_llvm_ir
from uopir.backends.registry import get_backend
from uopir.ir.dtype import dtypes

ROOT = Path(__file__).resolve().parent.parent


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


dp = _load_tool("debian_packages")

COMPILER = MLIRCompiler()
needs_tools = pytest.mark.skipif(not COMPILER.available, reason=f"missing {', '.join(COMPILER.missing())}")
MLIR = get_backend("mlir")
needs_backend = pytest.mark.skipif(not MLIR.available, reason=f"the mlir backend is not available: {MLIR.reason}")


# ---- the Debian packages of the test command ---------------------------------------------------------------------
class FakeSystem:
    """PATH and files as sets; `run` records the commands and 'installs' the packages when told to succeed."""

    def __init__(self, on_path: set[str], files: set[str] = frozenset(), apt_ok: bool = True, provides=None):
        self.on_path, self.files, self.apt_ok = set(on_path), set(files), apt_ok
        self.provides = provides or {}
        self.ran: list[list[str]] = []
        self.said: list[str] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.on_path else None

    def exists(self, path: str) -> bool:
        return path in self.files

    def run(self, cmd: list[str]) -> int:
        self.ran.append(cmd)
        if not self.apt_ok:
            return 100
        if cmd[:2] == ["apt-get", "install"]:
            for pkg in cmd[4:]:
                self.on_path |= set(self.provides.get(pkg, ()))
        return 0

    def ensure(self, is_root: bool):
        return dp.ensure(which=self.which, exists=self.exists, is_root=is_root, run=self.run, say=self.said.append)


ALL_THERE = {"mlir-opt-19", "chromium", "dot", "apt-get"}


def test_package_list_names_the_tools_tests_need():
    names = [p.name for p in dp.PACKAGES]
    assert names[:1] == ["mlir-19-tools"] and {"chromium", "graphviz"} <= set(names)
    assert all(p.probes and p.skips for p in dp.PACKAGES)


def test_nothing_runs_and_nothing_is_said_when_every_package_is_there():
    for found in (ALL_THERE, {"mlir-opt", "chromium-browser", "dot"}):
        sys_ = FakeSystem(found)
        assert sys_.ensure(is_root=True) == [] and sys_.ran == [] and sys_.said == []
    # the Debian path of the tool counts as installed
    sys_ = FakeSystem({"chromium", "dot"}, files={"/usr/lib/llvm-19/bin/mlir-opt"})
    assert dp.missing(which=sys_.which, exists=sys_.exists) == []


def test_missing_packages_are_installed_as_root_in_one_apt_call():
    sys_ = FakeSystem({"apt-get", "dot"}, provides={"mlir-19-tools": ["mlir-opt-19"], "chromium": ["chromium"]})
    assert [p.name for p in dp.missing(which=sys_.which, exists=sys_.exists)] == ["mlir-19-tools", "chromium"]
    assert sys_.ensure(is_root=True) == []
    assert sys_.ran == [["apt-get", "install", "-y", "--no-install-recommends", "mlir-19-tools", "chromium"]]
    assert sys_.said == ["run_tests: installed Debian packages mlir-19-tools, chromium"]


def test_not_root_says_one_line_naming_the_tests_that_skip():
    sys_ = FakeSystem({"apt-get", "chromium"})
    left = sys_.ensure(is_root=False)
    assert [p.name for p in left] == ["mlir-19-tools", "graphviz"] and sys_.ran == []
    assert len(sys_.said) == 1
    line = sys_.said[0]
    assert "mlir-19-tools, graphviz missing (not running as root)" in line
    assert "the mlir backend's and the MLIR tool checks" in line and line.endswith("will skip")


def test_a_failing_apt_updates_once_then_reports():
    sys_ = FakeSystem({"apt-get", "chromium", "dot"}, apt_ok=False)
    left = sys_.ensure(is_root=True)
    assert [p.name for p in left] == ["mlir-19-tools"]
    assert [c[:2] for c in sys_.ran] == [["apt-get", "install"], ["apt-get", "update"]]  # the retry needs the update
    assert sys_.said == ["run_tests: Debian packages mlir-19-tools missing (apt-get install failed): the mlir "
                         "backend's and the MLIR tool checks will skip"]
    no_apt = FakeSystem({"chromium", "dot"})
    assert no_apt.ensure(is_root=True) and no_apt.ran == [] and "apt-get is not available" in no_apt.said[0]


def test_run_tests_calls_ensure_before_the_tests():
    text = (ROOT / "tools" / "run_tests.py").read_text(encoding="utf-8")
    main = text[text.index("def main()"):]
    assert main.index("debian_packages.ensure()") < main.index("run_pytest_legs(") < main.index("lit.finish()")
    assert "test_mlir_backend.py" in text  # runs in the compiled backends' leg


# ---- the compiler, on hand-written MLIR ------------------------------------------------------------------------
SCALE = """
func.func @scale_exp(%a: memref<8xf32>, %b: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %k = arith.constant 3.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<8xf32>
    %e = math.exp %x : f32
    %y = arith.mulf %e, %k : f32
    memref.store %y, %b[%i] : memref<8xf32>
  }
  return
}
"""

VECTOR = """
func.func @vec_erf(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %v = vector.load %a[%c0] : memref<8xf32>, vector<8xf32>
  %e = math.erf %v : vector<8xf32>
  %m = math.fma %v, %v, %e : vector<8xf32>
  vector.store %m, %b[%c0] : memref<8xf32>, vector<8xf32>
  return
}
"""

INTS = """
func.func @int_ops(%a: memref<6xi32>, %b: memref<6xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %seven = arith.constant 7 : i32
  scf.for %i = %c0 to %c6 step %c1 {
    %x = memref.load %a[%i] : memref<6xi32>
    %q = arith.floordivsi %x, %seven : i32
    %r = arith.remsi %x, %seven : i32
    %s = arith.addi %q, %r : i32
    memref.store %s, %b[%i] : memref<6xi32>
  }
  return
}
"""

BAD = """
func.func @bad(%a: memref<8xf32>) {
  %x = arith.addf %a, %a : memref<8xf32>
  return
}
"""


BF16 = """
func.func @bf16_round(%a: memref<4xf32>, %d: memref<4xf64>, %b: memref<4xf32>, %c: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : bf16
  %true = arith.constant true
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%i] : memref<4xf32>
    %t = arith.truncf %x : f32 to bf16
    %s = arith.select %true, %t, %zero : bf16
    %y = arith.extf %s : bf16 to f32
    memref.store %y, %b[%i] : memref<4xf32>
    %w = memref.load %d[%i] : memref<4xf64>
    %u = arith.truncf %w : f64 to bf16
    %v = arith.select %true, %u, %zero : bf16
    %z = arith.extf %v : bf16 to f32
    memref.store %z, %c[%i] : memref<4xf32>
  }
  return
}
"""


def _call(source: str, binary: bytes, arrays: list[np.ndarray], ints: tuple[int, ...] = ()) -> None:
    sig = KernelSignature(entry_name(source), tuple(dtypes.float32 for _ in arrays), tuple(f"v{i}" for i in
                                                                                         range(len(ints))))
    fn = bind(sig, JIT.get().address(symbol(sig.name, source), binary))
    fn(*(a.ctypes.data_as(ctypes.c_void_p) for a in arrays), *ints)


def test_entry_name_reads_the_kernel_function():
    assert entry_name(SCALE) == "scale_exp"
    assert entry_name('func.func private @erff(f32) -> f32\nfunc.func @"k.0"(%a: i32) {') == "k.0"
    with pytest.raises(MLIRCompileError, match="defines no public func.func"):
        entry_name("module {}")


@needs_tools
def test_scf_arith_math_memref_kernel_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    a = np.linspace(-2, 2, 8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    _call(SCALE, COMPILER.compile(SCALE), [a, b], (5,))  # n = 5: the loop bound is the variable
    np.testing.assert_allclose(b[:5], 3 * np.exp(a[:5]), rtol=2e-7)
    assert (b[5:] == 0).all()


@needs_tools
def test_vector_and_libm_ops_run():
    a = np.linspace(-1.5, 1.5, 8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    _call(VECTOR, COMPILER.compile(VECTOR), [a, b])  # math.erf has no LLVM intrinsic: a call of libm's erff
    want = np.array([math.erf(x) for x in a.astype(np.float64)]) + a.astype(np.float64) ** 2
    np.testing.assert_allclose(b, want, rtol=1e-6)


@needs_tools
def test_integer_ops_that_need_expansion():
    a = np.array([-15, -7, -1, 0, 6, 22], np.int32)
    b = np.zeros(6, np.int32)
    sig = KernelSignature("int_ops", (dtypes.int32, dtypes.int32), ())
    fn = bind(sig, JIT.get().address(symbol("int_ops", INTS), COMPILER.compile(INTS)))
    fn(a.ctypes.data, b.ctypes.data)
    assert b.tolist() == (np.floor_divide(a, 7) + np.fmod(a, 7)).tolist()  # floordiv rounds down, rem truncates


@needs_tools
def test_bf16_keeps_subnormals_and_rounds_once():
    """uopir's bf16 rounding (nearest even, subnormals kept; f64 rounded once) survives LLVM's bfloat code on any
    cpu: the subnormal-flushing conversions are off and the runtime defines __truncsfbf2/__truncdfbf2."""
    a = np.array([1e-40, -3e-39, np.inf, 1.0 + 2.0**-8], np.float32)  # the last: a tie, to even (1.0)
    d = np.array([1e-40, 1.0 + 2.0**-8 + 2.0**-30, -np.inf, np.nan], np.float64)  # the second: above the tie
    b, c = np.zeros(4, np.float32), np.zeros(4, np.float32)
    sig = KernelSignature("bf16_round", (dtypes.float32, dtypes.float64, dtypes.float32, dtypes.float32), ())
    from uopir.backends.mlir.runtime import bf16_helpers

    bf16_helpers()
    fn = bind(sig, JIT.get().address(symbol("bf16_round", BF16), COMPILER.compile(BF16)))
    fn(a.ctypes.data, d.ctypes.data, b.ctypes.data, c.ctypes.data)
    assert b.view(np.uint32).tolist() == [0x00010000, 0x80210000, 0x7F800000, 0x3F800000]
    assert c[:3].view(np.uint32).tolist() == [0x00010000, 0x3F810000, 0xFF800000] and np.isnan(c[3])


@needs_tools
def test_one_pair_of_tool_processes_lowers_a_batch_and_errors_stay_with_their_kernel():
    irs = to_llvm_ir([SCALE, BAD, VECTOR])
    assert isinstance(irs[0], str) and "define void @scale_exp(ptr" in irs[0]
    assert isinstance(irs[2], str) and "define void @vec_erf(ptr" in irs[2] and "scale_exp" not in irs[2]
    assert isinstance(irs[1], MLIRCompileError)
    assert "mlir-opt rejected the kernel's MLIR" in str(irs[1]) and "arith.addf" in str(irs[1])
    with pytest.raises(MLIRCompileError, match="mlir-opt rejected"):
        COMPILER.compile(BAD)


@needs_tools
def test_compiles_are_batched_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("UOPIR_CACHE_DIR", str(tmp_path))
    srcs = [SCALE.replace("scale_exp", f"scale_exp_{i}") for i in range(3)]
    objs = COMPILER.compile_many(srcs)
    assert len(objs) == 3 and all(isinstance(o, bytes) and o for o in objs)
    hits = [COMPILER.compile_async(s) for s in srcs]  # on disk now: bytes at once, no tool runs
    assert hits == objs
    assert len(list(tmp_path.rglob("*"))) >= 3
    a, b = np.ones(8, np.float32), np.zeros(8, np.float32)
    _call(srcs[2], objs[2], [a, b], (8,))
    np.testing.assert_allclose(b, 3 * np.e, rtol=2e-7)


def test_cache_namespace_names_the_tools_and_llvm():
    assert COMPILER.name.startswith("mlir-") and COMPILER.name != MLIRCompiler().llvm.name
    assert "convert-func-to-llvm" in COMPILER.flags[0] and COMPILER.flags[1:] == COMPILER.llvm.flags


# ---- the backend ---------------------------------------------------------------------------------------------------
def test_a_backend_without_its_tools_says_what_is_missing():
    c = MLIRCompiler()
    c.tools = None  # as on a machine without mlir-19-tools
    b = MLIRBackend(c)
    assert not b.available and "mlir-opt/mlir-translate (Debian package mlir-19-tools)" in b.reason
    from uopir import Tensor

    x = Tensor(np.arange(4, dtype=np.float32), device="python")
    with pytest.raises(RuntimeError, match=r"device 'mlir' cannot run programs: missing .*mlir-19-tools"):
        b.realize((x + 1).uop)
    assert "mlir" not in __import__("uopir.backends.registry", fromlist=["available"]).available()


@needs_backend
def test_realize_matmul_elementwise_and_reduction_on_mlir():
    from uopir import Tensor

    rng = np.random.default_rng(0)
    a = rng.standard_normal((9, 13)).astype(np.float32)
    w = rng.standard_normal((13, 7)).astype(np.float32)
    x, y = Tensor(a, device="python"), Tensor(w, device="python")
    got = MLIR.realize(((x @ y).relu() + 1).uop).numpy()
    np.testing.assert_allclose(got, np.maximum(a @ w, 0) + 1, rtol=1e-5, atol=1e-5)
    got = MLIR.realize(x.exp().sum(1).uop).numpy()
    np.testing.assert_allclose(got, np.exp(a).sum(1), rtol=1e-5)
    i = Tensor(np.arange(-6, 6, dtype=np.int32).reshape(3, 4), device="python")
    q = (i // 4 * 3).max(0)
    assert MLIR.realize(q.uop).numpy().tolist() == q.numpy().tolist()  # the interpreter's integer semantics
