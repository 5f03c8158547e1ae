"""The differential suite (issue 11 item 5): every program on EVERY backend this machine can run, compared with the
reference interpreter under the one tolerance table (uopir.backends.tolerance).

The backends are read from the registry at collection time (`uopir.backends.differential.backend_status`), so a
backend that becomes available (llvm, opencl, cuda) joins every test here with no edit; one that is not available
shows up as a skipped test with the reason, never silently absent. The programs are unit_tests/differential_cases.py
(the frontend ops one by one, casts between every dtype pair, movement, reductions over every axis, matmul, conv,
pooling, softmax, attention, MLP and CNN forward, integer and bool programs); hypothesis adds random Tensor programs
from the fuzz generator (unit_tests/fuzz.py `tensor_program`): a fixed-seed slice in the default run, the long run
with `UOPIR_SLOW=1`. The `mlir` backend (not a Tensor device) runs every program too: built on the python device
and realized by the backend (its kernels exported to MLIR and lowered by LLVM's mlir-opt and mlir-translate).
"""
from __future__ import annotations

import math
import os
import random

import differential_cases as dc
import fuzz
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uopir import Tensor
from uopir.backends.differential import backend_status, check_outputs, verdict_line
from uopir.backends.registry import BACKENDS as BACKEND_NAMES
from uopir.backends.registry import DEVICES, get_backend
from uopir.backends.tolerance import EPS, OP_CLASSES, TOLERANCE, compare, join_classes, op_class, ulps_for
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp

# the Tensor devices, then the backends that are not Tensor devices (mlir): their programs are built on the python
# device and realized through the backend itself (`_numpy`)
STATUS = backend_status() + backend_status([b for b in BACKEND_NAMES if b not in DEVICES])
BACKENDS = [s.name for s in STATUS if s.available]
UNAVAILABLE = [s for s in STATUS if not s.available]


def _device(backend: str) -> str:
    """Where a case builds its tensors for `backend`: on it, or on python when it is no Tensor device."""
    return backend if backend in DEVICES else "python"


def _numpy(t: Tensor, backend: str) -> np.ndarray:
    """t's value computed on `backend` (a Tensor device realizes it itself)."""
    if backend in DEVICES:
        return np.asarray(t.numpy())
    return get_backend(backend).realize(t.uop).numpy()


def _run_case(case: dc.Case, backend: str):
    if backend in DEVICES:
        return dc.run_case(case, backend)
    outputs = case.build(dc.Inputs(case.name, "python"))
    if isinstance(outputs, Tensor):
        outputs = {"out": outputs}
    ts = list(outputs.values())
    want = dc.reference(outputs)
    got: list[np.ndarray] = [np.empty(0)] * len(ts)
    for ks, t in dc.grouped(outputs):  # as dc.realize_all, realized by the backend
        arr = _numpy(t, backend)
        off = 0
        for k in ks:
            n = math.prod(ts[k].shape)
            got[k] = arr if len(ks) == 1 else np.array(arr[off:off + n].reshape(ts[k].shape), copy=True)
            off += n
    return check_outputs(list(outputs), got, want, [t.dtype for t in ts], [op_class(t.uop) for t in ts])


def _fail_text(case: str, backend: str, checks) -> str:
    bad = [c for c in checks if not c.result.ok]
    return f"{case} on {backend}: {len(bad)} of {len(checks)} outputs differ from the reference interpreter:\n" + \
        "\n".join(f"  {c.label}: {c.result.message}" for c in bad)


# ---- the programs, on every backend ----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", dc.CASES, ids=dc.CASE_NAMES)
def test_program_matches_reference(case: dc.Case, backend: str):
    checks = _run_case(case, backend)
    assert checks and all(c.result.ok for c in checks), _fail_text(case.name, backend, checks)


@pytest.mark.parametrize("status", UNAVAILABLE, ids=[s.name for s in UNAVAILABLE])
def test_unavailable_backend_is_reported(status):
    """A backend the registry names but this machine cannot run: skipped with its reason, so the report says which
    backends the suite did not cover and why."""
    assert status.reason and status.reason.strip()
    pytest.skip(f"backend {status.name} is not available here: {status.reason}")


