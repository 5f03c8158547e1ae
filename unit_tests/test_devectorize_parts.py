"""device-devectorize reaches a wide value through the geps that read it and computes only the parts they read
(bottom-up, `split-part-of-gep`), instead of splitting the whole value and joining it back lane by lane: the same
program as the eager split (the pattern set run top-down), with far fewer nodes visited.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

from uopir.backends.realize import cache_key
from uopir.dialects import kernel as K
from uopir.frontend.tensor import Tensor
from uopir.ir.regions import map_regions
from uopir.ir.rewrite import graph_rewrite
from uopir.passes.device.devectorize import DEVECTORIZE, kernel_ctx
from uopir.passes.manager import PassManager
from uopir.passes.target import target

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import cnn  # noqa: E402

BEFORE = ("canonicalize,tensor-to-kernel,kernel-simplify,kernel-peel,kernel-optimize{target=c},kernel-expand,"
          "kernel-to-device{target=c},device-decompose{target=c}")


def _programs() -> list[Tensor]:
    rng = np.random.default_rng(0)
    a = Tensor(rng.standard_normal((128, 128), dtype=np.float32), device="c")
    b = Tensor(rng.standard_normal((24, 40), dtype=np.float32), device="c")
    params = {k: Tensor(v, device="c") for k, v in cnn.init_params().items()}
    x = Tensor(rng.standard_normal((2, 1, 28, 28), dtype=np.float32), device="c")
    # ResNet's stem pool: rows of 55 outputs split in overlapping parts, every other lane of a 109-lane load
    stem = Tensor(np.zeros((1, 64, 112, 112), np.float32), device="c")
    return [a @ a, (a + 1).sum(0) * a, (b.T @ b).relu().max(1), b.exp() + b.sum(0), cnn.forward(x, params),
            stem.relu().max_pool2d(kernel_size=(3, 3), stride=2, padding=1)]


def _eager(root, width: int):
    def run(k):
        return graph_rewrite(k, DEVECTORIZE, ctx=kernel_ctx(k, target("c"), width))
    return map_regions(root, lambda r: r.op is K.DEF, run)


def test_parts_through_geps_give_the_eager_split_with_fewer_visits():
    for width in (0, 4, 1):
        for t in _programs():
            key, *_ = cache_key(t.uop)
            lowered = PassManager.parse(BEFORE).run(key)
            pm = PassManager.parse(f"device-devectorize{{target=c width={width}}}")
            got = pm.run(lowered)
            assert got is _eager(lowered, width), (width, t.shape)
    # the 128x128 matmul's wide register tile at the target's width: every part is built from a gep that reads it,
    # no wide op is split whole
    key, *_ = cache_key(_programs()[0].uop)
    lowered = PassManager.parse(BEFORE).run(key)
    pm = PassManager.parse("device-devectorize{target=c}")
    pm.run(lowered, pass_statistics=True, out=io.StringIO())
    fired = pm.report.records[0].stats.fired
    assert fired["split-part-of-gep"] > 0 and fired["split-elementwise"] == 0


def _kernels(out):
    found: list = []
    map_regions(out, lambda r: r.op is K.DEF, lambda r: found.append(r) or r)
    return found


def test_a_mask_splits_as_the_vectors_it_was_compared_from():
    # a hard-swish on a 14x14 plane upcast by 28 lanes (two vectors of 16 on a 64-byte target): its clip compares
    # 28 floats; the mask is split beside them, never kept as one 28-lane mask (an LLVM <28 x i1> whose bits were
    # moved one by one into each half's select). The kernel reads nothing it writes, so the short last part is the
    # last 16 lanes (0-15, 12-27: lanes 12-15 computed twice), with or without masked vectors
    from uopir.dialects import core as C
    from uopir.ir.dtype import dtypes
    from uopir.passes.target import CPU, register_target
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((6, 14, 14), dtype=np.float32), device="c")
    key, *_ = cache_key((x * (x * (1 / 6) + 0.5).clip(0, 1)).uop)
    for masked, want in ((True, [16]), (False, [16])):
        register_target(CPU.derive(name="test-mask", max_vector_bytes=64, threads=1, masked_vectors=masked),
                        replace=True)
        text = BEFORE.replace("target=c", "target=test-mask") + ",device-devectorize{target=test-mask}"
        found = _kernels(PassManager.parse(text).run(key))
        masks = [u for k in found for u in k.toposort() if u.dtype.scalar is dtypes.bool and u.dtype.count > 1]
        compares = [u for u in masks if u.op in (C.CMPLT, C.CMPNE, C.CMPEQ)]
        assert sorted({u.dtype.count for u in compares}) == want, sorted({u.dtype.count for u in masks})
        assert max(u.dtype.count for u in masks) == 16
        floats = {u.dtype.count for k in found for u in k.toposort() if u.dtype.scalar is dtypes.float32}
        assert masked or floats <= {1, 2, 4, 8, 16}, floats
