"""ONNX model -> uopir Tensor graph: `from_onnx(path | ModelProto)` gives an `OnnxModel`, called with the inputs.

The graph's nodes are replayed in their (topological, as the ONNX spec requires) order through the op functions of
`uopir.onnx.registry`, each building Tensor API calls; nothing runs until the outputs are realized. Initializers
become realized buffers once, at import. Every node is checked at import time (a registered op function for its
domain and opset, supported dtypes of every typed value); what the importer cannot take raises `OnnxImportError`
naming the node, its operator and its opset before anything runs.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.ir.diagnostics import BufferTooLarge, check_buffer_size
from uopir.ir.dtype import DType, dtypes
from uopir.onnx import ops_sequence as S
from uopir.onnx.lowp import LOWP, LOWP_AWARE, LOWP_PASSTHROUGH, LowpType, from_storage, lowp_of_np, to_storage
from uopir.onnx.registry import Node, OnnxImportError, lookup
from uopir.onnx.replay import MAX_SIGNATURES, FastPlan, fast_plan, signature
from uopir.onnx.types import np_dtype, onnx_dtype

if TYPE_CHECKING:
    import onnx

    from uopir.frontend.tensor import Tensor


class OnnxOpError(OnnxImportError):
    """An op function failed on this node's inputs (a Tensor API error, or a bug of the importer): the message names
    the node and carries the original error. Unlike a plain OnnxImportError it is not a known unsupported feature."""


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:  # pragma: no cover - the onnx extra is missing
        raise ImportError("uopir.onnx needs the onnx package: pip install 'uopir[onnx]'") from None
    return onnx


def lowp_dtype(elem_type: int, where: str = "") -> tuple[DType, LowpType | None]:
    """(uopir dtype, LowpType) of an ONNX element type where low-precision types are allowed: a float8/float4/int4/
    int2 type gives its storage dtype and its LowpType; an ordinary one (its dtype, None); strings etc. raise."""
    lt = LOWP.get(elem_type)
    return (lt.storage, lt) if lt is not None else (onnx_dtype(elem_type, where), None)


def default_device() -> str:
    from uopir.backends.registry import default_device as dd
    return dd()


def to_tensor(value: Any, dtype: DType | None = None, device: str | None = None) -> Tensor:
    """A Tensor of a numpy array (ml_dtypes bfloat16 included) or Tensor, in `dtype` when given."""
    from uopir.frontend.tensor import Tensor
    if isinstance(value, Tensor):
        t = value if device is None or value.device == device else value.to(device)
        return t if dtype is None or t.dtype == dtype else t.cast(dtype)
    arr = np.asarray(value)
    if arr.dtype.name == "bfloat16":
        arr, dtype = arr.astype(np.float32), dtype or dtypes.bfloat16
    if dtype is not None and dtype != dtypes.bfloat16:
        arr = arr.astype(np_dtype(dtype), copy=False)
    return Tensor(np.require(arr, requirements="C"), dtype=dtype, device=device)


def _scalar_const(t: Any) -> Any:
    """A one-element float32/float64 initializer no feed overrides as a constant tensor of its value, within a captured
    plan (its key says which initializers are overridden): kernels take the value as a literal instead of a
    buffer read, and ops see it (erf(x / sqrt 2) as x * (1 / sqrt 2), GELU's one division fewer)."""
    from uopir.frontend.tensor import Tensor
    if not isinstance(t, Tensor) or t.numel() != 1 or t.dtype not in (dtypes.float32, dtypes.float64):
        return t
    return Tensor.full(t.shape, float(t.numpy().reshape(-1)[0]), dtype=t.dtype, device=t.device)


def _tensor_values(tp: Any, where: str) -> np.ndarray:
    """A TensorProto's values, read by onnx. Data still in an external file is refused: onnx.load(path) has read the
    files beside a model loaded from its path, and any other model would read them relative to the current folder.
    Data onnx cannot read (a size that does not match the dims, ...) is an OnnxImportError, not numpy's error."""
    onnx = _onnx()
    from onnx import numpy_helper
    if tp.data_location == onnx.TensorProto.EXTERNAL:
        loc = next((e.value for e in tp.external_data if e.key == "location"), "?")
        raise OnnxImportError(f"{where}its data is in the external file {loc!r}, which is read only for a model "
                              "loaded from its path (from_onnx(path)), from beside it")
    try:
        return numpy_helper.to_array(tp)
    except Exception as e:  # onnx's and numpy's errors vary (ValidationError, ValueError, ...): the one clear error
        raise OnnxImportError(f"{where}its data cannot be read: {e}") from None


def _decode_attr(a: Any, where: str = "") -> Any:
    """The Python value of an AttributeProto (tensors as numpy arrays, graphs as GraphProto)."""
    onnx = _onnx()
    t = onnx.AttributeProto
    if a.type == t.FLOAT:
        return float(a.f)
    if a.type == t.INT:
        return int(a.i)
    if a.type == t.STRING:
        return a.s.decode("utf-8", errors="replace")
    if a.type == t.TENSOR:
        return _tensor_values(a.t, f"{where}attribute '{a.name}': ")
    if a.type == t.GRAPH:
        return a.g
    if a.type == t.FLOATS:
        return [float(x) for x in a.floats]
    if a.type == t.INTS:
        return [int(x) for x in a.ints]
    if a.type == t.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in a.strings]
    if a.type == t.TENSORS:
        return [_tensor_values(x, f"{where}attribute '{a.name}': ") for x in a.tensors]
    if a.type == t.GRAPHS:
        return list(a.graphs)
    if a.type == t.SPARSE_TENSOR:
        return a.sparse_tensor
    if a.type == t.TYPE_PROTO:
        return a.tp
    return None