def test_the_suite_covers_the_backends_the_registry_offers():
    from uopir.backends.registry import available

    assert BACKENDS and set(BACKENDS) - {"mlir"} == set(available())
    assert "python" in BACKENDS  # the reference itself runs the suite through its own lowering
    assert {s.name for s in STATUS} == set(BACKEND_NAMES)  # the Tensor devices and mlir


def test_the_catalog_covers_what_the_issue_lists():
    names = " ".join(dc.CASE_NAMES)
    for what in ("elementwise-", "cast-to-", "movement-", "reduce-", "matmul-", "conv2d-", "pool-", "softmax-",
                 "attention-", "mlp-", "cnn-", "int-bool", "pad-and-flip", "bfloat16", "float16", "bool", "uint64"):
        assert what in names, what
    casts = [c for c in dc.CASES if c.name.startswith("cast-to-")]
    assert len(casts) == len(dc.ALL)  # every destination, each from every source dtype


# ---- random programs (hypothesis over the fuzz generator), on every backend --------------------------------------
RANDOM_DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int8", "uint8", "int64")


def _random_program_check(backend: str, rnd: random.Random, dtype: str, cast_to: str | None = None) -> None:
    with np.errstate(all="ignore"):  # the generator's numpy twin (unused here) may overflow
        p, _ = fuzz.tensor_program(rnd, device=_device(backend), dtype=dtype)
    out = p.t if cast_to is None else p.t.cast(cast_to)  # a cast fused at the end of the program
    cls = op_class(out.uop)
    want = dc.reference({"out": out})
    got = [_numpy(out, backend)]
    checks = check_outputs(["out"], got, want, [out.dtype], [cls], magnitudes=dc.magnitudes({"out": out}))
    lines = p.lines + ([f"x = x.cast({cast_to})"] if cast_to else [])
    assert checks[0].result.ok, "\n".join(lines) + f"\non {backend}: {checks[0].result.message}"


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=12, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rnd=st.randoms(use_true_random=False), dtype=st.sampled_from(RANDOM_DTYPES),
       cast_to=st.none() | st.sampled_from(dc.ALL))
def test_random_programs_fixed_slice(backend: str, rnd: random.Random, dtype: str, cast_to: str | None):
    _random_program_check(backend, rnd, dtype, cast_to)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("UOPIR_SLOW"), reason="the long random-program run: set UOPIR_SLOW=1")
@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=st.randoms(use_true_random=False), dtype=st.sampled_from(RANDOM_DTYPES),
       cast_to=st.none() | st.sampled_from(dc.ALL))
def test_random_programs_long(backend: str, rnd: random.Random, dtype: str, cast_to: str | None):
    _random_program_check(backend, rnd, dtype, cast_to)


# ---- the tolerance table ---------------------------------------------------------------------------------------------
def test_table_is_complete_and_exact_means_bits():
    assert set(TOLERANCE) == set(OP_CLASSES)
    for cls in OP_CLASSES:
        assert set(TOLERANCE[cls]) == set(EPS)
    assert all(v == 0 for v in TOLERANCE["exact"].values())
    for d in EPS:  # looser classes never allow less than tighter ones
        assert TOLERANCE["transcendental"][d] <= TOLERANCE["composite"][d]
        assert TOLERANCE["accumulate"][d] <= TOLERANCE["composite"][d]
    for d in (dtypes.int8, dtypes.uint64, dtypes.bool, dtypes.int32):
        assert all(ulps_for(c, d) == 0 for c in OP_CLASSES)


def test_exact_class_rejects_one_ulp():
    ref = np.float32([1.0, 2.0, -3.5, 0.0])
    got = ref.copy()
    got[2] = np.nextafter(got[2], np.float32(0))
    r = compare(got, ref, dtypes.float32, "exact")
    assert not r.ok and r.where == (2,) and "MISMATCH" in r.message and "-3.5" in r.message
    assert compare(ref, ref.copy(), dtypes.float32, "exact").exact
    # signed zeros are bits too
    assert not compare(np.float32([-0.0]), np.float32([0.0]), dtypes.float32, "exact").ok


