"""ONNX control flow, unrolled while the graph is built: If (its condition realized, the chosen branch built in the
node's scope), Loop (trip count and conditions realized, one body per iteration), Scan 9+ (one body per slice).

Loop and Scan realize the values an iteration carries (and its scan outputs) at its end, and Scan reads its slice
through a bound step variable: every iteration is then the same program on other buffers, lowered and compiled once,
instead of one graph growing by a body per iteration (a distinct kernel per step, and a compile time that grows with
the trip count)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.onnx.ops_elementwise import _req
from uopir.onnx.ops_sequence import tensors_of
from uopir.onnx.registry import Node, onnx_op

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


@onnx_op("If")
def if_(node: Node, inputs: list) -> list[Tensor]:
    cond = _req(node, inputs, 0)
    if cond.numel() != 1:
        raise node.error(f"the condition must hold one element, got shape {tuple(cond.shape)}")
    taken = bool(cond.reshape(()).item())
    return node.run_subgraph("then_branch" if taken else "else_branch")


_MAX_TRIPS = 100_000  # a Loop is unrolled while the graph is built: more iterations than this is an error


@onnx_op("Loop")
def loop(node: Node, inputs: list) -> list[Tensor]:
    """Unrolled while the graph is built: the trip count and each iteration's condition are realized (one small run
    per iteration), the body is built once per iteration; scan outputs are stacked on a new axis 0."""
    import numpy as np

    from uopir.frontend.tensor import Tensor
    from uopir.onnx.registry import const_ints
    m = inputs[0] if inputs else None
    cond = inputs[1] if len(inputs) > 1 else None
    carried = list(inputs[2:])
    trips = const_ints(node, m, "M")[0] if m is not None else None
    if trips is None and cond is None:
        raise node.error("a Loop without trip count and condition never ends")
    go = bool(cond.reshape(()).item()) if cond is not None else True
    n_scan = node.n_outputs - len(carried)
    scans: list[list[Tensor]] = [[] for _ in range(n_scan)]
    i = 0
    while go and (trips is None or i < trips):
        if i >= _MAX_TRIPS:
            raise node.error(f"more than {_MAX_TRIPS} iterations")
        it = Tensor(np.array(i, np.int64), device=node.device)
        c = Tensor(np.array(go), device=node.device)
        outs = node.run_subgraph("body", [it, c, *carried])
        if len(outs) != 1 + len(carried) + n_scan:
            raise node.error(f"the body has {len(outs)} outputs, expected {1 + len(carried) + n_scan}")
        carried = list(outs[1:1 + len(carried)])
        Tensor.realize_all(*(t for o in outs[1:] for t in tensors_of(o)))
        for j, s in enumerate(outs[1 + len(carried):]):
            scans[j].append(s)
        go = bool(outs[0].reshape(()).item()) if cond is not None else True
        i += 1
    if n_scan and i == 0:
        raise node.error("a Loop with scan outputs that runs no iteration (their shape is unknown)")
    return [*carried, *(Tensor.stack(*s) for s in scans)]


_scan_depth = 0  # Scans being built inside a Scan body (each level binds a step variable of its own)


@onnx_op("Scan", since=9)
def scan(node: Node, inputs: list) -> list[Tensor]:
    """Unrolled while the graph is built: one body per slice along each scan input's axis."""
    from uopir.frontend.tensor import Tensor
    from uopir.frontend.variable import Variable
    n_in = node.attr("num_scan_inputs")
    states, xs = list(inputs[:len(inputs) - n_in]), list(inputs[len(inputs) - n_in:])
    if any(x is None for x in xs) or any(s is None for s in states):
        raise node.error("Scan inputs cannot be omitted")
    in_axes = node.attr("scan_input_axes", [0] * n_in)
    in_dirs = node.attr("scan_input_directions", [0] * n_in)
    n_out = node.n_outputs - len(states)
    out_axes = node.attr("scan_output_axes", [0] * n_out)
    out_dirs = node.attr("scan_output_directions", [0] * n_out)
    axes = [a % x.ndim for a, x in zip(in_axes, xs, strict=True)]
    lengths = {x.shape[a] for x, a in zip(xs, axes, strict=True)}
    if len(lengths) != 1:
        raise node.error(f"the scan inputs' lengths differ: {sorted(lengths)}")
    n = lengths.pop()
    if n == 0 and n_out:
        raise node.error("a Scan over 0 elements with scan outputs (their shape is unknown)")
    ys: list[list[Tensor]] = [[] for _ in range(n_out)]
    global _scan_depth
    step = Variable(f"onnx_scan_step{_scan_depth}", 0, max(n - 1, 0))  # a name per nesting level: no clash
    xs = [x.realize() for x in xs]
    _scan_depth += 1
    try:
        for t in range(n):
            slices = []
            for x, a, d in zip(xs, axes, in_dirs, strict=True):
                v = step.bind(n - 1 - t if d else t)
                slices.append(x.shrink(tuple((v, v + 1) if i == a else None for i in range(x.ndim))).squeeze(a))
            outs = node.run_subgraph("body", [*states, *slices])
            Tensor.realize_all(*outs)
            states = list(outs[:len(states)])
            for j, y in enumerate(outs[len(states):]):
                ys[j].append(y)
    finally:
        _scan_depth -= 1
    res = []
    for j, seq in enumerate(ys):
        seq = seq[::-1] if out_dirs[j] else seq
        st = Tensor.stack(*seq)
        a = out_axes[j] % st.ndim
        res.append(st if a == 0 else st.permute(*range(1, a + 1), 0, *range(a + 1, st.ndim)))
    return [*states, *res]
