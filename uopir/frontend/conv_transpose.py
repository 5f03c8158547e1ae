"""A strided transposed convolution as one matmul over the unstuffed input and an interleaving sum (col2im).

Zero-stuffing the input (the textbook form, `NNOps.conv_transpose2d` with stride 1 or a dilation) makes a stride-s
conv multiply s**nd zeros for every product that counts (a 4x4/2 upsampling: 3 of 4) behind a gate per tap, and its
conv schedule does not fit it (11.5 ms where onnxruntime takes 0.7 on bench/onnx_ops.py's DCGAN layer). Here
output position o = s*q + r along a dim takes the kernel taps j*s + r only, at q = i + j: with the kernel zero-padded
to a multiple of s (J = ceil(k/s) taps per phase), a matmul of the weight, rearranged once to (cout * phases * J**nd,
cin) (a kernel of constants, which a captured plan runs once), by the input's (cin, pixels) gives every product
exactly once, and one elementwise kernel adds each phase's J**nd planes shifted by their tap and interleaves the
phases (a 2x2/2 upsampling: J = 1, the matmul and a pixel shuffle). Tensor is imported only for type checking.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


def conv_transpose_phases(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride: Sequence[int],
                          pads: Sequence[tuple[int, int]], output_padding: Sequence[int]) -> Tensor:
    """conv_transpose2d with dilation 1: x (n, cin, *sp), weight (cin, cout/groups, *k); pads and output_padding as
    conv_transpose2d resolved them (crop before/after per dim, zeros added at the end)."""
    n, cin = x.shape[:2]
    og = weight.shape[1]
    k = tuple(weight.shape[2:])
    nd = len(k)
    taps = [-(-kk // s) for kk, s in zip(k, stride, strict=True)]  # sub-kernel size per dim
    w = weight
    if any(j * s != kk for j, s, kk in zip(taps, stride, k, strict=True)):
        w = w.pad([(0, 0), (0, 0)] + [(0, j * s - kk) for j, s, kk in zip(taps, stride, k, strict=True)])
    cg = cin // groups
    # (groups, cg, og, J1, s1, J2, s2, ...) -> (groups, og, s1, s2, ..., J1, J2, ..., cg): one matmul row per
    # (output channel, phase, sub-kernel tap)
    w = w.reshape((groups, cg, og) + tuple(v for j, s in zip(taps, stride, strict=True) for v in (j, s)))
    w = w.permute((0, 2, *[4 + 2 * i for i in range(nd)], *[3 + 2 * i for i in range(nd)], 1))
    phases, ntaps = math.prod(stride), math.prod(taps)
    sp = tuple(x.shape[2:])
    # the rearranged weight in a buffer of its own: a kernel of constants only, which a captured plan runs once
    # (fused into the matmul instead, every replay would read the weight through the permute: 4.7 ms, not 1.1)
    w = w.reshape((groups, og * phases * ntaps, cg)).contiguous()
    # z in a buffer of its own too: the matmul stores plain rows (its store interleaved with the phases instead
    # defeats the matmul schedule: 6 GFLOP/s)
    z = (w @ x.reshape((n, groups, cg, math.prod(sp)))).contiguous()
    cout = groups * og
    z = z.reshape((n, cout) + tuple(stride) + tuple(taps) + sp)
    # phase r, tap j adds its product at q = i + j: each tap's plane shifted by j, summed (col2im)
    y = None
    for j in itertools.product(*[range(t) for t in taps]):
        zj = z[(slice(None),) * (2 + nd) + j]  # (n, cout, *stride, *sp)
        if any(t > 1 for t in taps):
            zj = zj.pad([(0, 0)] * (2 + nd) + [(ji, t - 1 - ji) for ji, t in zip(j, taps, strict=True)])
        y = zj if y is None else y + zj
    q = tuple(i + t - 1 for i, t in zip(sp, taps, strict=True))
    y = y.permute((0, 1, *[v for i in range(nd) for v in (2 + nd + i, 2 + i)]))
    y = y.reshape((n, cout) + tuple(qi * s for qi, s in zip(q, stride, strict=True)))
    # the full output is (sp - 1) * s + k (+ output_padding) long: crop the sub-kernel's zero taps and the pads
    full = [(i - 1) * s + kk + o for i, s, kk, o in zip(x.shape[2:], stride, k, output_padding, strict=True)]
    cut = [(-b, f - a - qi * s) for (b, a), f, qi, s in zip(pads, full, q, stride, strict=True)]
    if any(c != (0, 0) for c in cut):
        y = y.pad([(0, 0), (0, 0)] + cut)
    return y if bias is None else y + bias.reshape((1, cout) + (1,) * nd)