def test_float_classes_allow_their_ulps_and_no_more():
    ref = np.float32([1.0, 4.0, -2.0, 0.25])
    scale = 4.0
    for cls in ("transcendental", "accumulate", "composite"):
        ulps = TOLERANCE[cls]["f32"]
        unit = EPS["f32"] * (1.0 + scale)  # at ref = 1.0
        near, far = ref.copy(), ref.copy()
        near[0] = np.float32(1.0 + 0.9 * ulps * unit)
        far[0] = np.float32(1.0 + 1.5 * ulps * unit)
        ok, bad = compare(near, ref, dtypes.float32, cls), compare(far, ref, dtypes.float32, cls)
        assert ok.ok and not ok.exact and "within tolerance" in ok.message
        assert not bad.ok and bad.where == (0,) and bad.max_ulps > ulps
        assert not compare(near, ref, dtypes.float32, cls, exact=True).ok  # --exact: bits only


def test_specials_must_match_in_every_class():
    ref = np.float32([np.nan, np.inf, -np.inf, 1.0])
    for cls in OP_CLASSES:
        assert compare(np.float32([np.nan, np.inf, -np.inf, 1.0]), ref, dtypes.float32, cls).ok
        assert not compare(np.float32([1.0, np.inf, -np.inf, 1.0]), ref, dtypes.float32, cls).ok
        assert not compare(np.float32([np.nan, -np.inf, -np.inf, 1.0]), ref, dtypes.float32, cls).ok
        assert not compare(np.float32([np.nan, np.inf, -np.inf, np.nan]), ref, dtypes.float32, cls).ok
        assert not compare(np.float32([np.nan, 3e38, -np.inf, 1.0]), ref, dtypes.float32, cls).ok


def test_integers_and_bools_are_exact_in_every_class():
    for cls in OP_CLASSES:
        r = compare(np.int64([5, 7, 2**62]), np.int64([5, 7, 2**62 + 1]), dtypes.int64, cls)
        assert not r.ok and r.where == (2,)
        assert not compare(np.bool_([True, False]), np.bool_([True, True]), dtypes.bool, cls).ok


def test_shape_or_dtype_difference_is_a_mismatch():
    assert not compare(np.zeros(3, np.float32), np.zeros((3, 1), np.float32), dtypes.float32, "composite").ok
    assert not compare(np.zeros(3, np.float32), np.zeros(3, np.float64), dtypes.float32, "composite").ok


def test_bf16_and_f16_units():
    # one bf16 ulp at 1.0 is 2^-7: inside the transcendental tolerance, a difference of 8 ulps is not
    ref = np.float32([1.0])
    assert compare(np.float32([1.0 + 2.0**-7]), ref, dtypes.bfloat16, "transcendental").ok
    assert not compare(np.float32([1.0 + 8 * 2.0**-7]), ref, dtypes.bfloat16, "transcendental").ok
    h = np.float16([1.0])
    assert compare(np.float16([1.0 + 2.0**-10]), h, dtypes.float16, "transcendental").ok
    assert not compare(np.float16([1.0 + 2.0**-10]), h, dtypes.float16, "exact").ok


def test_op_class_is_read_from_the_graph():
    x = Tensor(np.ones((3, 4), np.float32), device="python")
    i = Tensor(np.ones((3, 4), np.int32), device="python")
    assert op_class((x + 1).uop) == "exact"
    assert op_class((x / 3).sqrt().uop) == "exact"  # correctly rounded: bits
    assert op_class(x.max(0).uop) == "exact"  # max/min reductions do not round
    assert op_class(x.exp().uop) == "transcendental"
    assert op_class(x.sum(1).uop) == "accumulate"
    assert op_class((x @ x.transpose()).uop) == "accumulate"
    assert op_class(x.softmax().uop) == "composite"
    assert op_class(i.sum(0).uop) == "exact"  # integer sums wrap: exact
    assert join_classes(["exact", "transcendental", "accumulate"]) == "composite"
    assert join_classes(["exact"]) == "exact"


