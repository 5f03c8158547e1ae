"""The gpu lowering: work-groups and group reductions chosen by kernel-optimize from the target description, lowered
by kernel-to-device to local ids, local memory and barriers, and run on the reference interpreter and on the opencl
device (pocl) against numpy.

Group reductions reorder float sums (thread l sums elements l, l + L, ...; the partial sums are added in thread
order), so float sums are compared with a tolerance of the `accumulate` class; integer sums and float max are exact.
"""
from __future__ import annotations

import numpy as np
import pytest

from uopir import Tensor
from uopir.backends.python.device import run_program
from uopir.backends.registry import get_backend
from uopir.dialects import device, kernel
from uopir.dialects.semantics import values_equal
from uopir.ir.diagnostics import IRError
from uopir.ir.dtype import dtypes
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.kernel.gpu_threads import LOCAL_MAX
from uopir.passes.manager import PassManager
from uopir.passes.target import ALL_DTYPES, GPU, register_target

NOFP64 = GPU.derive(name="test-gpu-nofp64", dtypes=ALL_DTYPES - {dtypes.float64})
NOREORDER = GPU.derive(name="test-gpu-ordered", reassociate_float_reductions=False)
register_target(NOFP64, replace=True)
register_target(NOREORDER, replace=True)

needs_opencl = pytest.mark.skipif(not get_backend("opencl").available,
                                  reason=f"no OpenCL device: {get_backend('opencl').reason}")
RNG = np.random.default_rng(11)


def _kernel(t: Tensor) -> UOp:
    (item,) = t.schedule()
    return item.ast


def _kinds(kdef: UOp) -> dict[int, tuple[int, str]]:
    return {u.arg[0]: (u.src[0].arg, u.arg[1]) for u in kdef.toposort() if u.op is kernel.RANGE}


def _lower(kdef: UOp, target: str = "gpu", opt: bool = True) -> UOp:
    t = f"{{target={target}}}"
    passes = [f"kernel-optimize{t}", "kernel-expand"] if opt else []
    passes += [f"kernel-to-device{t}", f"device-decompose{t}", f"device-devectorize{t}", "device-linearize"]
    return PassManager.parse(",".join(passes)).run(kdef)


# ---- what kernel-optimize chooses ------------------------------------------------------------------------------------
def test_a_long_sum_is_shared_by_a_work_group() -> None:
    k = PassManager.parse("kernel-optimize{target=gpu}").run(_kernel(Tensor.empty(1 << 16).sum()))
    groups = [kind for kind in _kinds(k).values() if kind[1] == "group"]
    assert groups == [(LOCAL_MAX, "group")]


def test_softmax_rows_are_work_groups_whose_threads_share_the_reductions_and_the_row() -> None:
    k = PassManager.parse("kernel-optimize{target=gpu}").run(_kernel(Tensor.empty(4, 4096).softmax(-1)))
    kinds = sorted(_kinds(k).values(), key=lambda x: x[1])
    assert (4, "global") in kinds  # one work-group per row
    assert [x for x in kinds if x[1] == "group"] == [(256, "group"), (256, "group")]  # the max and the sum
    assert (256, "local") in kinds  # the same threads then compute the row's outputs


def test_an_output_splits_into_work_groups_of_local_threads() -> None:
    k = PassManager.parse("kernel-optimize{target=gpu}").run(_kernel(Tensor.empty(64, 1024) @ Tensor.empty(1024, 64)))
    kinds = set(_kinds(k).values())
    locals_ = [n for n, kind in kinds if kind == "local"]
    assert locals_ and np.prod(locals_) <= LOCAL_MAX and not any(kind == "group" for _, kind in kinds)


def test_float_sums_stay_sequential_on_a_target_that_does_not_reassociate() -> None:
    ordered = PassManager.parse("kernel-optimize{target=test-gpu-ordered}")
    assert not any(kind == "group" for _, kind in _kinds(ordered.run(_kernel(Tensor.empty(1 << 14).sum()))).values())
    ints = ordered.run(_kernel(Tensor.empty(1 << 14, dtype="int32").sum()))  # integer sums are exact in any order
    assert any(kind == "group" for _, kind in _kinds(ints).values())
    fmax = ordered.run(_kernel(Tensor.empty(1 << 14).max()))  # and so is max
    assert any(kind == "group" for _, kind in _kinds(fmax).values())


def test_noopt_keeps_one_work_item_per_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPIR_NOOPT", "1")
    k = PassManager.parse("kernel-optimize{target=gpu}").run(_kernel(Tensor.empty(1 << 14).sum()))
    assert {kind for _, kind in _kinds(k).values()} == {"reduce"}


