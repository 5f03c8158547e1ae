"""The operator registry of the ONNX importer: one function per (domain, op_type, since-version).

An op function receives the graph node (its attributes, name and opset) and its inputs as uopir Tensors (None for an
omitted optional input) and returns one Tensor or a sequence of them (None for an output it does not produce). Several
versions of one operator may be registered: `lookup` picks the one with the highest `since` that is <= the model's
opset for the node's domain, so an op function only needs a new version where the operator's meaning changed.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uopir.frontend.tensor import Tensor


class OnnxImportError(ValueError):
    """An ONNX model the importer cannot take; the message names the node, its operator and its opset:
    "node 'Conv_3' (Conv, opset 13): ...". Raised at import time where it can be detected, else when the model runs."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass
class Node:
    """One graph node as the op functions see it. `attrs` holds decoded attribute values: int, float, str (strings are
    decoded as UTF-8), lists of those, numpy arrays for tensors, and graphs (onnx GraphProto) as they are."""
    name: str
    op_type: str
    domain: str = ""
    opset: int = 1
    attrs: dict[str, Any] = field(default_factory=dict)
    n_outputs: int = 1
    device: str | None = None  # the model's device: create new tensors with `device=node.device`
    subgraphs: dict[str, Any] = field(default_factory=dict, repr=False)  # graph attributes, compiled (If's branches)
    runner: Callable[[Any, list[Any]], list[Any]] | None = field(default=None, repr=False, compare=False)
    # low-precision ONNX types (uopir.onnx.lowp.LowpType) of the inputs held in a wider dtype (None: an ordinary
    # value), set for each call; an op function that makes such a value records its type in `lowp_out[i]`
    lowp_in: list[Any] = field(default_factory=list, repr=False, compare=False)
    lowp_out: dict[int, Any] = field(default_factory=dict, repr=False, compare=False)

    def where(self) -> str:
        dom = f"{self.domain}." if self.domain and self.domain != "ai.onnx" else ""
        return f"node '{self.name}' ({dom}{self.op_type}, opset {self.opset})"

    def error(self, msg: str) -> OnnxImportError:
        """The error to raise for this node: `raise node.error("...")`."""
        return OnnxImportError(f"{self.where()}: {msg}")

    def attr(self, name: str, default: Any = REQUIRED) -> Any:
        """The attribute's value, or `default` when absent; a missing attribute without a default is an error."""
        if name in self.attrs:
            return self.attrs[name]
        if default is REQUIRED:
            raise self.error(f"missing required attribute '{name}'")
        return default

    def has(self, name: str) -> bool:
        return name in self.attrs

    def run_subgraph(self, attr: str, inputs: Sequence[Tensor] = ()) -> list[Tensor]:
        """Run the graph attribute `attr` (If's then_branch...) in the node's scope (it sees the outer values) with
        `inputs` bound to its graph inputs; returns its outputs in order."""
        if attr not in self.subgraphs:
            raise self.error(f"missing graph attribute '{attr}'")
        if self.runner is None:
            raise self.error("subgraphs run only inside a model")
        return self.runner(self.subgraphs[attr], list(inputs))


OpFn = Callable[[Node, "list[Tensor | None]"], "Tensor | Sequence[Tensor | None]"]

# (domain, op_type) -> [(since, fn)] kept sorted by since
_REGISTRY: dict[tuple[str, str], list[tuple[int, OpFn]]] = {}


def _norm_domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def onnx_op(op_type: str, since: int = 1, domain: str = "") -> Callable[[OpFn], OpFn]:
    """Register the decorated function as `op_type` of `domain` from opset version `since` on."""
    def deco(fn: OpFn) -> OpFn:
        versions = _REGISTRY.setdefault((_norm_domain(domain), op_type), [])
        if any(s == since for s, _ in versions):
            raise ValueError(f"ONNX op {op_type!r} (domain {domain!r}) registered twice for since={since}")
        versions.append((since, fn))
        versions.sort(key=lambda v: v[0])
        return fn
    return deco


def lookup(op_type: str, domain: str, opset: int) -> OpFn | None:
    """The op function for `op_type` of `domain` at `opset`: the registered version with the highest since <= opset;
    None when the operator is unknown (or only registered for later opsets)."""
    best: OpFn | None = None
    for since, fn in _REGISTRY.get((_norm_domain(domain), op_type), []):
        if since <= opset:
            best = fn
    return best


def registered_ops() -> dict[tuple[str, str], list[int]]:
    """(domain, op_type) -> the `since` versions registered, for docs and tests."""
    return {k: [s for s, _ in v] for k, v in sorted(_REGISTRY.items())}


def const_ints(node: Node, t: Tensor | None, what: str) -> list[int]:
    """The values of a shape-like input (a shape, axes, pads, repeats...) as Python ints, flattened (row-major);
    realizes it when it is computed. A missing (None) input is an error naming the node."""
    if t is None:
        raise node.error(f"input '{what}' is required")
    if t.dtype.is_float:
        raise node.error(f"input '{what}' must be an integer tensor, got {t.dtype}")
    return [int(v) for v in t.numpy().reshape(-1).tolist()]


def supported_ops_text(width: int = 120) -> str:
    """The registered operators as docs/onnx.md lists them: `Name` or `Name(since,...)`, domain prefixed when not
    ai.onnx, wrapped at `width`."""
    words = []
    for (domain, name), versions in registered_ops().items():
        w = f"{domain}.{name}" if domain else name
        words.append(w if versions == [1] else f"{w}({','.join(map(str, versions))})")
    lines, cur = [], ""
    for w in sorted(words, key=lambda s: s.lower()):
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return "\n".join([*lines, cur] if cur else lines)


def axis_of(node: Node, a: int, rank: int, what: str = "axis") -> int:
    """a normalized into [0, rank) (negative counts from the end); an error naming the node when out of range."""
    if not -rank <= a < rank:
        raise node.error(f"{what} {a} is out of range for rank {rank}")
    return a % rank
