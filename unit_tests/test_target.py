"""Target descriptions (uopir.passes.target): the generic cpu/gpu ones, each device's, lookup by name, host probing."""
from __future__ import annotations

import dataclasses

import pytest

import uopir.backends  # noqa: F401  (registers each device's target)
from uopir.dialects import core, kernel
from uopir.ir.dtype import dtypes
from uopir.passes.target import (
    CPU,
    GPU,
    Target,
    UnknownTargetError,
    host_cpu,
    register_target,
    target,
    targets,
)

AVX512 = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 avx512f avx512bw\n"
AVX2 = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm\n"


def test_generic_targets_are_read_by_name():
    assert target("cpu") is CPU and target("gpu") is GPU
    assert (CPU.kind, GPU.kind) == ("cpu", "gpu")
    assert not CPU.has_local and CPU.local_bytes == 0 and CPU.max_threads_per_block == 1
    assert GPU.has_local and GPU.local_bytes == 48 * 1024 and GPU.warp_size == 32
    assert GPU.max_threads_per_block == 1024 and GPU.max_local_dims == (1024, 1024, 64)


def test_every_device_has_a_target_of_its_name():
    kinds = {"python": "cpu", "c": "cpu", "llvm": "cpu", "mlir": "cpu", "opencl": "gpu", "cuda": "gpu"}
    for name, kind in kinds.items():
        t = target(name)
        assert t.name == name and t.kind == kind
        assert target(name) is t  # built once
    assert {"cpu", "gpu", *kinds} <= set(targets())
    assert target("cuda").warp_size == 32  # the generic gpu's without a GPU, the GPU's own with one
    assert target("opencl").max_threads_per_block >= 1  # read from the OpenCL device (test_opencl_backend)


def test_unknown_target_is_a_clear_error():
    with pytest.raises(UnknownTargetError, match=r"unknown target 'tpu'; known targets: .*cpu.*gpu"):
        target("tpu")
    assert issubclass(UnknownTargetError, ValueError)
    with pytest.raises(TypeError, match="must be a string"):
        target(3)  # type: ignore[arg-type]


def test_vector_widths_per_dtype():
    t = CPU.derive(name="t", max_vector_bytes=64)
    assert t.vector_width(dtypes.float32) == 16
    assert t.vector_width(dtypes.float64) == 8
    assert t.vector_width(dtypes.float16) == 32
    assert t.vector_width(dtypes.int8) == 64
    assert t.vector_width(dtypes.float32.vec(4)) == 16  # a vector dtype asks about its scalar
    scalar_only = CPU.derive(name="s", max_vector_bytes=0)
    assert scalar_only.vector_width(dtypes.float32) == 1
    over = t.derive(vector_widths=((dtypes.float32, 8),))
    assert over.vector_width(dtypes.float32) == 8 and over.vector_width(dtypes.float64) == 8
    no_f16 = t.derive(dtypes=t.dtypes - {dtypes.float16})
    assert no_f16.vector_width(dtypes.float16) == 1 and not no_f16.supports(dtypes.float16)
    assert no_f16.supports(dtypes.float32.vec(2))


def test_native_ops_are_opdefs():
    assert CPU.is_native(core.ADD) and CPU.is_native(core.MULACC) and CPU.is_native(core.SIN)
    assert not CPU.is_native(kernel.LOAD)
    no_sin = CPU.derive(name="nosin", native_ops=CPU.native_ops - {core.SIN})
    assert not no_sin.is_native(core.SIN) and no_sin.is_native(core.EXP2)


def test_host_cpu_reads_the_vector_width_from_cpuinfo():
    assert host_cpu("h", AVX512).max_vector_bytes == 64
    assert host_cpu("h", AVX512).vector_width(dtypes.float32) == 16
    assert host_cpu("h", AVX2).max_vector_bytes == 32
    assert host_cpu("h", ARM).max_vector_bytes == 16
    assert host_cpu("h", "").max_vector_bytes == CPU.max_vector_bytes  # unknown host: the generic cpu's width
    h = host_cpu("h", AVX2)
    assert h.kind == "cpu" and h.name == "h" and h.threads >= 1
    assert h.reassociate_float_reductions and not CPU.reassociate_float_reductions  # partial sums in lanes
    assert h.vector_transcendentals and not CPU.vector_transcendentals  # polynomial exp2/log2 on the host only
    assert dataclasses.replace(h, max_vector_bytes=CPU.max_vector_bytes, threads=1, name="cpu",
                               reassociate_float_reductions=False, vector_transcendentals=False) == CPU


def test_register_target_and_factories():
    t = CPU.derive(name="test-target-a", max_vector_bytes=32)
    register_target(t)
    assert target("test-target-a") is t
    with pytest.raises(ValueError, match="already registered"):
        register_target(t)
    t2 = t.derive(max_vector_bytes=64)
    register_target(t2, replace=True)
    assert target("test-target-a").max_vector_bytes == 64

    calls = []

    def make() -> Target:
        calls.append(1)
        return GPU.derive(name="test-target-b", local_bytes=1024)
    register_target(make, "test-target-b")
    assert calls == []  # lazy
    assert target("test-target-b").local_bytes == 1024 and target("test-target-b").local_bytes == 1024
    assert calls == [1]  # built once
    register_target(lambda: CPU, "test-target-c")
    with pytest.raises(ValueError, match="built a target named 'cpu'"):
        target("test-target-c")
    with pytest.raises(ValueError, match="needs a name"):
        register_target(make)
    with pytest.raises(ValueError, match="registered as 'x' but named 'cpu'"):
        register_target(CPU, "x")


def test_targets_validate_and_are_hashable():
    with pytest.raises(ValueError, match="kind must be 'cpu' or 'gpu'"):
        Target(name="bad", kind="tpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="has local memory but local_bytes = 0"):
        Target(name="bad", kind="gpu", has_local=True)
    with pytest.raises(ValueError, match="vector width of f32 must be >= 1"):
        Target(name="bad", kind="cpu", vector_widths=((dtypes.float32, 0),))
    assert {CPU: 1}[CPU.derive()] == 1  # equal by value
    with pytest.raises(dataclasses.FrozenInstanceError):
        CPU.name = "x"  # type: ignore[misc]
