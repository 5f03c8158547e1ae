"""The backend interface (uopir.backends): registry, buffers and the buffer table, the compile cache, the python
backend behind the interface, and a small text backend that goes through Renderer -> Compiler -> Runtime."""
from __future__ import annotations

import gc
import os
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from uopir import Tensor, parse_ir, print_ir
from uopir.backends import BACKENDS, DEVICES, PREFERENCE, available, canonical, default_device, get_backend
from uopir.backends import cache as cache_mod
from uopir.backends.buffers import BUFFERS, buffer_of, buffer_op, graph_buffers
from uopir.backends.c.compiler import find_cc
from uopir.backends.interface import (
    Backend,
    Buffer,
    Compiler,
    HostAllocator,
    LaunchBuffers,
    Program,
    Renderer,
    Runtime,
)
from uopir.backends.llvm.compiler import llvm_host
from uopir.backends.python import PythonBackend, evaluate
from uopir.backends.python.backend import PIPELINE
from uopir.backends.registry import register_backend, unregister_backend
from uopir.dialects import core, kernel, tensor
from uopir.dialects.semantics import bf16_round
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.manager import PassManager
from uopir.passes.target import CPU

f32, i32 = dtypes.float32, dtypes.int32
# llvm runs where llvmlite imports, c where a C compiler is installed, opencl where pyopencl finds a device (pocl in
# the test extra)
HAVE = [d for d, ok in (("c", find_cc() is not None), ("llvm", llvm_host() is not None),
                        ("opencl", get_backend("opencl").available), ("python", True)) if ok]


# ---- registry --------------------------------------------------------------------------------------------------------
def test_registry_names_and_order():
    # the built-in ones first (a backend registered later joins the lists)
    assert DEVICES[:5] == ["python", "c", "llvm", "opencl", "cuda"]
    assert BACKENDS[:6] == DEVICES[:5] + ["mlir"]
    assert PREFERENCE[:4] == ["cuda", "c", "llvm", "opencl"] and PREFERENCE[-1] == "python"
    assert available() == HAVE
    for name in BACKENDS:
        b = get_backend(name)
        assert b.device == name and b.target.name == name
        assert get_backend(name.upper()) is b  # built once, any case
    assert isinstance(get_backend("python"), PythonBackend)


def test_unknown_backend_and_device_names():
    with pytest.raises(ValueError, match="unknown backend 'metal'; registered backends: python, c, llvm"):
        get_backend("metal")
    with pytest.raises(ValueError, match="unknown device 'mlir'; valid devices: python, c, llvm, opencl, cuda"):
        canonical("mlir")  # a backend, not a Tensor device
    assert canonical(" CUDA ") == "cuda"
    with pytest.raises(TypeError, match="must be a string"):
        canonical(3)  # type: ignore[arg-type]


def test_default_device(monkeypatch):
    monkeypatch.delenv("UOPIR_DEVICE", raising=False)
    assert default_device() == HAVE[0] and canonical(None) == HAVE[0]
    monkeypatch.setenv("UOPIR_DEVICE", "LLVM")
    assert default_device() == "llvm"


def test_register_backend_replaces_a_factory():
    class Doubling(PythonBackend):
        """The python backend with its own device name and a different pipeline."""
        device = "test-doubling"
        pipeline = "tensor-to-kernel"  # no cleanup first

        def realize(self, root: UOp) -> Buffer:
            return super().realize(UOp(core.MUL, root.dtype, (root, core.const(root.dtype, 2.0))))

    register_backend("test-doubling", Doubling)
    with pytest.raises(ValueError, match="already registered"):
        register_backend("test-doubling", Doubling)
    b = get_backend("test-doubling")
    assert b.realize(core.const(f32, 1.5, (2,))).numpy().tolist() == [3.0, 3.0]
    register_backend("test-doubling", PythonBackend, replace=True)
    assert get_backend("test-doubling") is not b
    unregister_backend("test-doubling")
    assert "test-doubling" not in BACKENDS and "test-doubling" not in DEVICES


