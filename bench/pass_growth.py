"""Growth of canonicalize and dce with graph size (issue 8 item 5): seconds at 10^3, 10^4, 10^5 ops and the time ratio
per 10x of input (about 10 is linear, about 100 quadratic). Shapes: many `x*0` users of one chain, a `core.group` of
many values of one chain, many `where(c, x, x)` over one chain. Usage: python bench/pass_growth.py [max_exp]."""
from __future__ import annotations

import sys
import time

import uopir  # noqa: F401  (registers the dialects)
from uopir.dialects import core, tensor
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp
from uopir.passes.manager import PassManager

i32 = dtypes.int32


def chain(n: int) -> list[UOp]:
    out = [UOp(tensor.BUFFER, i32, (), (0, "python", (4,)))]
    for _ in range(n - 1):
        out.append(out[-1] + core.const(i32, 3))
    return out


def mul_zero(n: int) -> UOp:
    return UOp.sink(*[v * core.const(i32, 0) for v in chain(n // 2)])


def group(n: int) -> UOp:
    c = chain(n)
    return UOp.sink(UOp(core.GROUP, dtypes.void, (*c[1:], UOp(tensor.ASSIGN, i32, (c[0], c[-1])))))


def where_same(n: int) -> UOp:
    return UOp.sink(*[UOp(core.WHERE, i32, (v.lt(core.const(i32, 7)), v, v)) for v in chain(n // 3)])


def main() -> None:
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for label, build, pipeline in (("canonicalize x*0", mul_zero, "canonicalize"), ("dce group", group, "dce"),
                                   ("canonicalize where", where_same, "canonicalize")):
        prev = None
        for e in range(3, top + 1):
            g = build(10 ** e)
            pm = PassManager.parse(pipeline)
            t = time.perf_counter()
            pm.run(g, verify=False)
            dt = time.perf_counter() - t
            ratio = f"  x{dt / prev:.1f}" if prev else ""
            print(f"{label:20s} 10^{e} ops ({len(g.toposort())} nodes): {dt:8.3f} s{ratio}", flush=True)
            prev = dt


if __name__ == "__main__":
    main()
