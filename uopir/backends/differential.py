"""Differential checking: which backends can run here, and one program's outputs on a backend against the reference
interpreter under the tolerance table (uopir.backends.tolerance). Shared by `uop-run --backend=all --check` and the
differential test suite (unit_tests/test_differential.py), so both judge a result the same way.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from uopir.backends.registry import DEVICES, get_backend
from uopir.backends.tolerance import Comparison, compare
from uopir.ir.dtype import DType

__all__ = ["BackendStatus", "backend_status", "OutputCheck", "check_outputs", "verdict_line"]


@dataclass(frozen=True)
class BackendStatus:
    name: str
    reason: str | None  # None: available

    @property
    def available(self) -> bool:
        return self.reason is None


def backend_status(names: Sequence[str] | None = None) -> list[BackendStatus]:
    """Every device backend (or those named), in the registry's order, with why it cannot run here if it cannot."""
    out = []
    for name in (DEVICES if names is None else names):
        try:
            b = get_backend(name)
            ok = b.available
        except Exception as e:  # noqa: BLE001 - a backend whose probe fails is unavailable, with the reason
            out.append(BackendStatus(name, f"probing it failed: {type(e).__name__}: {e}"))
            continue
        out.append(BackendStatus(name, None if ok else
                                 str(getattr(b, "reason", "") or "it is not available on this machine")))
    return out


@dataclass(frozen=True)
class OutputCheck:
    label: str
    op_class: str
    result: Comparison


def check_outputs(labels: Sequence[str], got: Sequence[np.ndarray], ref: Sequence[np.ndarray],
                  dtypes_: Sequence[DType], classes: Sequence[str], *, exact: bool = False,
                  magnitudes: Sequence[np.ndarray | None] | None = None) -> list[OutputCheck]:
    """Each output against its reference under its op class's tolerance (and its reorder magnitude, when given:
    uopir.backends.python.magnitude)."""
    mags = magnitudes if magnitudes is not None else [None] * len(labels)
    return [OutputCheck(lb, c, compare(g, r, d, c, exact=exact, magnitude=m))
            for lb, g, r, d, c, m in zip(labels, got, ref, dtypes_, classes, mags, strict=True)]


def verdict_line(checks: Sequence[OutputCheck]) -> str:
    """One line for a backend: `ok` (bit-exact or within tolerance) or the first mismatch, with the max error and
    where."""
    bad = [c for c in checks if not c.result.ok]
    if bad:
        c = bad[0]
        more = f" (and {len(bad) - 1} more output(s))" if len(bad) > 1 else ""
        return f"mismatch: {c.label}: {c.result.message}{more}"
    if all(c.result.exact for c in checks):
        return "ok (bit-exact)"
    worst = max((c for c in checks if not c.result.exact), key=lambda c: c.result.max_ulps)
    return f"ok (within tolerance: {worst.label} max error {worst.result.max_error:.3g} = " \
           f"{worst.result.max_ulps:.3g} ulp, {worst.op_class})"