# ---- buffers and the buffer table ------------------------------------------------------------------------------------
def test_host_allocator_round_trip_and_handover():
    al = HostAllocator("python")
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    buf = al.from_numpy(a, i32)
    assert buf.handle is a and buf.host_view() is a  # a fresh host array is handed over, not copied
    out = buf.numpy()
    assert out.tolist() == [[0, 1, 2], [3, 4, 5]] and out is not a
    out[0, 0] = 99
    assert a[0, 0] == 0  # numpy() is a copy
    assert (buf.shape, buf.dtype, buf.nbytes, buf.device) == ((2, 3), i32, 24, "python")
    t = a.T  # not C-contiguous: copied into a fresh allocation
    bt = al.from_numpy(t, i32)
    assert bt.handle is not t and bt.numpy().tolist() == t.tolist() and bt.handle.flags.c_contiguous
    e = al.alloc(f32, (4,))
    al.copyin(e, np.array([1, 2, 3, 4], np.float32))
    assert e.numpy().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert repr(e) == "<Buffer f32 [4] on python>"


def test_buffer_table_lives_as_long_as_the_op():
    buf = HostAllocator("python").from_numpy(np.ones(3, np.float32), f32)
    u = buffer_op(buf)
    bid, device, shape = u.arg
    assert (device, shape, u.dtype) == ("python", (3,), f32)
    assert BUFFERS[bid] is buf and buffer_of(u) is buf
    assert graph_buffers(u + u) == {bid: buf}
    del u
    gc.collect()
    assert bid not in BUFFERS
    ghost = UOp(tensor.BUFFER, f32, (), (bid, "python", (3,)))  # same id, rebuilt: no data
    with pytest.raises(LookupError, match=f"tensor.buffer {{id = {bid}}} has no data"):
        buffer_of(ghost)
    assert graph_buffers(ghost) == {}
    with pytest.raises(IRError, match=f"no buffer with id {bid}"):  # the interpreter reports it at the op
        get_backend("python").realize(ghost)


# ---- the python backend ----------------------------------------------------------------------------------------------
def test_python_realize_runs_the_pipeline_and_returns_a_buffer():
    b = get_backend("python")
    assert b.pipeline == PIPELINE and b.target.name == "python" and b.renderer is None and b.compiler is None
    x = Tensor(np.array([[1.0, -2.0], [3.0, 4.0]], np.float32))
    g = ((x * 1.0 + 0.0).relu() * 2.0).sum(axis=1).uop
    lowered = b.lower(g)
    assert lowered is PassManager.parse(PIPELINE).run(g)  # realize interprets what the pipeline produced
    assert len(lowered.toposort()) < len(g.toposort())
    out = b.realize(g)
    assert isinstance(out, Buffer) and out.shape == (2,) and out.dtype is f32
    assert out.numpy().tolist() == [2.0, 14.0]


def test_python_realize_shapes_and_dtypes():
    b = get_backend("python")
    zero_d = b.realize(core.const(i32, 7, ()))
    assert zero_d.shape == () and zero_d.numpy().shape == () and zero_d.numpy().item() == 7
    x = Tensor(np.array([1.0, 1.0078125, 3.0], np.float32), dtype="bfloat16")  # exact in bf16
    y = b.realize((x * 3).uop)
    assert y.dtype is dtypes.bfloat16 and y.handle.dtype == np.float32
    assert y.numpy().tolist() == [3.0, 3.03125, 9.0]  # 3.0234375 is a tie: rounded to even in bf16
    assert bf16_round(np.float32(3.0234375)) == np.float32(3.03125)