# ---- the lowered program ---------------------------------------------------------------------------------------------
def test_group_reduction_lowers_to_local_memory_and_a_barrier() -> None:
    prog = _lower(_kernel(Tensor.empty(1 << 14, dtype="int32").sum()))
    ops = [u.op for u in prog.src]
    assert kernel.LOCAL in ops and device.BARRIER in ops and device.AFTER in ops
    specials = {u.arg for u in prog.src if u.op is device.SPECIAL}
    assert specials == {("local_id", 0)}  # one work-group; its threads share the sum
    # the partials are stored before the barrier, read after it; one thread writes the result
    bar = ops.index(device.BARRIER)
    stores = [i for i, u in enumerate(prog.src) if u.op is kernel.STORE]
    assert stores[0] < bar < stores[-1]
    assert len(prog.src[stores[-1]].src) == 3  # gated: local id == 0
    assert "device.barrier" in print_ir(prog)


def _interpret(kdef: UOp, inputs: list[np.ndarray], out: np.ndarray) -> np.ndarray:
    bufs = [out.copy(), *inputs]
    run_program(_lower(kdef), bufs)
    return bufs[0]


def test_group_reductions_run_on_the_interpreter() -> None:
    x = RNG.integers(-1000, 1000, 1 << 14).astype(np.int32)
    got = _interpret(_kernel(Tensor(x, device="python").sum()), [x], np.zeros(1, np.int64))  # sums widen
    assert got[0] == x.sum()
    rows = RNG.standard_normal((3, 2048)).astype(np.float32)  # three work-groups, each its own local memory
    got = _interpret(_kernel(Tensor(rows, device="python").max(-1)), [rows], np.zeros(3, np.float32))
    assert np.array_equal(got, rows.max(-1))


def test_a_target_without_fp64_says_where_f64_is_computed() -> None:
    k = _kernel(Tensor.empty(64, dtype="float64") * 2.0)
    with pytest.raises(IRError, match="does not compute in f(loat)?64"):
        _lower(k, "test-gpu-nofp64")
    assert _lower(_kernel(Tensor.empty(64, dtype="float32") * 2.0), "test-gpu-nofp64").op is device.PROGRAM


# ---- on the opencl device --------------------------------------------------------------------------------------------
@needs_opencl
def test_long_sums_and_softmax_on_opencl_match_numpy() -> None:
    x = RNG.random(1 << 18).astype(np.float32)
    got = Tensor(x, device="opencl").sum().numpy()
    ref = x.astype(np.float64).sum()
    assert abs(float(got) - ref) <= 64 * 2.0**-23 * ref  # the accumulate tolerance; the sum is of positives
    xi = RNG.integers(-1000, 1000, 1 << 16).astype(np.int32)
    assert int(Tensor(xi, device="opencl").sum().numpy()) == int(xi.sum())  # exact
    s = RNG.standard_normal((4, 4096)).astype(np.float32)
    e = np.exp(s.astype(np.float64) - s.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    got = Tensor(s, device="opencl").softmax(-1).numpy()
    assert np.max(np.abs(got - want)) <= 256 * 2.0**-23 * np.max(want)
    assert values_equal(Tensor(s, device="opencl").max(-1).numpy(), s.max(-1))  # max: exact in any order


@needs_opencl
def test_matmul_and_elementwise_in_work_groups_on_opencl_match_numpy() -> None:
    a = RNG.standard_normal((64, 96)).astype(np.float32)
    b = RNG.standard_normal((96, 128)).astype(np.float32)
    got = (Tensor(a, device="opencl") @ Tensor(b, device="opencl")).numpy()
    assert np.allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    m = RNG.standard_normal((48, 1000)).astype(np.float32)
    assert values_equal((Tensor(m, device="opencl") * 2.0 + 1.0).numpy(), m * np.float32(2.0) + np.float32(1.0))


def test_group_reductions_and_work_groups_compile_to_ptx() -> None:
    """The CUDA C of a long sum, softmax rows and a matmul lowered for the cuda target (shared memory, __syncthreads,
    block and thread ids) compiles to PTX with whichever CUDA compiler is present."""
    from uopir.backends.cuda.compiler import CUDACompiler, find_nvcc, find_nvrtc
    from uopir.backends.cuda.language import CUDA
    from uopir.backends.gpu.renderer import GpuRenderer, kernel_name

    tool = "nvrtc" if find_nvrtc() is not None else "nvcc" if find_nvcc() is not None else None
    if tool is None:
        pytest.skip("neither NVRTC nor nvcc is installed")
    comp, render = CUDACompiler("sm_90", tool), GpuRenderer(CUDA)
    cases = (Tensor.empty(1 << 16).sum(), Tensor.empty(4, 4096).softmax(-1),
             Tensor.empty(64, 96) @ Tensor.empty(96, 128))
    for t in cases:
        prog = _lower(_kernel(t), "cuda")
        src = render.render(prog)
        ptx = comp.compile(src).decode()
        assert f".entry {kernel_name(prog, CUDA)}(" in ptx
        if "__syncthreads" in src:
            assert "bar.sync" in ptx and ".shared" in ptx
