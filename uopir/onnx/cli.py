"""What uop-opt and uop-run do with an .onnx file: the model's tensor-level IR as .uop text, and running it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.onnx.importer import OnnxModel, from_onnx

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


def load(path: str, device: str | None = None) -> OnnxModel:
    """The model of an .onnx file (importing the op modules); OSError / OnnxImportError for a bad file."""
    import uopir.onnx  # noqa: F401  (registers the operators)
    return from_onnx(path, device)


def model_ir(model: OnnxModel, feeds: Mapping[str, Any] | None = None) -> str:
    """The tensor-level .uop text of the model: its outputs in one core.sink, each graph input and initializer a
    tensor.buffer (named in the header comments). dim_param dims are 1 unless `feeds` give the inputs."""
    from uopir.ir.printer import print_ir
    from uopir.ir.uop import UOp
    given = dict(feeds or {})
    example = model.example_inputs()
    outs: dict[str, Tensor] = model.run_graph({k: given.get(k, v) for k, v in example.items()})
    env = model.last_inputs
    lines = [f"// ONNX model: {model.proto.graph.name or '(unnamed graph)'}, opsets "
             + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(model.opsets.items()))]
    for name, t in env.items():
        kind = "initializer" if name in model.initializers else "input"
        bid = t.uop.arg[0] if t.uop.op.name == "tensor.buffer" else "?"
        lines.append(f"// {kind} {name}: buffer id {bid} {tuple(t.shape)} {t.dtype.name}")
    lines.append("// outputs (the sink's operands, in order): " + ", ".join(outs))
    return "\n".join(lines) + "\n" + print_ir(UOp.sink(*(t.uop for t in outs.values())))


def load_feeds(model: OnnxModel, pairs: list[tuple[str, np.ndarray]], seed: int = 0) -> dict[str, Any]:
    """The given inputs (name -> array) completed with random ones of the declared shapes."""
    names = set(model.inputs) | set(model.initializers)
    for name, _ in pairs:
        if name not in names:
            raise KeyError(f"the model has no input '{name}'; its inputs are {', '.join(model.inputs) or 'none'}")
    feeds: dict[str, Any] = dict(pairs)
    for k, v in model.example_inputs(seed=seed).items():
        feeds.setdefault(k, v)
    return feeds
