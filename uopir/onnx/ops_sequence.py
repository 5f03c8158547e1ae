"""ONNX sequence and optional values, and their operators (SequenceConstruct/At/Insert/Erase/Length/Empty,
SplitToSequence, ConcatFromSequence, SequenceMap, Optional, OptionalHasElement, OptionalGetElement).

A sequence is a Python-side list of Tensors (`SeqValue`) and an optional a box that holds a value or nothing
(`OptionalValue`): both exist only while the graph is built, like If/Loop's unrolling, so every operator on them is
list surgery at build time and only the tensors inside become kernels. The positions a sequence operator takes are
read on the host (`const_ints`), as a Reshape's shape is. Graph inputs of these types are given as a list of arrays
(a sequence) or an array, a list or None (an optional); outputs come back the same way (`to_user`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uopir.ir.dtype import DType, dtypes
from uopir.onnx.registry import Node, OnnxImportError, axis_of, const_ints, onnx_op
from uopir.onnx.types import onnx_dtype

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


@dataclass(frozen=True)
class SeqValue:
    """An ONNX sequence: its tensors in order and its element dtype (known even when it is empty)."""
    items: tuple[Any, ...]
    dtype: DType

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class OptionalValue:
    """An ONNX optional: `value` (a Tensor or SeqValue) or None for an empty one."""
    value: Any


# operators that take or give sequence / optional values; every other operator given one is an error naming it
SEQ_AWARE = frozenset({"Identity", "If", "Loop", "SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceInsert",
                       "SequenceErase", "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap",
                       "Optional", "OptionalHasElement", "OptionalGetElement"})


def is_structured(v: Any) -> bool:
    return isinstance(v, SeqValue | OptionalValue)


def tensors_of(v: Any) -> list[Tensor]:
    """The Tensors a value holds (itself, a sequence's items — or a list of them —, an optional's content)."""
    if isinstance(v, SeqValue | list):
        return [t for x in (v.items if isinstance(v, SeqValue) else v) for t in tensors_of(x)]
    if isinstance(v, OptionalValue):
        return tensors_of(v.value) if v.value is not None else []
    return [v] if v is not None else []


def to_user(v: Any) -> Any:
    """A graph output as `model(...)` gives it: a Tensor, a list of them (a sequence), None (an empty optional)."""
    if isinstance(v, SeqValue):
        return [to_user(x) for x in v.items]
    if isinstance(v, OptionalValue):
        return None if v.value is None else to_user(v.value)
    return v


def type_text(tp: Any) -> str:
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        return f"sequence of {type_text(tp.sequence_type.elem_type)}"
    if kind == "optional_type":
        return f"optional of {type_text(tp.optional_type.elem_type)}"
    return "tensor" if kind == "tensor_type" else str(kind)


def check_type(tp: Any, where: str, onnx_dtype: Any) -> None:
    """A sequence of tensors or an optional of a tensor / a sequence of tensors, with supported element types;
    OnnxImportError for maps, sparse tensors, nested sequences and strings."""
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        el = tp.sequence_type.elem_type
        if el.WhichOneof("value") != "tensor_type":
            raise OnnxImportError(f"{where}unsupported type: sequence of {type_text(el)}")
        if el.tensor_type.elem_type:
            onnx_dtype(el.tensor_type.elem_type, where)
        return
    if kind == "optional_type":
        el = tp.optional_type.elem_type
        if el.WhichOneof("value") not in ("tensor_type", "sequence_type"):
            raise OnnxImportError(f"{where}unsupported type: optional of {type_text(el)}")
        if el.WhichOneof("value") == "tensor_type":
            if el.tensor_type.elem_type:
                onnx_dtype(el.tensor_type.elem_type, where)
        else:
            check_type(el, where, onnx_dtype)
        return
    names = {"map_type": "map", "sparse_tensor_type": "sparse tensor"}
    raise OnnxImportError(f"{where}unsupported type: {names.get(kind, str(kind))}")


def bind(name: str, tp: Any, value: Any, device: str, onnx_dtype: Any, to_tensor: Any) -> Any:
    """A feed of a sequence / optional graph input as its value: a list/tuple of arrays or Tensors for a sequence;
    None (empty) or the content for an optional."""
    kind = tp.WhichOneof("value")
    if kind == "optional_type":
        return OptionalValue(None if value is None else bind(name, tp.optional_type.elem_type, value, device,
                                                             onnx_dtype, to_tensor))
    if kind == "sequence_type":
        if not isinstance(value, list | tuple):
            raise OnnxImportError(f"input '{name}': a sequence is given as a list of arrays, got "
                                  f"{type(value).__name__}")
        code = tp.sequence_type.elem_type.tensor_type.elem_type
        want = onnx_dtype(code) if code else None
        items = tuple(to_tensor(v, None, device) for v in value)
        bad = [i for i, t in enumerate(items) if want is not None and t.dtype != want]
        if bad:
            raise OnnxImportError(f"input '{name}': element {bad[0]} has dtype {items[bad[0]].dtype}, the model wants "
                                  f"{want}")
        d = want or (items[0].dtype if items else dtypes.float32)
        return SeqValue(items, d)
    if value is None:
        raise OnnxImportError(f"input '{name}' is not given")
    t = to_tensor(value, None, device)
    code = tp.tensor_type.elem_type
    if code and t.dtype != onnx_dtype(code):
        raise OnnxImportError(f"input '{name}': dtype {t.dtype}, the model wants {onnx_dtype(code)}")
    return t


def _seq(node: Node, inputs: list, i: int = 0) -> SeqValue:
    v = inputs[i] if i < len(inputs) else None
    if not isinstance(v, SeqValue):
        raise node.error(f"input {i} must be a sequence, got {'nothing' if v is None else _kind(v)}")
    return v


def _kind(v: Any) -> str:
    return "a sequence" if isinstance(v, SeqValue) else "an optional" if isinstance(v, OptionalValue) else "a tensor"


def _tensor(node: Node, inputs: list, i: int, what: str) -> Tensor:
    v = inputs[i] if i < len(inputs) else None
    if v is None or is_structured(v):
        raise node.error(f"input {i} ({what}) must be a tensor, got {'nothing' if v is None else _kind(v)}")
    return v


def _position(node: Node, seq: SeqValue, t: Tensor | None, default: int, inserting: bool = False) -> int:
    """A position input in [-n, n-1] ([-n, n] when inserting), as an index."""
    n = len(seq)
    if t is None:
        return default
    if t.numel() != 1:
        raise node.error(f"position must be a scalar, got shape {tuple(t.shape)}")
    p = const_ints(node, t, "position")[0]
    hi = n if inserting else n - 1
    if not -n <= p <= hi:
        raise node.error(f"position {p} is out of range for a sequence of {n} tensor{'s' if n != 1 else ''}")
    return p + n if p < 0 else p


def _check_elem(node: Node, seq: SeqValue, t: Tensor) -> None:
    if t.dtype != seq.dtype:
        raise node.error(f"a {t.dtype} tensor cannot join a sequence of {seq.dtype}")


@onnx_op("SequenceConstruct", since=11)
def sequence_construct(node: Node, inputs: list) -> list[Any]:
    ts = [_tensor(node, inputs, i, "a sequence element") for i in range(len(inputs))]
    if not ts:
        raise node.error("SequenceConstruct needs at least one input")
    if len({t.dtype for t in ts}) > 1:
        raise node.error(f"the inputs' dtypes differ: {sorted(str(t.dtype) for t in ts)}")
    return [SeqValue(tuple(ts), ts[0].dtype)]


@onnx_op("SequenceEmpty", since=11)
def sequence_empty(node: Node, inputs: list) -> list[Any]:
    return [SeqValue((), onnx_dtype(node.attr("dtype", 1), f"{node.where()}: "))]


@onnx_op("SequenceAt", since=11)
def sequence_at(node: Node, inputs: list) -> list[Any]:
    s = _seq(node, inputs)
    return [s.items[_position(node, s, _tensor(node, inputs, 1, "position"), 0)]]


@onnx_op("SequenceInsert", since=11)
def sequence_insert(node: Node, inputs: list) -> list[Any]:
    s, t = _seq(node, inputs), _tensor(node, inputs, 1, "tensor")
    _check_elem(node, s, t)
    p = _position(node, s, inputs[2] if len(inputs) > 2 else None, len(s), inserting=True)
    return [SeqValue(s.items[:p] + (t,) + s.items[p:], s.dtype)]


@onnx_op("SequenceErase", since=11)
def sequence_erase(node: Node, inputs: list) -> list[Any]:
    s = _seq(node, inputs)
    if not len(s):
        raise node.error("cannot erase from an empty sequence")
    p = _position(node, s, inputs[1] if len(inputs) > 1 else None, len(s) - 1)
    return [SeqValue(s.items[:p] + s.items[p + 1:], s.dtype)]


@onnx_op("SequenceLength", since=11)
def sequence_length(node: Node, inputs: list) -> list[Any]:
    from uopir.frontend.tensor import Tensor
    return [Tensor.full((), len(_seq(node, inputs)), dtype=dtypes.int64, device=node.device)]


@onnx_op("SplitToSequence", since=11)
def split_to_sequence(node: Node, inputs: list) -> list[Any]:
    x = _tensor(node, inputs, 0, "input")
    split = inputs[1] if len(inputs) > 1 else None
    axis = axis_of(node, node.attr("axis", 0), x.ndim)
    dim = x.shape[axis]
    if split is None:
        sizes = [1] * dim
    elif split.ndim == 0:
        k = const_ints(node, split, "split")[0]
        if k <= 0:
            raise node.error(f"split {k} must be positive")
        sizes = [k] * (dim // k) + ([dim % k] if dim % k else [])
    else:
        sizes = const_ints(node, split, "split")
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise node.error(f"split sizes {sizes} do not add up to the axis' {dim}")
    parts, start = [], 0
    for s in sizes:
        parts.append(x.shrink(tuple((start, start + s) if i == axis else None for i in range(x.ndim))))
        start += s
    if split is None and not node.attr("keepdims", 1):
        parts = [p.squeeze(axis) for p in parts]
    return [SeqValue(tuple(parts), x.dtype)]


@onnx_op("ConcatFromSequence", since=11)
def concat_from_sequence(node: Node, inputs: list) -> list[Any]:
    from uopir.frontend.tensor import Tensor
    s = _seq(node, inputs)
    if not len(s):
        raise node.error("cannot concatenate an empty sequence (its result's shape is unknown)")
    new_axis = node.attr("new_axis", 0)
    rank = s.items[0].ndim + (1 if new_axis else 0)
    axis = axis_of(node, node.attr("axis"), rank)
    if new_axis:
        return [Tensor.stack(*s.items, dim=axis)]
    return [s.items[0].cat(*s.items[1:], dim=axis) if len(s) > 1 else s.items[0]]


@onnx_op("SequenceMap", since=17)
def sequence_map(node: Node, inputs: list) -> list[Any]:
    """The body once per position of the sequence inputs (tensor inputs given whole to each); each output a sequence
    of the bodies' results."""
    s0 = _seq(node, inputs)
    n = len(s0)
    if any(isinstance(v, SeqValue) and len(v) != n for v in inputs):
        lens = sorted({len(v) for v in inputs if isinstance(v, SeqValue)})
        raise node.error(f"the sequence inputs' lengths differ: {lens}")
    outs: list[list[Tensor]] = [[] for _ in range(node.n_outputs)]
    for i in range(n):
        res = node.run_subgraph("body", [v.items[i] if isinstance(v, SeqValue) else v for v in inputs])
        if len(res) != node.n_outputs:
            raise node.error(f"the body has {len(res)} outputs, the node {node.n_outputs}")
        for j, r in enumerate(res):
            outs[j].append(r)
    dts = _body_dtypes(node)
    return [SeqValue(tuple(o), o[0].dtype if o else dts[j]) for j, o in enumerate(outs)]