def test_python_compile_and_launch_a_graph_and_a_kernel():
    b = get_backend("python")
    a = Tensor(np.array([1, 2, 3], np.int32))
    g = (a * a).uop
    prog = b.compile(g, "square")
    assert isinstance(prog, Program) and prog.program is g and prog.source is None and prog.binary is None
    assert (prog.name, prog.device) == ("square", "python")
    assert b.runtime.launch(prog, graph_buffers(g)).tolist() == [1, 4, 9]
    with pytest.raises(TypeError, match="by tensor.buffer id"):
        b.runtime.launch(prog, list(graph_buffers(g).values()))

    pi = i32.ptr()
    out, src = UOp(kernel.PARAM, pi, (), 0), UOp(kernel.PARAM, pi, (), 1)
    r = UOp(kernel.RANGE, dtypes.index, (core.const(dtypes.index, 3),), (0, "global"))
    val = UOp(kernel.LOAD, i32, (UOp(kernel.INDEX, pi, (src, r)),))
    st = UOp(kernel.STORE, dtypes.void, (UOp(kernel.INDEX, pi, (out, r)), val + core.const(i32, 10)))
    kdef = UOp(kernel.DEF, dtypes.void, (UOp(kernel.END, dtypes.void, (st, r)),), "add10")
    kp = b.compile(kdef, "add10")
    bufs = [b.allocator.alloc(i32, (3,)), b.allocator.from_numpy(np.array([5, 6, 7], np.int32), i32)]
    assert b.runtime.launch(kp, bufs, global_size=(3, 1, 1)) is None
    b.runtime.synchronize()
    assert bufs[0].numpy().tolist() == [15, 16, 17]  # the kernel wrote the buffer in place
    with pytest.raises(TypeError, match="by position"):
        b.runtime.launch(kp, {0: bufs[0]})


def test_tensor_realize_goes_through_the_backend():
    x = Tensor([1.0, 2.0, 3.0], device="python")
    y = (x + 1).realize()
    assert y.uop.op is tensor.BUFFER and buffer_of(y.uop).device == "python"
    assert buffer_of(y.uop).numpy().tolist() == [2.0, 3.0, 4.0]
    assert y.numpy().tolist() == [2.0, 3.0, 4.0]
    n = y.numpy()
    n[0] = -1  # numpy() hands out a copy
    assert y.numpy().tolist() == [2.0, 3.0, 4.0]


# ---- the compile cache -----------------------------------------------------------------------------------------------
class ZlibCompiler(Compiler):
    """A real if tiny compiler: source text -> zlib-compressed bytes; counts its compiles."""

    def __init__(self, level: int = 6):
        self.name, self.flags, self.level, self.calls = "zlib-1", (f"-{level}",), level, 0

    def compile(self, source: str) -> bytes:
        self.calls += 1
        return zlib.compress(source.encode(), self.level)