def _type_check(tp: Any, where: str) -> tuple[DType | None, tuple[int | str | None, ...] | None]:
    """(dtype, shape with dim_param names / None for unknown dims) of a TypeProto (a low-precision type: its storage
    dtype); OnnxImportError for a map or sparse type and for unsupported element types. A sequence or optional type
    (ops_sequence) is checked and gives (None, None)."""
    kind = tp.WhichOneof("value")
    if kind != "tensor_type":
        S.check_type(tp, where, onnx_dtype)
        return None, None
    tt = tp.tensor_type
    d = lowp_dtype(tt.elem_type, where)[0]
    if not tt.HasField("shape"):
        return d, None
    dims: list[int | str | None] = []
    for dim in tt.shape.dim:
        w = dim.WhichOneof("value")
        if w == "dim_value" and dim.dim_value < 0:
            raise OnnxImportError(f"{where}dim {len(dims)} is {dim.dim_value} (a dim is a size >= 0 or a name)")
        dims.append(int(dim.dim_value) if w == "dim_value" else dim.dim_param if w == "dim_param" else None)
    return d, tuple(dims)


def _lowp_type(tp: Any) -> LowpType | None:
    return LOWP.get(tp.tensor_type.elem_type) if tp.WhichOneof("value") == "tensor_type" else None


def _init_tensor(init: Any, where: str, device: str) -> tuple[Tensor, LowpType | None]:
    """A realized Tensor of an initializer (low-precision ones decoded to their storage dtype) and its LowpType."""
    d, lt = lowp_dtype(init.data_type, where)
    arr = _tensor_values(init, where)
    if lt is not None:
        arr = to_storage(arr, lt)
    return to_tensor(arr, d, device).realize(), lt


@dataclass
class _Subgraph:
    """A compiled graph attribute: its steps, input and output names, and realized initializers."""
    steps: list[tuple[Node, Any, list[str], list[str]]]
    inputs: list[str]
    outputs: list[str]
    initializers: dict[str, Any]