def test_op_class_of_lowered_programs():
    """The class survives lowering: a kernel.reduce and a device accumulator are float accumulation too. (The
    reduction is long enough that kernel-optimize keeps a loop: a fully unrolled one is a fixed chain of adds, which
    every backend computes in that order, so it is exact.)"""
    from uopir.passes.manager import PassManager

    x = Tensor(np.ones((3, 256), np.float32), device="python")
    for pipeline in ("tensor-to-kernel", "default{target=cpu}"):
        assert op_class(PassManager.parse(pipeline).run(UOp.sink(x.sum(1).uop))) == "accumulate"
        assert op_class(PassManager.parse(pipeline).run(UOp.sink(x.max(1).uop))) == "exact"
        assert op_class(PassManager.parse(pipeline).run(UOp.sink(x.exp().sum(1).uop))) == "composite"


def test_the_harness_catches_a_wrong_backend(monkeypatch):
    """run_case really compares: a realize that is off by one ulp on one element is reported, with where."""
    orig = Tensor.numpy

    def off_by_one_ulp(self):
        arr = np.array(orig(self))
        if arr.dtype == np.float32 and arr.size > 3:
            flat = arr.reshape(-1)
            flat[3] = np.nextafter(flat[3], np.float32(np.inf))
        return arr
    monkeypatch.setattr(Tensor, "numpy", off_by_one_ulp)
    case = next(c for c in dc.CASES if c.name == "elementwise-float32")
    checks = dc.run_case(case, "python")
    bad = [c for c in checks if not c.result.ok]
    assert bad and "MISMATCH" in bad[0].result.message
    assert verdict_line(checks).startswith("mismatch: ")


def test_verdict_line():
    ok = check_outputs(["a"], [np.float32([1.0])], [np.float32([1.0])], [dtypes.float32], ["exact"])
    assert verdict_line(ok) == "ok (bit-exact)"
    tol = check_outputs(["a"], [np.float32([1.0 + 2.0**-23])], [np.float32([1.0])], [dtypes.float32],
                        ["transcendental"])
    assert verdict_line(tol).startswith("ok (within tolerance: a max error")
    assert math.isclose(tol[0].result.max_error, 2.0**-23)


def test_the_documented_table_is_the_table():
    """docs/internals.md shows TOLERANCE as it is (a change to one without the other fails here)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "internals.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in OP_CLASSES:
            rows[cells[0]] = [0.0 if c == "bits" else float(c) for c in cells[2:]]
    assert rows == {cls: [float(TOLERANCE[cls][d]) for d in ("f16", "bf16", "f32", "f64")] for cls in OP_CLASSES}


def test_device_programs_of_the_suite_for_a_compile_only_check():
    """What a backend that cannot run here (CUDA without a GPU) compiles instead: the suite's distinct programs."""
    from uopir.dialects import device as D
    from uopir.ir.verify import verify

    cases = [c for c in dc.CASES if c.name in ("softmax-float32", "matmul-float16")]
    progs = dc.device_programs("gpu", cases)
    assert {n for n, _ in progs} == {"softmax-float32", "matmul-float16"}
    assert len({p for _, p in progs}) == len(progs) >= 3
    for _, p in progs:
        assert p.op is D.PROGRAM
        verify(UOp.sink(p))


def test_compare_on_scalars_and_empty_arrays():
    r = compare(np.float32(1.5), np.float32(2.5), dtypes.float32, "exact")
    assert not r.ok and r.where == () and "got 1.5, the reference has 2.5" in r.message
    r = compare(np.float32(1.5), np.float32(2.5), dtypes.float32, "composite")
    assert not r.ok and r.where == () and r.max_error == 1.0
    assert compare(np.array(True), np.array(True), dtypes.bool, "exact").exact
    assert not compare(np.array(True), np.array(False), dtypes.bool, "exact").ok
    assert compare(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), dtypes.float32, "exact").exact
    r = compare(np.uint64([2**64 - 1]), np.uint64([0]), dtypes.uint64, "exact")
    assert not r.ok and "got 18446744073709551615, the reference has 0" in r.message
