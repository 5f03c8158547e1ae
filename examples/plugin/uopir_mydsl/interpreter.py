"""The reference interpreter's handlers for mydsl's ops: numpy, rounded as the lowering rounds (the product, then
the sum), so `uop-run --check` compares every backend against them bit for bit."""
from __future__ import annotations

import numpy as np

from uopir.backends.python.interpreter import register_handler
from uopir_mydsl.dialect import FMA3, RELU6


def _fma3(u, s, ctx):
    a, b, c = (np.asarray(x) for x in s)
    return (a * b).astype(a.dtype) + c


def _relu6(u, s, ctx):
    m = np.maximum(np.asarray(s[0]), 0)
    return np.where(m < 6, m, np.asarray(6, m.dtype))


register_handler(FMA3, _fma3)
register_handler(RELU6, _relu6)
