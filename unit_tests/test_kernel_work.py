"""KernelFacts.work counts the iterations a kernel runs: a peeled kernel's loop nests (a pad's border and interior,
a tail's body and tail) add up, and the thread split weighs that count, not a product over every nest's ranges."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from uopir.dialects import kernel
from uopir.frontend.tensor import Tensor
from uopir.ir.parser import parse_ir
from uopir.ir.regions import map_regions
from uopir.ir.uop import UOp
from uopir.passes.kernel.facts import KernelFacts
from uopir.passes.kernel.optimize import Opt, apply_opts, heuristic_opts
from uopir.passes.manager import PassManager
from uopir.passes.target import CPU

_LIT = Path(__file__).resolve().parent.parent / "lit_tests" / "passes"


def _first_case(path: Path) -> UOp:
    return parse_ir(path.read_text().split("// -----")[0])


def _peeled_pad() -> UOp:
    """A conv input's zero pad (16 channels of 56x56 into 58x58) after kernel-peel: 9 loop nests."""
    return PassManager.parse("kernel-peel").run(_first_case(_LIT / "kernel-peel" / "pad.uop"))


def test_a_peeled_pad_works_as_many_iterations_as_its_output_has_elements() -> None:
    peeled = _peeled_pad()
    assert sum(1 for u in peeled.toposort() if u.op is kernel.END) > 3  # cut into border and interior nests
    assert KernelFacts(peeled).work() == 16 * 58 * 58  # (a product over the nests' ranges: 157,351,936)


def test_a_tail_keeps_the_kernel_s_work() -> None:
    """A row of 197 (no vector divides it) becomes a body of 192 and a tail of 5: 8 x 197 iterations still."""
    x = Tensor(np.ones((8, 197), np.float32))
    found: list[UOp] = []
    map_regions(PassManager.parse("tensor-to-kernel").run(UOp.sink((x + 1.0).uop)), lambda r: r.op is kernel.DEF,
                lambda r: found.append(r) or r)
    tails = [o for o in heuristic_opts(found[0], CPU.derive(max_vector_bytes=64)) if o.kind == "tail"]
    assert tails
    cut = apply_opts(found[0], tails)
    assert sum(1 for u in cut.toposort() if u.op is kernel.END) > 1
    assert KernelFacts(found[0]).work() == KernelFacts(cut).work() == 8 * 197  # (a product: 8 x 192 x 5)


def test_a_small_peeled_kernel_stays_on_one_core() -> None:
    """53,824 iterations: one core under a split threshold of 60,000, two from 50,000."""
    peeled = _peeled_pad()
    one = CPU.derive(threads=2, parallel_min_work=60_000, parallel_min_work_by_kind=())
    two = one.derive(parallel_min_work=50_000)
    assert not any(o.kind == "global" for o in heuristic_opts(peeled, one))
    assert Opt("global", 0) in heuristic_opts(peeled, two)
