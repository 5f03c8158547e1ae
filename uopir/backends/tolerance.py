"""How close a backend's result must be to the reference interpreter's: ONE table, per op class and dtype.

The reference interpreter (uopir.backends.python) runs uopir.dialects.semantics; every backend must reproduce it.
Most of the semantics is exact and implementable bit for bit (integer wrap-around, casts, IEEE add/sub/mul/div/sqrt
in the dtype's precision, comparisons, movement), so most results must be BIT-EXACT. Two things are not pinned to
the bit, and only they earn a tolerance:

- transcendental primitives (`core.exp2`, `core.log2`, `core.sin`): libm, LLVM's intrinsics, OpenCL and CUDA
  built-ins and numpy's loops each round their last bits their own way;
- floating-point accumulation (`tensor.reduce` / `kernel.reduce` of add or mul on floats): the semantics name a
  sequential order, but a backend may split or vectorize a reduction (partial sums in lanes, work-groups).

The op class of a program is read off its IR (`op_class`), never chosen per case:

    exact           no transcendental op, no float accumulation (integers and bools are always exact)
    transcendental  exp2/log2/sin somewhere, no float accumulation
    accumulate      a float add/mul reduction, no transcendental op
    composite       both (softmax, attention, layernorm, MLP, CNN forward...)

A float element passes when `|got - ref| <= ulps * eps(dtype) * (|ref| + scale + M)`, `scale` the largest finite
|ref| of that output (so cancellation in a composition is measured against the output's magnitude, not the tiny
difference), `ulps` from TOLERANCE below, M (when the caller gives it; else 0) the element's reorder magnitude
(uopir.backends.python.magnitude: for a sum, the sum of |terms|, since a long sum that cancels errs by far more than
a few ulps of its result, whichever order is right); NaN must meet NaN and an infinity the same infinity.
Integers and bools must be equal. `exact` floats must have the same bits (any NaN equals any NaN; +0.0 and -0.0 differ).

A failing case is a defect to report, never a reason to widen this table: the numbers are properties of the
dtype and the op class (see docs/internals.md, "Differential testing").
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from uopir.ir.dtype import DType
from uopir.ir.regions import regions_of
from uopir.ir.uop import UOp

__all__ = ["OP_CLASSES", "TOLERANCE", "EPS", "Comparison", "op_class", "compare", "ulps_for", "join_classes"]

OP_CLASSES: tuple[str, ...] = ("exact", "transcendental", "accumulate", "composite")

# machine epsilon (distance from 1.0 to the next value) of each float dtype
EPS: dict[str, float] = {"f16": 2.0**-10, "bf16": 2.0**-7, "f32": 2.0**-23, "f64": 2.0**-52}

# THE table: allowed error in units of eps(dtype) * (|ref| + scale), per op class and float dtype.
# f16/bf16 transcendentals are computed in f32 and rounded once by every backend and by numpy, so they are within
# one rounding (1 ulp) of each other; f32/f64 libm-vs-numpy differ by up to 4 ulp per primitive, and a composition
# (sigmoid, tanh, pow, gelu: a handful of primitives and roundings) by a few of those. Accumulation bounds cover
# a reordered sum of up to a few hundred terms of mixed signs.
TOLERANCE: dict[str, dict[str, float]] = {
    "exact":          {"f16": 0, "bf16": 0, "f32": 0, "f64": 0},
    "transcendental": {"f16": 2, "bf16": 2, "f32": 16, "f64": 16},
    "accumulate":     {"f16": 32, "bf16": 32, "f32": 64, "f64": 64},
    "composite":      {"f16": 64, "bf16": 64, "f32": 256, "f64": 256},
}

_TRANSCENDENTAL = frozenset(("core.exp2", "core.log2", "core.sin"))
_ACCUMULATING = frozenset(("add", "mul"))


def ulps_for(cls: str, dtype: DType) -> float:
    """The allowed error (units of eps) of op class `cls` for a float dtype; 0 for integers and bools."""
    if cls not in TOLERANCE:
        raise ValueError(f"unknown op class {cls!r}; classes: {', '.join(OP_CLASSES)}")
    return float(TOLERANCE[cls].get(dtype.scalar.name, 0)) if dtype.scalar.is_float else 0.0


def join_classes(classes: Iterable[str]) -> str:
    """The class of a program holding ops of all the given classes."""
    s = set(classes)
    trans, acc = bool(s & {"transcendental", "composite"}), bool(s & {"accumulate", "composite"})
    return "composite" if trans and acc else "transcendental" if trans else "accumulate" if acc else "exact"


def op_class(graph: UOp) -> str:
    """The op class of a graph at any level (tensor, kernel, device; regions included)."""
    trans = acc = False
    seen: set[UOp] = set()
    stack = [graph]
    while stack:
        for u in stack.pop().toposort():
            if u in seen:
                continue
            seen.add(u)
            name = u.op.name
            if name in _TRANSCENDENTAL:
                trans = True
            elif name in ("tensor.reduce", "kernel.reduce") and u.dtype.scalar.is_float \
                    and _reduce_op(u) in _ACCUMULATING:
                acc = True
            elif name == "device.accstore" and (v := u.operands.value).dtype.scalar.is_float and \
                    v.op.name in ("core.add", "core.mul", "core.mulacc", "device.fma"):
                acc = True  # a lowered float sum or product
            stack.extend(regions_of(u))
    return "composite" if trans and acc else "transcendental" if trans else "accumulate" if acc else "exact"


def _reduce_op(u: UOp) -> str:
    a = u.arg
    if isinstance(a, tuple) and a:
        a = a[0]
    return getattr(a, "name", a) if not isinstance(a, str) else a


@dataclass(frozen=True)
class Comparison:
    """The verdict on one output: ok, bit-exact or not, and for a failure (or a tolerated difference) the worst
    element: where, got, ref, its error and that error in ulps (units of eps * (|ref| + scale))."""

    ok: bool
    exact: bool
    message: str
    where: tuple[int, ...] | None = None
    max_error: float = 0.0
    max_ulps: float = 0.0
    differing: int = 0


def _num(x: object) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.9g}"
    return str(int(x))  # type: ignore[call-overload]


def _argmax(a: np.ndarray) -> tuple[int, ...]:
    """The index of the largest element (the first one on ties); () for a 0-d array."""
    if a.ndim == 0:
        return ()
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(a)), a.shape))


def _same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        u = np.dtype(f"u{a.dtype.itemsize}")
        bits = (np.ascontiguousarray(a).view(u) == np.ascontiguousarray(b).view(u)).reshape(a.shape)
        return bits | (np.isnan(a) & np.isnan(b))
    return a == b


def compare(got: np.ndarray, ref: np.ndarray, dtype: DType, cls: str = "exact", *, exact: bool = False,
            magnitude: np.ndarray | None = None) -> Comparison:
    """`got` (a backend's output, numpy carrier of `dtype`) against `ref` (the reference interpreter's) under the
    tolerance of op class `cls` (`exact=True`: bits only). `magnitude` (broadcastable to ref, float64; from
    uopir.backends.python.magnitude.reorder_magnitudes) adds to each element's unit what a reordering of the float
    sums it depends on may move it by (for a sum, the sum of |terms|: a long sum that cancels errs by far more than
    a few ulps of its result)."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return Comparison(False, False, f"got {got.dtype}{list(got.shape)}, the reference is "
                                        f"{ref.dtype}{list(ref.shape)}")
    same = _same_bits(got, ref)
    if bool(np.all(same)):
        return Comparison(True, True, "bit-exact")
    n_bad = int((~same).sum())
    ulps = 0.0 if exact else ulps_for(cls, dtype)
    if got.dtype.kind != "f" or ulps == 0:
        with np.errstate(all="ignore"):
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        diff = np.where(same, -1.0, np.where(np.isnan(diff) | (diff == 0), np.inf, diff))  # NaN/±0 count as worst
        where = _argmax(diff)
        worst = float(diff[where])
        why = "bits required" if got.dtype.kind == "f" else "integers and bools must be equal"
        return Comparison(False, False, f"MISMATCH ({cls}, {why}): {n_bad} of {got.size} elements differ; max error "
                          f"{worst:.3g} at {list(where)}: got {_num(got[where])}, the reference has "
                          f"{_num(ref[where])}", where, worst, float("inf"), n_bad)
    g, w = got.astype(np.float64), ref.astype(np.float64)
    eps = EPS[dtype.scalar.name]
    with np.errstate(all="ignore"):
        fin = np.isfinite(w)
        scale = float(np.abs(w[fin]).max()) if fin.any() else 0.0
        err = np.where(np.isnan(g) & np.isnan(w), 0.0, np.abs(g - w))
        err = np.where(np.isinf(w) & (g == w), 0.0, err)
        err = np.where(np.isnan(err), np.inf, err)  # NaN against a number, an infinity against another value
        unit = eps * (np.abs(np.where(fin, w, 0.0)) + scale)
        if magnitude is not None:  # a non-finite magnitude (a division by a zero sum) adds nothing
            mag = np.broadcast_to(np.asarray(magnitude, dtype=np.float64), w.shape)
            unit = unit + eps * np.where(np.isfinite(mag), mag, 0.0)
        in_ulps = np.where(err == 0, 0.0, np.where(unit > 0, err / np.where(unit > 0, unit, 1.0), np.inf))
    where = _argmax(in_ulps)
    worst, worst_err = float(in_ulps[where]), float(err[where])
    ok = worst <= ulps
    head = (f"within tolerance ({cls}, {ulps:g} ulp): {n_bad} of {got.size} elements differ" if ok else
            f"MISMATCH ({cls}, tolerance {ulps:g} ulp): {int((in_ulps > ulps).sum())} of {got.size} elements beyond "
            f"it")
    return Comparison(ok, False, f"{head}; max error {worst_err:.3g} = {worst:.3g} ulp at {list(where)}: got "
                      f"{_num(got[where])}, the reference has {_num(ref[where])}", where, worst_err, worst, n_bad)
