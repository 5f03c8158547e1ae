"""The `lowered` fuzz target: random tensor programs through the optimized device pipelines WITHOUT kernel-simplify
(each pass must produce valid IR for the next on its own), the linearized programs compiled by the C backend and run,
against the same programs on the reference interpreter (same summation order: bit for bit but for libm).

unit_tests/test_device_lowering.py checks these pipelines against the interpreter only, which runs hardware ids
data-parallel and so cannot see a program that a cpu's id loop runs wrong (an accumulator declared before the ids
sums across a core's ids); this target runs the program as a cpu does. It compiles C for every case, so CI does not
run it (test_fuzz_slice.py): `make fuzz` does.

`lowered_case(rng)` has the contract of fuzz.py's `tensor_case`: (the program as text, the pipeline, why it failed or
None).
"""
from __future__ import annotations

import random

import numpy as np
from device_programs import run
from test_device_lowering import _WideGen, lower
from test_tensor_to_kernel import _Gen, _input_arrays

from uopir.backends.python import evaluate
from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.dialects.semantics import np_dtype, values_equal
from uopir.ir.dtype import dtypes
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp

# test_device_lowering's optimized pipelines: c (AVX-512 widths where the host has them), every output range a
# hardware id, a 2-lane target whose devectorize splits vectors
PIPELINES = ("opt-c", "opt-global", "opt-lanes2")
_LIBM = frozenset(("core.exp2", "core.log2", "core.sin"))
_FLOATS = {2: dtypes.float16, 4: dtypes.float32, 8: dtypes.float64}


def _host(lowered: UOp, bufs: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    host = {k: v.copy() for k, v in bufs.items()}
    for u in lowered.toposort():
        if u.op is T.BUFFER and u.arg[0] not in host:
            host[u.arg[0]] = np.full(u.arg[2], 7, np_dtype(u.dtype))  # garbage: every element must be written
    return host


def on_c(backend: object, lowered: UOp, bufs: dict[int, np.ndarray]) -> list[np.ndarray]:
    """The outputs of a lowered schedule with each call's device.program run on `backend` (a C backend)."""
    order = lowered.toposort()
    host = _host(lowered, bufs)
    outs = list(lowered.src) if lowered.op is C.SINK else [lowered]
    # an output that reads no call's result (a buffer as it was before the schedule) is read before the calls run
    before = {i: np.asarray(evaluate(UOp.sink(o), host)[0]).copy() for i, o in enumerate(outs)
              if not any(u.op is T.AFTER for u in o.toposort())}
    for u in order:
        if u.op is T.CALL:
            run(backend, u.arg[0], [host[x.arg[0]] for x in u.src if x.op is T.BUFFER])
    done = {u: u.src[0] for u in order if u.op is T.AFTER}
    after = evaluate(UOp.sink(*outs).substitute(done) if done else UOp.sink(*outs), host)
    return [before[i] if i in before else np.asarray(a) for i, a in enumerate(after)]


def lowered_case(rng: random.Random) -> tuple[str, str, str | None]:
    """One case: a random program (small shapes or wide ones) through one optimized pipeline, on C and on the
    interpreter."""
    from uopir.backends.c.backend import CBackend
    from uopir.tools.uop_run import compare
    backend = CBackend(tiered=False)
    root = (_WideGen if rng.random() < 0.5 else _Gen)(rng).program()
    which = rng.choice(PIPELINES)
    text = print_ir(root)
    if not backend.available:
        return text, which, None
    from uopir.passes.tensor_to_kernel import tensor_to_kernel
    bufs = _input_arrays(root, np.random.default_rng(rng.getrandbits(32)))
    try:
        lowered = lower(tensor_to_kernel(root), which)
        want = evaluate(lowered, _host(lowered, bufs))
        got = on_c(backend, lowered, bufs)
    except Exception as e:  # noqa: BLE001 - a pass, the interpreter or the backend failing is the finding
        return text, which, f"{type(e).__name__}: {e}"
    libm = any(u.op.name in _LIBM for u in root.toposort())
    for k, (g, w) in enumerate(zip(got, want if isinstance(want, list) else [want], strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype.kind == "f" and libm and g.dtype == w.dtype:
            ok, what = compare(g, w, _FLOATS[g.dtype.itemsize], False, "transcendental")
        else:
            ok, what = values_equal(g, w), f"want {w}\ngot {g}"
        if not ok:
            return text, which, f"output {k}: C differs from the interpreter on the lowered program: {what}"
    return text, which, None