def _entries(root) -> list[str]:
    """The cache folder's files but its size estimate (USAGE_FILE)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != cache_mod.USAGE_FILE)


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv(cache_mod.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_mod.cache_dir() == tmp_path / "xdg" / "uopir"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_mod.cache_dir() == tmp_path / "home" / ".cache" / "uopir"
    monkeypatch.setenv(cache_mod.CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert cache_mod.cache_dir() == tmp_path / "mine"


def test_compile_cache_hits_misses_and_keys(monkeypatch, tmp_path):
    monkeypatch.setenv(cache_mod.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(cache_mod.DISABLE_ENV, raising=False)
    c = ZlibCompiler()
    src = "int main(void) { return 0; }\n" * 10
    first = c.compile_cached(src)
    assert zlib.decompress(first).decode() == src and c.calls == 1
    key = cache_mod.cache_key("zlib-1", ("-6",), src)
    assert _entries(tmp_path) == [f"zlib-1/{key[:2]}/{key}{cache_mod.ENTRY_SUFFIX}"]  # no temporary file left
    again = ZlibCompiler()  # a new process would find it too
    assert again.compile_cached(src) == first and again.calls == 0
    c9 = ZlibCompiler(9)  # other flags: another entry
    c9.compile_cached(src)
    assert c9.calls == 1 and len(_entries(tmp_path)) == 2
    c.compile_cached(src + " ")  # other source: another entry
    assert c.calls == 2 and len(_entries(tmp_path)) == 3
    assert cache_mod.cache_key("a", ("b",), "c") != cache_mod.cache_key("a", (), "bc")  # fields cannot run together


def test_compile_cache_disabled_and_unwritable(monkeypatch, tmp_path):
    monkeypatch.setenv(cache_mod.CACHE_DIR_ENV, str(tmp_path / "c"))
    monkeypatch.setenv(cache_mod.DISABLE_ENV, "1")
    c = ZlibCompiler()
    c.compile_cached("x")
    c.compile_cached("x")
    assert c.calls == 2 and not (tmp_path / "c").exists()
    monkeypatch.setenv(cache_mod.DISABLE_ENV, "0")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(cache_mod.CACHE_DIR_ENV, str(blocker))  # a cache folder that cannot be created
    assert zlib.decompress(c.compile_cached("y")) == b"y" and c.calls == 3
    assert cache_mod.cache_put("ns", "00ab", b"data") is None and cache_mod.cache_get("ns", "00ab") is None


def test_compile_cache_entry_is_replaced_atomically(monkeypatch, tmp_path):
    monkeypatch.setenv(cache_mod.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(cache_mod.DISABLE_ENV, raising=False)
    p = cache_mod.cache_put("ns", "abcd", b"one")
    assert p is not None and cache_mod.unseal("abcd", p.read_bytes()) == b"one"
    ino = os.stat(p).st_ino
    cache_mod.cache_put("ns", "abcd", b"two")
    assert cache_mod.cache_get("ns", "abcd") == b"two"
    assert os.stat(p).st_ino != ino  # a new file renamed over the old one, never rewritten in place
    assert cache_mod.cache_put("../../evil", "abcd", b"x").parent.parent.name == ".._.._evil"


# ---- a backend through the whole interface: Renderer -> Compiler (cached) -> Runtime ---------------------------------
class UopTextRenderer(Renderer):
    """Renders the program as its .uop text."""

    language = "uop"

    def render(self, program: UOp) -> str:
        return print_ir(program)


class UopTextRuntime(Runtime):
    """Loads a compressed .uop program by parsing it back and interpreting it."""

    device = "test-text"

    def load(self, name: str, program: UOp, source: str | None, binary: bytes | None) -> Program:
        assert binary is not None
        parsed = parse_ir(zlib.decompress(binary).decode())

        def entry(buffers: Mapping[int, Buffer]) -> Any:
            return evaluate(parsed, {i: b.host_view() for i, b in buffers.items()})
        return Program(name, self.device, parsed, source, binary, entry)

    def launch(self, prog: Program, buffers: LaunchBuffers, **kw: Any) -> Any:
        assert isinstance(buffers, Mapping)
        return prog.entry(buffers)


class UopTextBackend(Backend):
    device = "test-text"
    pipeline = "canonicalize"

    def __init__(self) -> None:
        self.target = CPU.derive(name="test-text")
        self.renderer, self.compiler = UopTextRenderer(), ZlibCompiler()
        self.allocator, self.runtime = HostAllocator(self.device), UopTextRuntime()

    def realize(self, root: UOp) -> Buffer:
        lowered = self.lower(root)
        out = self.runtime.launch(self.compile(lowered), graph_buffers(lowered))
        return self.allocator.from_numpy(np.ascontiguousarray(out), root.dtype)


def test_a_backend_through_render_compile_load_launch(monkeypatch, tmp_path):
    monkeypatch.setenv(cache_mod.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(cache_mod.DISABLE_ENV, raising=False)
    b = UopTextBackend()
    x = Tensor(np.array([1.5, -2.0, 4.0], np.float32))
    g = (x * 2 + 1).uop
    prog = b.compile(g, "affine")
    assert prog.source == print_ir(g) and prog.program is g  # the text round-trips to the same graph
    assert b.realize(g).numpy().tolist() == [4.0, -3.0, 9.0]
    assert b.compiler.calls == 1  # realize found the program compiled above in the cache
    assert len(_entries(tmp_path)) == 1
    with pytest.raises(RuntimeError, match="no renderer and compiler"):
        Backend.compile(get_backend("python"), g)  # the generic path needs both
