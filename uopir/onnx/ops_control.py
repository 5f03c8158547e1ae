"""ONNX control flow: If (its condition is realized while the graph is built, and the chosen branch is built in the
node's scope). Loop and Scan are not supported."""
from __future__ import annotations

from typing import TYPE_CHECKING

from uopir.onnx.ops_elementwise import _req
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