class OnnxModel:
    """An imported ONNX model: `model({"x": array})` returns `{output name: Tensor}` (lazy; `.numpy()` realizes, or
    call `run` for realized numpy arrays). `inputs` maps each graph input to (dtype, shape with dim_param names)."""

    def __init__(self, proto: onnx.ModelProto, device: str | None = None, jit: bool = True,
                 max_plans: int = 16) -> None:
        self.proto = proto
        self.device = device or default_device()
        self.jit = jit
        self.max_plans = max_plans
        # per input signature: the captured plan (a TinyJit), or None when the graph reads computed values on the host
        self._plans: dict[tuple, Any] = {}
        # per signature whose graph reads small integer inputs on the host: their indices (plans keyed on their values)
        self._value_inputs: dict[tuple, tuple[int, ...]] = {}
        # per numpy feed signature replayed once: its plan's steady call (uopir.onnx.replay)
        self._fast: dict[tuple, FastPlan] = {}
        self.stats = {"builds": 0, "captures": 0, "replays": 0, "dynamic": 0}
        self.opsets: dict[str, int] = {}
        for imp in proto.opset_import:
            self.opsets["" if imp.domain == "ai.onnx" else imp.domain] = int(imp.version)
        if proto.ir_version < 3 and "" not in self.opsets:
            self.opsets[""] = 1
        g = proto.graph
        init_names = {i.name for i in g.initializer}
        self.inputs: dict[str, tuple[DType, tuple[int | str | None, ...] | None]] = {}
        # graph inputs of a sequence or optional type (their TypeProto): fed as a list of arrays / an array or None
        self.structured_inputs: dict[str, Any] = {}
        # values of a low-precision ONNX type (held in their storage dtype): inputs, initializers, and (known after a
        # build) the outputs, whose `run` results are given back in the type's ml_dtypes dtype
        self.lowp_inputs: dict[str, LowpType] = {}
        self._lowp_inits: dict[str, LowpType] = {}
        self.lowp_outputs: dict[str, LowpType] = {}
        for vi in g.input:
            if vi.name in init_names:
                continue  # an initializer listed as an input (IR < 4): an overridable default, taken as constant
            d, shape = _type_check(vi.type, f"graph input '{vi.name}': ")
            if d is None:
                self.structured_inputs[vi.name] = vi.type
                continue
            self.inputs[vi.name] = (d, shape)
            if (lt := _lowp_type(vi.type)) is not None:
                self.lowp_inputs[vi.name] = lt
        self.output_names = [o.name for o in g.output]
        # sequence / optional values in or out: built on every call (a captured plan returns tensors only)
        self._structured_io = bool(self.structured_inputs) or any(
            o.type.WhichOneof("value") not in (None, "tensor_type") for o in g.output)
        if not self.output_names:
            raise OnnxImportError("the model's graph has no outputs (an empty or truncated file?)")
        self.last_inputs: dict[str, Tensor] = {}
        for vi in list(g.output) + list(g.value_info):
            if vi.type.WhichOneof("value") is not None:
                _type_check(vi.type, f"value '{vi.name}': ")
        self.initializers: dict[str, Tensor] = {}
        for init in g.initializer:
            self.initializers[init.name], lt = _init_tensor(init, f"initializer '{init.name}': ", self.device)
            if lt is not None:
                self._lowp_inits[init.name] = lt
        for sp in g.sparse_initializer:
            raise OnnxImportError(f"initializer '{sp.values.name}': unsupported sparse initializer")
        self.nodes = self._compile_nodes(g)

    def _compile_nodes(self, g: Any, prefix: str = "") -> list[tuple[Node, Any, list[str], list[str]]]:
        """Each node of graph g with its op function and decoded attributes; graph attributes are compiled into
        `Node.subgraphs` (nesting depth is the model's subgraph depth, not its node count)."""
        steps: list[tuple[Node, Any, list[str], list[str]]] = []
        defined = {v.name: "a graph input" for v in g.input} | {v.name: "an initializer" for v in g.initializer}
        for i, n in enumerate(g.node):
            domain = "" if n.domain == "ai.onnx" else n.domain
            node = Node(name=n.name or f"{prefix}{n.op_type}_{i}", op_type=n.op_type, domain=domain,
                        opset=self.opsets.get(domain, 0), n_outputs=len(n.output), device=self.device)
            if domain not in self.opsets:
                raise node.error(f"the model imports no opset for domain '{domain}'")
            for out in n.output:
                if out and out in defined:
                    raise node.error(f"output '{out}' is already {defined[out]} (a value is defined once in ONNX)")
                defined[out] = f"an output of node '{node.name}'"
            fn = lookup(n.op_type, domain, node.opset)
            if fn is None:
                raise node.error("unsupported operator")
            for a in n.attribute:
                if a.ref_attr_name:
                    raise node.error(f"attribute '{a.name}' refers to a function attribute: unsupported")
                self._check_attr_dtype(node, a)
                node.attrs[a.name] = _decode_attr(a, f"{node.where()}: ")
                if a.type == _onnx().AttributeProto.GRAPH:
                    sub = a.g
                    for vi in list(sub.input) + list(sub.output):
                        if (lt := _lowp_type(vi.type)) is not None:
                            raise node.error(f"attribute '{a.name}': subgraph {vi.name!r} of type {lt.name}: "
                                             "low-precision values crossing a subgraph boundary are unsupported")
                    inits = {}
                    for init in sub.initializer:
                        inits[init.name], lt = _init_tensor(
                            init, f"{node.where()}: subgraph initializer '{init.name}': ", self.device)
                        if lt is not None:
                            raise node.error(f"subgraph initializer '{init.name}' of type {lt.name}: unsupported")
                    node.subgraphs[a.name] = _Subgraph(self._compile_nodes(sub, f"{node.name}/"),
                                                       [v.name for v in sub.input], [v.name for v in sub.output],
                                                       inits)
                elif a.type == _onnx().AttributeProto.GRAPHS:
                    raise node.error(f"attribute '{a.name}': lists of graphs are unsupported")
            steps.append((node, fn, list(n.input), list(n.output)))
        return steps

    def _run_steps(self, steps: list[tuple[Node, Any, list[str], list[str]]], env: dict[str, Any],
                   lowp: dict[str, LowpType]) -> None:
        """Run the nodes in order; `lowp` maps the names of values of a low-precision type to it (updated)."""
        from uopir.frontend.tensor import Tensor
        for node, fn, ins, outs in steps:
            args: list[Tensor | None] = []
            for nm in ins:
                if nm == "":
                    args.append(None)
                elif nm not in env:
                    raise node.error(f"input '{nm}' is not produced by any earlier node (graph not sorted?)")
                else:
                    args.append(env[nm])
            if node.subgraphs:
                node.runner = lambda sub, sub_ins, _env=env, _lowp=lowp: self._run_subgraph(sub, _env, sub_ins, _lowp)
            if node.op_type not in S.SEQ_AWARE or node.domain != "":
                bad = next((i for i, a in enumerate(args) if S.is_structured(a)), None)
                if bad is not None:
                    raise node.error(f"input '{ins[bad]}' is a sequence or optional value, which this operator "
                                     "does not take")
            node.lowp_in = [lowp.get(nm) if nm else None for nm in ins]
            node.lowp_out = {}
            in_types = {lt for lt in node.lowp_in if lt is not None}
            if in_types and node.domain == "" and node.op_type not in LOWP_AWARE | LOWP_PASSTHROUGH:
                raise node.error(f"unsupported dtype {min(in_types, key=lambda t: t.code).name} of an input "
                                 "(only Cast, CastLike, QuantizeLinear, DequantizeLinear and data movement operators "
                                 "take the float8/float4/int4/int2 types)")
            if in_types and node.domain != "":
                raise node.error(f"unsupported dtype {min(in_types, key=lambda t: t.code).name} of an input")
            try:
                res = fn(node, args)
            except OnnxImportError:
                raise
            except RecursionError:
                raise
            except Exception as e:  # a Tensor API error on these inputs: name the node
                raise OnnxOpError(f"{node.where()}: {type(e).__name__}: {e}") from e
            finally:
                node.runner = None
            results = [res] if isinstance(res, Tensor) or S.is_structured(res) else list(res)
            out_types = dict(node.lowp_out)
            if in_types and node.op_type in LOWP_PASSTHROUGH:
                if len(in_types) > 1:
                    raise node.error(f"inputs of different types {sorted(t.name for t in in_types)}")
                lt = next(iter(in_types))
                out_types.update({i: lt for i, r in enumerate(results) if r is not None and r.dtype == lt.storage})
            for i, nm in enumerate(outs):
                if nm == "":
                    continue
                if i >= len(results) or results[i] is None:
                    raise node.error(f"output {i} ('{nm}') is not produced by this importer")
                env[nm] = results[i]
                if i in out_types:
                    lowp[nm] = out_types[i]
                else:
                    lowp.pop(nm, None)

    def _run_subgraph(self, sub: _Subgraph, outer: dict[str, Any], ins: list[Any],
                      outer_lowp: dict[str, LowpType]) -> list[Any]:
        env = {**outer, **sub.initializers}
        lowp = {k: v for k, v in outer_lowp.items() if k not in sub.initializers and k not in sub.inputs}
        if len(ins) != len(sub.inputs):
            raise OnnxImportError(f"a subgraph with {len(sub.inputs)} inputs got {len(ins)}")
        env.update(zip(sub.inputs, ins, strict=True))
        self._run_steps(sub.steps, env, lowp)
        for o in sub.outputs:
            if o in lowp:
                raise OnnxImportError(f"subgraph output '{o}' is of type {lowp[o].name}: low-precision values "
                                      "crossing a subgraph boundary are unsupported")
        missing = [o for o in sub.outputs if o not in env]
        if missing:
            raise OnnxImportError(f"subgraph output(s) {missing} are not produced")
        return [env[o] for o in sub.outputs]

    @staticmethod
    def _check_attr_dtype(node: Node, a: Any) -> None:
        """Dtypes named by attributes (Cast's `to`, `dtype`, `output_dtype`) and the element types of tensor
        attributes must be ones uopir has: checked at import."""
        onnx = _onnx()
        # where a low-precision type may be named: Cast's `to`, QuantizeLinear's `output_dtype`, Constant's value
        lowp_ok = (node.domain == "" and (node.op_type, a.name) in {("Cast", "to"), ("QuantizeLinear", "output_dtype"),
                                                                    ("Constant", "value")})
        check = (lambda code: lowp_dtype(code)) if lowp_ok else onnx_dtype
        try:
            if a.type == onnx.AttributeProto.INT and a.name in ("to", "dtype", "output_dtype"):
                if not (a.name == "output_dtype" and a.i == 0):  # 0: "as the other input" (QuantizeLinear)
                    check(int(a.i))
            elif a.type == onnx.AttributeProto.TENSOR:
                check(a.t.data_type)
        except OnnxImportError as e:
            raise node.error(f"attribute '{a.name}': {e}") from None

    def __repr__(self) -> str:
        return f"OnnxModel(inputs={list(self.inputs)}, outputs={self.output_names}, nodes={len(self.nodes)})"

    def _bind_inputs(self, feeds: Mapping[str, Any]) -> dict[str, Tensor]:
        unknown = set(feeds) - set(self.inputs) - set(self.initializers) - set(self.structured_inputs)
        if unknown:
            raise OnnxImportError(f"unknown input(s) {sorted(unknown)}; the model's inputs are "
                                  f"{list(self.inputs) + list(self.structured_inputs)}")
        env: dict[str, Tensor] = {}
        dims: dict[str, int] = {}
        for name, (d, shape) in self.inputs.items():
            if name not in feeds:
                raise OnnxImportError(f"input '{name}' is not given")
            lt = self.lowp_inputs.get(name)
            value = feeds[name]
            if lt is not None and not hasattr(value, "uop"):  # an array of the type's ml_dtypes dtype: decoded
                if lowp_of_np(np.asarray(value).dtype) is not lt:
                    raise OnnxImportError(f"input '{name}': dtype {np.asarray(value).dtype}, the model wants {lt.name} "
                                          f"(an ml_dtypes {lt.np_dtype} array)")
                value = to_storage(value, lt)
            t = to_tensor(value, None, self.device)
            if t.dtype != d:
                raise OnnxImportError(f"input '{name}': dtype {t.dtype}, the model wants {d}")
            if shape is not None:
                got = tuple(t.shape)
                fixed = len(got) == len(shape) and all(not isinstance(s, int) or s == g_
                                                       for g_, s in zip(got, shape, strict=False))
                if not fixed:
                    if all(isinstance(s, int) for s in shape) and t.numel() == math.prod(shape):
                        t = t.reshape(shape)  # the same elements in the declared shape ((1,) for a declared scalar)
                    else:
                        raise OnnxImportError(f"input '{name}': shape {got} does not match the model's {shape}")
                for g_, s in zip(got, shape, strict=False):
                    if isinstance(s, str) and s:  # dim_param: bound from the first input that has it
                        if dims.setdefault(s, g_) != g_:
                            raise OnnxImportError(f"input '{name}': dim '{s}' is {g_} here but {dims[s]} in an "
                                                  "earlier input")
            env[name] = t
        for name, tp in self.structured_inputs.items():
            if name not in feeds and tp.WhichOneof("value") != "optional_type":
                raise OnnxImportError(f"input '{name}' is not given")
            env[name] = S.bind(name, tp, feeds.get(name), self.device, onnx_dtype, to_tensor)
        for name, t in self.initializers.items():
            if name in feeds:
                lt = self._lowp_inits.get(name)
                value = feeds[name]
                if lt is not None and not hasattr(value, "uop"):
                    value = to_storage(value, lt)
                env[name] = to_tensor(value, t.dtype, self.device)
            else:
                env[name] = t
        return env

    def run_graph(self, feeds: Mapping[str, Any]) -> dict[str, Tensor]:
        """The outputs as lazy Tensors (the graph is built from the nodes on every call)."""
        return self._build(dict(self._bind_inputs(feeds)))

    def _build(self, env: dict[str, Any]) -> dict[str, Tensor]:
        self.stats["builds"] += 1
        self.last_inputs = {k: v for k, v in env.items() if v is not None}
        lowp = {**self._lowp_inits, **self.lowp_inputs}
        self._run_steps(self.nodes, env, lowp)
        out: dict[str, Tensor] = {}
        declared = {o.name: o.type.tensor_type.elem_type for o in self.proto.graph.output
                    if o.type.WhichOneof("value") == "tensor_type" and o.type.tensor_type.elem_type}
        for nm in self.output_names:
            t = env.get(nm)
            if t is None:
                raise OnnxImportError(f"graph output '{nm}' is not produced by any node")
            got, code = lowp.get(nm), declared.get(nm)
            if code is not None and (got is not None or code in LOWP) and got is not LOWP.get(code):
                want = LOWP[code].name if code in LOWP else lowp_dtype(code)[0]
                raise OnnxImportError(f"graph output '{nm}' is declared {want}, the graph computes "
                                      f"{got.name if got else t.dtype}")
            if got is not None:
                self.lowp_outputs[nm] = got
            out[nm] = S.to_user(t)
        return out

    def __call__(self, feeds: Mapping[str, Any] | None = None, **kw: Any) -> dict[str, Tensor]:
        """The outputs by name, realized together (one program per device). With `jit` (the default) the first call
        of an input signature (shapes, dtypes, device, and which initializers are overridden) captures the kernels
        it runs; later calls of that signature replay them on the new data without building the graph again. A
        graph that reads values computed from its inputs back to the host while it is built (NonZero, Compress,
        Unique, a computed shape, a Loop/If condition) keys its plans on those inputs' values when they are small
        integer tensors, else is rebuilt on every call. A signature of numpy feeds replayed once takes the steady way
        from then on (uopir.onnx.replay)."""
        from uopir.frontend.tensor import Tensor
        feeds = {**(feeds or {}), **kw}
        got = self._run_fast(feeds) if self._fast else None
        if got is not None:
            from uopir.backends.buffers import buffer_op
            return {nm: Tensor._of_buffer(buffer_op(b), self.device) for nm, (b, _) in zip(self.output_names, got,
                                                                                           strict=True)}
        env = self._bind_inputs(feeds)
        if not self.jit or self._structured_io:
            return self._realized(self._build(dict(env)))
        names = [n for n in env if n in self.inputs or n in feeds]  # graph inputs, then overridden initializers
        ins = [env[n] for n in names]
        Tensor.realize_all(*ins)
        key = (self.device, tuple((n, tuple(t.shape), t.dtype, t.device) for n, t in zip(names, ins, strict=True)))
        if key in self._plans and self._plans[key] is None:  # dynamic: rebuilt on every call
            return self._realized(self._build(dict(env)))
        vidx = self._value_inputs.get(key)
        full = key if vidx is None else (key, _values(ins, vidx))
        plan = self._plans.get(full)
        if plan is not None:
            self.stats["replays"] += 1
            out = dict(plan(*ins))
            if vidx is None and (sig := signature(feeds)) is not None:  # later calls of these arrays: the steady way
                fp = fast_plan(plan, names, feeds, ins, {**self.lowp_inputs, **self._lowp_inits})
                if fp is not None and len(fp.jit.ret_slots) == len(self.output_names):
                    if len(self._fast) >= MAX_SIGNATURES:
                        self._fast.clear()
                    self._fast[sig] = fp
            return out
        return self._capture(key, names, ins, env)

    def _run_fast(self, feeds: Mapping[str, Any]) -> list[tuple[Any, bool]] | None:
        """The outputs' buffers of a steady call (uopir.onnx.replay), or None when the feeds' signature has none."""
        fp = self._fast_plan(feeds)
        return fp.run(feeds) if fp is not None else None

    def _fast_plan(self, feeds: Mapping[str, Any]) -> FastPlan | None:
        """The steady plan of the feeds' signature (counted as a replay), or None when it has none."""
        sig = signature(feeds)
        fp = self._fast.get(sig) if sig is not None else None
        if fp is not None:
            self.stats["replays"] += 1
        return fp

    @staticmethod
    def _realized(outs: dict[str, Tensor]) -> dict[str, Tensor]:
        from uopir.frontend.tensor import Tensor
        Tensor.realize_all(*{id(t): t for v in outs.values() for t in S.tensors_of(v)}.values())
        return outs

    def _capture(self, key: tuple, names: list[str], ins: list[Tensor], env: dict[str, Any]) -> dict[str, Tensor]:
        """Build and run the graph once inside a TinyJit capture and keep the plan, unless a value computed from the
        inputs was read on the host while building: keyed on the values of the inputs it came from when those are
        small integer tensors (a shape input, a trip count), else this signature is rebuilt on every call."""
        from uopir.backends.buffers import buffer_of
        from uopir.dialects import tensor as T
        from uopir.frontend import device as D
        from uopir.frontend.jit import JitError, TinyJit

        base = {k: _scalar_const(v) if k in self.initializers and k not in self._lowp_inits else v
                for k, v in env.items() if k not in names}

        def graph(*ts: Tensor) -> dict[str, Tensor]:
            return self._build({**base, **dict(zip(names, ts, strict=True))})

        # the initializers no feed overrides never change under a plan: kernels that read only them (weights
        # re-packed for a conv's schedule) run once when the plan's native graph is built
        jit = TinyJit(graph, warmup=False, constants=[t for n, t in self.initializers.items() if n not in names])
        reads: list[Any] = []
        D.HOST_READS.append(reads)
        try:
            outs = jit(*ins)
        except JitError:  # a capture the replay could not bind (two inputs sharing a buffer...): rebuild each call
            outs, jit = self._realized(self._build(dict(env))), None
        finally:
            D.HOST_READS.pop()
        full: tuple | None = None
        if jit is not None:
            # the inputs each buffer's contents depend on: the inputs' own, and every captured result computed from one
            deps: dict[int, frozenset[int]] = {id(buffer_of(t.uop)): frozenset([i]) for i, t in enumerate(ins)
                                               if t.uop.op is T.BUFFER}
            for st in jit.steps:
                d = frozenset().union(*(deps.get(id(b), frozenset()) for b in st.launch.inputs))
                if d:
                    deps[id(st.launch.result)] = d
            read = frozenset().union(*(deps.get(id(b), frozenset()) for b in reads))
            vidx = self._value_inputs.get(key)
            if not read:
                full = key if vidx is None else (key, _values(ins, vidx))
            elif all(_value_key_ok(ins[i]) for i in read) and (vidx is None or read <= set(vidx)):
                # the graph read only values of small integer inputs (shapes, counts): one plan per value
                vidx = self._value_inputs.setdefault(key, tuple(sorted(read)))
                full = (key, _values(ins, vidx))
        if full is None:  # dynamic: this signature is rebuilt on every call
            self.stats["dynamic"] += 1
            self._value_inputs.pop(key, None)
            full, jit = key, None
        else:
            self.stats["captures"] += 1
        if len(self._plans) >= self.max_plans:
            self._plans.pop(next(iter(self._plans)))
            self._fast.clear()  # a steady call must not keep an evicted plan
        self._plans[full] = jit
        return outs

    def reset_plans(self) -> None:
        """Forget every captured plan (the next call of each signature captures again)."""
        self._plans.clear()
        self._value_inputs.clear()
        self._fast.clear()

    def run(self, feeds: Mapping[str, Any] | None = None, **kw: Any) -> dict[str, np.ndarray]:
        """The outputs by name as numpy arrays, each in its ONNX type: bfloat16 and the low-precision types (float8,
        float4, int4, int2) as their ml_dtypes dtype; a sequence as a list of arrays, an empty optional as None."""
        feeds = feeds if not kw and type(feeds) is dict else {**(feeds or {}), **kw}  # (a steady call's own dict)
        fp = self._fast_plan(feeds) if self._fast else None
        arrays = fp.run_arrays(feeds) if fp is not None else None
        if arrays is not None:  # the plan's native replay made the outputs as numpy arrays
            if not self.lowp_outputs:
                return dict(zip(self.output_names, arrays, strict=True))
            return {nm: a if (lt := self.lowp_outputs.get(nm)) is None else from_storage(a, lt)
                    for nm, a in zip(self.output_names, arrays, strict=True)}
        got = fp.run(feeds) if fp is not None else None
        if got is None:
            return {k: self.output_numpy(k, v) for k, v in self(feeds).items()}
        out: dict[str, np.ndarray] = {}
        handed: set[int] = set()
        for nm, (b, own) in zip(self.output_names, got, strict=True):
            # this call's own buffer is handed over as it is (nothing else holds it); others are copied
            a = b.host_view() if own and id(b) not in handed and b.dtype is not dtypes.bfloat16 else None
            handed.add(id(b))
            a = b.numpy() if a is None else a
            if b.dtype is dtypes.bfloat16:
                a = _bf16(a)
            lt = self.lowp_outputs.get(nm)
            out[nm] = a if lt is None else from_storage(a, lt)
        return out

    def output_numpy(self, name: str, t: Any) -> Any:
        """Output `name`'s Tensor as numpy in its ONNX type: an ml_dtypes array for bfloat16 and for a low-precision
        type (whose values the Tensor holds in a wider dtype); a sequence output as a list of arrays, an empty
        optional as None."""
        if t is None or isinstance(t, list):
            return None if t is None else [self.output_numpy(name, x) for x in t]
        lt = self.lowp_outputs.get(name)
        if lt is not None:
            return from_storage(t.numpy(), lt)
        return _bf16(t.numpy()) if t.dtype == dtypes.bfloat16 else t.numpy()

    def example_inputs(self, dim_values: Mapping[str, int] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
        """Random inputs of the declared shapes (dim_param dims from `dim_values`, else 1; unknown dims 1)."""
        rng = np.random.default_rng(seed)
        feeds: dict[str, np.ndarray] = {}
        for name, (d, shape) in self.inputs.items():
            shp = tuple(s if isinstance(s, int) else (dim_values or {}).get(s or "", 1) for s in (shape or ()))
            try:
                check_buffer_size(shp, 8, f"graph input '{name}'")  # drawn as float64/int64 first
            except BufferTooLarge as e:
                raise OnnxImportError(f"cannot make a random example input: {e}") from None
            lt = self.lowp_inputs.get(name)
            if lt is not None:  # values of the type: small ints, or normals rounded to it
                vals = rng.integers(0, 2, shp) if not lt.is_float else rng.standard_normal(shp)
                arr = np.asarray(vals).astype(np.float32).astype(lt.np_dtype)
            elif d.is_float:
                arr = rng.standard_normal(shp).astype(np_dtype(d))
            elif d == dtypes.bool:
                arr = rng.integers(0, 2, shp).astype(np.bool_)
            else:
                arr = rng.integers(0, 4, shp).astype(np_dtype(d))
            feeds[name] = arr
        return feeds


def from_onnx(model: str | os.PathLike[str] | onnx.ModelProto | bytes, device: str | None = None,
              jit: bool = True) -> OnnxModel:
    """Import an ONNX model (a path, serialized bytes or a ModelProto); unsupported operators and dtypes raise
    OnnxImportError here, before anything runs. `jit=False`: every call builds the graph from the nodes again
    (no captured plans; see `OnnxModel.__call__`)."""
    onnx = _onnx()
    if isinstance(model, str | os.PathLike):
        try:
            proto = onnx.load(os.fspath(model))
        except FileNotFoundError:
            raise
        except Exception as e:
            raise OnnxImportError(f"cannot read ONNX model '{os.fspath(model)}': {e}") from None
    elif isinstance(model, bytes | bytearray):
        try:
            proto = onnx.load_from_string(bytes(model))
        except Exception as e:
            raise OnnxImportError(f"cannot parse ONNX model: {e}") from None
    else:
        proto = model
    return OnnxModel(proto, device, jit=jit)


def _bf16(a: np.ndarray) -> np.ndarray:
    """A bfloat16 output's values (held as float32 by Tensor.numpy) as an ml_dtypes bfloat16 array, its ONNX type."""
    import ml_dtypes
    return a.astype(ml_dtypes.bfloat16)


def _value_key_ok(t: Tensor) -> bool:
    """An input whose values may key a plan: a small integer tensor (a shape, axes, a trip count)."""
    return not t.dtype.is_float and t.numel() <= 64


def _values(ins: list[Tensor], idx: tuple[int, ...]) -> tuple:
    return tuple(tuple(ins[i].numpy().reshape(-1).tolist()) for i in idx)


def _seq(x: Any) -> Sequence[Any]:
    return x if isinstance(x, list | tuple) else [x]