def _body_dtypes(node: Node) -> list[DType]:
    """The element dtypes the body's outputs declare (an empty SequenceMap's output sequences still have one)."""
    g = node.attrs.get("body")
    out = []
    for vi in (g.output if g is not None else []):
        code = vi.type.tensor_type.elem_type if vi.type.WhichOneof("value") == "tensor_type" else 0
        out.append(onnx_dtype(code) if code else dtypes.float32)
    return out + [dtypes.float32] * (node.n_outputs - len(out))


@onnx_op("Optional", since=15)
def optional(node: Node, inputs: list) -> list[Any]:
    v = inputs[0] if inputs else None
    if v is None and not node.has("type"):
        raise node.error("an empty Optional needs its 'type' attribute")
    return [OptionalValue(v)]


@onnx_op("OptionalHasElement", since=15)
def optional_has_element(node: Node, inputs: list) -> list[Any]:
    from uopir.frontend.tensor import Tensor
    v = inputs[0] if inputs else None
    has = v.value is not None if isinstance(v, OptionalValue) else v is not None
    return [Tensor.full((), has, dtype=dtypes.bool, device=node.device)]


@onnx_op("OptionalGetElement", since=15)
def optional_get_element(node: Node, inputs: list) -> list[Any]:
    v = inputs[0] if inputs else None
    if isinstance(v, OptionalValue):
        if v.value is None:
            raise node.error("the optional input is empty")
        return [v.value]
    if v is None:
        raise node.error("input 0 is required")
    return [v]  # opset 18: a tensor or sequence is its own content
