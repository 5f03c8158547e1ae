"""ONNX shape, movement, indexing and creation operators on the Tensor API.

Shape-like inputs (a Reshape's shape, Slice's starts, Pad's pads, TopK's K...) must be known when the graph is built:
`registry.const_ints` reads them, realizing the small graph that computes them when they are not initializers (a
Shape op gives host data, so Shape -> Gather -> Concat -> Reshape chains cost one tiny run each). Ops whose output
shape depends on the data (NonZero, Compress) realize their condition the same way.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend.indexing import pick
from uopir.frontend.nn_ops import take_host
from uopir.frontend.shapes import broadcast_shape
from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes
from uopir.onnx.registry import Node, axis_of, const_ints, onnx_op
from uopir.onnx.types import np_dtype, onnx_dtype


def req(node: Node, inputs: Sequence[Tensor | None], i: int, what: str = "") -> Tensor:
    """Input i, which the operator needs (an error naming the node when it is omitted)."""
    t = inputs[i] if i < len(inputs) else None
    if t is None:
        raise node.error(f"input {i}{f' ({what})' if what else ''} is required")
    return t


def opt(inputs: Sequence[Tensor | None], i: int) -> Tensor | None:
    return inputs[i] if i < len(inputs) else None


def scalar(node: Node, t: Tensor | None, what: str, default: float | int | bool | None = None) -> float | int | bool:
    """The value of a 0-d (or one-element) input, realized when computed."""
    if t is None:
        if default is None:
            raise node.error(f"input '{what}' is required")
        return default
    if t.numel() != 1:
        raise node.error(f"input '{what}' must hold one value, got shape {t.shape}")
    u = t.uop
    while u.op in (T.RESHAPE, T.EXPAND):  # a constant (a scalar initializer in a plan): its value, with no kernel run
        u = u.src[0]
    if u.op is C.CONST and u.dtype.count == 1:
        return np.array(C.const_value(u), np_dtype(t.dtype)).item()
    return t.reshape(()).item()


def host(t: Tensor) -> np.ndarray:
    return np.asarray(t.numpy())


def take(x: Tensor, axis: int, idx: np.ndarray) -> Tensor:
    """x indexed along axis by host integer indices (already in range); idx's dims replace the axis."""
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size == 0 or x.shape[axis] == 0:
        return Tensor.zeros(*(x.shape[:axis] + idx.shape + x.shape[axis + 1:]), dtype=x.dtype, device=x.device)
    flat = idx.reshape(-1)
    n = x.shape[axis]
    if len(flat) == n and (flat == np.arange(n)).all():
        out = x
    else:
        hot = (flat.reshape(-1, 1) == np.arange(n).reshape(1, -1)).reshape(
            (1,) * axis + (len(flat), n) + (1,) * (x.ndim - axis - 1))
        xe = x.unsqueeze(axis).expand(x.shape[:axis] + (len(flat),) + x.shape[axis:])
        out = pick(xe, Tensor(hot, device=x.device), (axis + 1,))
    return out.reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1:])


def take_t(x: Tensor, axis: int, idx: Tensor) -> Tensor:
    """x indexed along axis by an int tensor (negative counts from the end; out of range reads 0), bit exact."""
    n = x.shape[axis]
    idx = idx.cast(dtypes.int64) if idx.dtype != dtypes.int64 else idx
    idx = (idx < 0).where(idx + n, idx)
    flat = idx.reshape(-1)
    m = flat.shape[0]
    if m == 0 or n == 0:
        return Tensor.zeros(*(x.shape[:axis] + idx.shape + x.shape[axis + 1:]), dtype=x.dtype, device=x.device)
    hot = (flat.reshape(m, 1) == Tensor.arange(n, dtype=dtypes.int64, device=x.device).reshape(1, n)).reshape(
        (1,) * axis + (m, n) + (1,) * (x.ndim - axis - 1))
    xe = x.unsqueeze(axis).expand(x.shape[:axis] + (m,) + x.shape[axis:])
    return pick(xe, hot, (axis + 1,)).reshape(x.shape[:axis] + idx.shape + x.shape[axis + 1:])


def const_tensor(arr: np.ndarray, device: str) -> Tensor:
    return Tensor(np.array(arr, order="C"), device=device)  # (ascontiguousarray makes 0-d arrays 1-d)


# ---- reshaping -------------------------------------------------------------------------------------------------------
def _reshape(node: Node, x: Tensor, shape: list[int], allowzero: bool) -> Tensor:
    out = []
    for i, s in enumerate(shape):
        if s == 0 and not allowzero:
            if i >= x.ndim:
                raise node.error(f"shape {shape}: a 0 at position {i} copies a dim the input {x.shape} does not have")
            out.append(x.shape[i])
        else:
            out.append(s)
    if out.count(-1) > 1:
        raise node.error(f"shape {shape} has more than one -1")
    if -1 in out:
        known = math.prod(s for s in out if s != -1)
        if known == 0 or x.numel() % known:
            raise node.error(f"cannot infer the -1 of shape {shape} for input shape {x.shape}")
        out[out.index(-1)] = x.numel() // known
    if math.prod(out) != x.numel():
        raise node.error(f"cannot reshape {x.shape} to {tuple(out)}")
    return x.reshape(tuple(out))


@onnx_op("Reshape")
def reshape_v1(node: Node, inputs: list) -> Tensor:
    return _reshape(node, req(node, inputs, 0), list(node.attr("shape")), False)


@onnx_op("Reshape", since=5)
def reshape(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    allow = node.opset >= 14 and bool(node.attr("allowzero", 0))
    return _reshape(node, x, const_ints(node, req(node, inputs, 1, "shape"), "shape"), allow)


@onnx_op("Transpose")
def transpose(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    perm = node.attr("perm", None)
    perm = list(reversed(range(x.ndim))) if perm is None else [axis_of(node, p, x.ndim, "perm entry") for p in perm]
    if sorted(perm) != list(range(x.ndim)):
        raise node.error(f"perm {perm} is not a permutation of the {x.ndim} axes")
    return x.permute(perm) if x.ndim else x


@onnx_op("Concat")
def concat(node: Node, inputs: list) -> Tensor:
    ts = [t for t in inputs if t is not None]
    if not ts:
        raise node.error("Concat needs at least one input")
    axis = axis_of(node, node.attr("axis", 1) if node.opset < 4 else node.attr("axis"), ts[0].ndim)
    ts = [t for t in ts if t.shape[axis] != 0] or ts[:1]
    return ts[0].cat(*ts[1:], dim=axis) if len(ts) > 1 else ts[0]


def _split_sizes(node: Node, x: Tensor, axis: int, split: list[int] | None) -> list[int]:
    n = x.shape[axis]
    if split:
        if sum(split) != n:
            raise node.error(f"split {split} does not add up to dim {axis} ({n}) of shape {x.shape}")
        return split
    k = node.attr("num_outputs", None) if node.opset >= 18 else None
    if k is None:
        k = node.n_outputs
        if n % k:
            raise node.error(f"dim {axis} ({n}) of shape {x.shape} does not split into {k} equal parts")
        return [n // k] * k
    size = -(-n // k)
    return [min(size, n - i * size) for i in range(k)]


@onnx_op("Split")
def split_v1(node: Node, inputs: list) -> list[Tensor]:
    x = req(node, inputs, 0)
    axis = axis_of(node, node.attr("axis", 0), x.ndim)
    split = node.attr("split", None)
    if split is None and node.opset < 2 and opt(inputs, 1) is not None:
        split = const_ints(node, inputs[1], "split")
    return list(x.split(_split_sizes(node, x, axis, split), axis))


@onnx_op("Split", since=13)
def split(node: Node, inputs: list) -> list[Tensor]:
    x = req(node, inputs, 0)
    axis = axis_of(node, node.attr("axis", 0), x.ndim)
    s = opt(inputs, 1)
    return list(x.split(_split_sizes(node, x, axis, const_ints(node, s, "split") if s is not None else None), axis))


def _slice(node: Node, x: Tensor, starts: list[int], ends: list[int], axes: list[int] | None,
           steps: list[int] | None) -> Tensor:
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.error(f"starts {starts}, ends {ends}, axes {axes}, steps {steps} differ in length")
    bounds: list[tuple[int, int] | None] = [None] * x.ndim
    flips, strides = [], {}
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a = axis_of(node, a, x.ndim)
        if st == 0:
            raise node.error("a slice step of 0")
        n = x.shape[a]
        r = range(*slice(s, e, st).indices(n))
        if len(r) == 0:
            bounds[a] = (0, 0)
            continue
        if st > 0:
            bounds[a] = (r.start, r.start + (len(r) - 1) * st + 1)
        else:
            flips.append(a)
            lo = n - 1 - r.start
            bounds[a] = (lo, lo + (len(r) - 1) * -st + 1)
        if abs(st) > 1:
            strides[a] = abs(st)
    if flips:
        x = x.flip(*flips)
    x = x.shrink(bounds)
    if strides:
        x = x[tuple(slice(None, None, strides.get(i, 1)) for i in range(x.ndim))]
    return x


@onnx_op("Slice")
def slice_v1(node: Node, inputs: list) -> Tensor:
    return _slice(node, req(node, inputs, 0), list(node.attr("starts")), list(node.attr("ends")),
                  node.attr("axes", None), None)


@onnx_op("Slice", since=10)
def slice_(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    starts = const_ints(node, req(node, inputs, 1, "starts"), "starts")
    ends = const_ints(node, req(node, inputs, 2, "ends"), "ends")
    axes = const_ints(node, inputs[3], "axes") if opt(inputs, 3) is not None else None
    steps = const_ints(node, inputs[4], "steps") if opt(inputs, 4) is not None else None
    return _slice(node, x, starts, ends, axes, steps)


def _squeeze(node: Node, x: Tensor, axes: list[int] | None) -> Tensor:
    if axes is None:
        return x.reshape(tuple(s for s in x.shape if s != 1))
    ax = {axis_of(node, a, x.ndim) for a in axes}
    for a in ax:
        if x.shape[a] != 1:
            raise node.error(f"cannot squeeze axis {a} of shape {x.shape}: its size is not 1")
    return x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in ax))


def _unsqueeze(node: Node, x: Tensor, axes: list[int]) -> Tensor:
    r = x.ndim + len(axes)
    ax = sorted(axis_of(node, a, r) for a in axes)
    if len(set(ax)) != len(ax):
        raise node.error(f"axes {axes} repeat an axis")
    shape = list(x.shape)
    for a in ax:
        shape.insert(a, 1)
    return x.reshape(tuple(shape))


@onnx_op("Squeeze")
def squeeze_v1(node: Node, inputs: list) -> Tensor:
    return _squeeze(node, req(node, inputs, 0), node.attr("axes", None))


@onnx_op("Squeeze", since=13)
def squeeze(node: Node, inputs: list) -> Tensor:
    a = opt(inputs, 1)
    return _squeeze(node, req(node, inputs, 0), const_ints(node, a, "axes") if a is not None else None)


@onnx_op("Unsqueeze")
def unsqueeze_v1(node: Node, inputs: list) -> Tensor:
    return _unsqueeze(node, req(node, inputs, 0), list(node.attr("axes")))


@onnx_op("Unsqueeze", since=13)
def unsqueeze(node: Node, inputs: list) -> Tensor:
    return _unsqueeze(node, req(node, inputs, 0), const_ints(node, req(node, inputs, 1, "axes"), "axes"))


@onnx_op("Flatten")
def flatten(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    a = node.attr("axis", 1)
    if not -x.ndim <= a <= x.ndim:
        raise node.error(f"axis {a} is out of range for rank {x.ndim}")
    a = a % x.ndim if a < 0 else a
    return x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))


@onnx_op("Expand", since=8)
def expand(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    shape = const_ints(node, req(node, inputs, 1, "shape"), "shape")
    try:
        out = broadcast_shape(tuple(x.shape), tuple(shape))
    except ValueError:
        raise node.error(f"input shape {x.shape} does not broadcast with {tuple(shape)}") from None
    return x.reshape((1,) * (len(out) - x.ndim) + tuple(x.shape)).expand(out)


@onnx_op("Tile")
def tile(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    if node.opset < 6:
        raise node.error("Tile before opset 6 (tiles/axis inputs) is unsupported")
    reps = const_ints(node, req(node, inputs, 1, "repeats"), "repeats")
    if len(reps) != x.ndim:
        raise node.error(f"repeats {reps} needs one entry per dim of shape {x.shape}")
    return x.repeat(reps) if x.ndim else x


# ---- pad -------------------------------------------------------------------------------------------------------------
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def _pad(node: Node, x: Tensor, pads: list[int], value: float | int | bool, mode: str,
         axes: list[int] | None) -> Tensor:
    if mode not in _PAD_MODES:
        raise node.error(f"unsupported pad mode {mode!r}")
    axes = list(range(x.ndim)) if axes is None else [axis_of(node, a, x.ndim) for a in axes]
    if len(pads) != 2 * len(axes):
        raise node.error(f"pads {pads} needs 2 entries per padded axis ({len(axes)} axes)")
    pairs = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        pairs[a] = (pads[i], pads[i + len(axes)])
    if all(p == (0, 0) for p in pairs):
        return x
    if mode == "constant":
        return x.pad(pairs, value=value)
    if mode == "reflect" and any(x.shape[a] == 1 and p != (0, 0) for a, p in enumerate(pairs)):
        mode = "edge"  # a one-element dim reflects onto itself (the reference and onnxruntime)
    return x.pad(pairs, mode=_PAD_MODES[mode])


@onnx_op("Pad")
def pad_v1(node: Node, inputs: list) -> Tensor:
    pads = node.attr("pads" if node.opset >= 2 else "paddings")
    return _pad(node, req(node, inputs, 0), list(pads), node.attr("value", 0.0), node.attr("mode", "constant"), None)


@onnx_op("Pad", since=11)
def pad(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    pads = const_ints(node, req(node, inputs, 1, "pads"), "pads")
    value = scalar(node, opt(inputs, 2), "constant_value", 0)
    if not x.dtype.is_float and not x.dtype.is_bool:
        value = int(value)
    axes = const_ints(node, inputs[3], "axes") if opt(inputs, 3) is not None else None
    return _pad(node, x, pads, value, node.attr("mode", "constant"), axes)


@onnx_op("CenterCropPad", since=18)
def center_crop_pad(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    shape = const_ints(node, req(node, inputs, 1, "shape"), "shape")
    axes = [axis_of(node, a, x.ndim) for a in node.attr("axes", list(range(x.ndim)))]
    if len(axes) != len(shape):
        raise node.error(f"shape {shape} needs one entry per axis {axes}")
    pairs = [(0, 0)] * x.ndim
    for a, t in zip(axes, shape, strict=True):
        d = x.shape[a] - t
        pairs[a] = (-(d // 2), -(d - d // 2)) if d >= 0 else ((-d) // 2, -d - (-d) // 2)
    return x.pad(pairs)


# ---- gather / scatter ------------------------------------------------------------------------------------------------
@onnx_op("Gather")
def gather(node: Node, inputs: list) -> Tensor:
    x, idx = req(node, inputs, 0), req(node, inputs, 1, "indices")
    if not idx.dtype.is_int:
        raise node.error(f"indices must be integers, got {idx.dtype}")
    return take_t(x, axis_of(node, node.attr("axis", 0), x.ndim), idx)


@onnx_op("GatherElements", since=11)
def gather_elements(node: Node, inputs: list) -> Tensor:
    x, idx = req(node, inputs, 0), req(node, inputs, 1, "indices")
    return x.gather(axis_of(node, node.attr("axis", 0), x.ndim), idx)


@onnx_op("GatherND", since=11)
def gather_nd(node: Node, inputs: list) -> Tensor:
    x, idx = req(node, inputs, 0), req(node, inputs, 1, "indices")
    b = node.attr("batch_dims", 0) if node.opset >= 12 else 0
    k = idx.shape[-1]
    if idx.ndim < 1 or b + k > x.ndim or tuple(idx.shape[:b]) != tuple(x.shape[:b]):
        raise node.error(f"indices shape {idx.shape} (batch_dims {b}) does not fit data shape {x.shape}")
    bshape, ishape, rest = x.shape[:b], x.shape[b:b + k], x.shape[b + k:]
    bn, m = math.prod(bshape), math.prod(ishape)
    q = idx.shape[b:-1]
    qn = math.prod(q)
    ix = idx.cast(dtypes.int64).reshape(bn, qn, k)
    lin: Tensor | int = 0
    for j, s in enumerate(ishape):
        c = ix[:, :, j]
        c = (c < 0).where(c + s, c)
        lin = lin * s + c
    data = x.reshape((bn, m) + tuple(rest))
    if k == 0:
        lin = Tensor.zeros(bn, qn, dtype=dtypes.int64, device=x.device)
    hot = lin.unsqueeze(-1) == Tensor.arange(m, dtype=dtypes.int64, device=x.device)  # type: ignore[union-attr]
    hot = hot.reshape((bn, qn, m) + (1,) * len(rest))
    de = data.unsqueeze(1).expand((bn, qn, m) + tuple(rest))
    return pick(de, hot, (2,)).reshape(tuple(bshape) + tuple(q) + tuple(rest))


_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_elements(node: Node, x: Tensor, idx: Tensor, upd: Tensor, axis: int, reduction: str) -> Tensor:
    n = x.shape[axis]
    idx = idx.cast(dtypes.int64) if idx.dtype != dtypes.int64 else idx
    idx = (idx < 0).where(idx + n, idx)
    if reduction == "none":
        return x.scatter(axis, idx, upd)
    if reduction not in _REDUCE:
        raise node.error(f"unsupported reduction {reduction!r}")
    return x.scatter_reduce(axis, idx, upd, _REDUCE[reduction], include_self=True)


@onnx_op("ScatterElements", since=11)
def scatter_elements(node: Node, inputs: list) -> Tensor:
    x, idx, upd = req(node, inputs, 0), req(node, inputs, 1, "indices"), req(node, inputs, 2, "updates")
    red = node.attr("reduction", "none") if node.opset >= 16 else "none"
    return _scatter_elements(node, x, idx, upd, axis_of(node, node.attr("axis", 0), x.ndim), red)


@onnx_op("Scatter", since=9)
def scatter(node: Node, inputs: list) -> Tensor:
    return scatter_elements(node, inputs)


@onnx_op("ScatterND", since=11)
def scatter_nd(node: Node, inputs: list) -> Tensor:
    x, idx, upd = req(node, inputs, 0), req(node, inputs, 1, "indices"), req(node, inputs, 2, "updates")
    red = node.attr("reduction", "none") if node.opset >= 16 else "none"
    k = idx.shape[-1]
    if k > x.ndim:
        raise node.error(f"indices shape {idx.shape} indexes more dims than data shape {x.shape}")
    ishape, rest = x.shape[:k], tuple(x.shape[k:])
    m, r = math.prod(ishape), math.prod(rest)
    un = math.prod(idx.shape[:-1])
    if tuple(upd.shape) != tuple(idx.shape[:-1]) + rest:
        raise node.error(f"updates shape {upd.shape} must be {tuple(idx.shape[:-1]) + rest}")
    ix = idx.cast(dtypes.int64).reshape(un, k)
    lin: Tensor | int = 0
    for j, s in enumerate(ishape):
        c = ix[:, j]
        lin = lin * s + (c < 0).where(c + s, c)
    if k == 0:
        lin = Tensor.zeros(un, dtype=dtypes.int64, device=x.device)
    index = lin.reshape(un, 1).expand(un, r)  # type: ignore[union-attr]
    out = _scatter_elements(node, x.reshape(m, r), index, upd.reshape(un, r), 0, red)
    return out.reshape(x.shape)


@onnx_op("TensorScatter", since=24)
def tensor_scatter(node: Node, inputs: list) -> Tensor:
    past, upd, wi = req(node, inputs, 0), req(node, inputs, 1, "update"), opt(inputs, 2)
    axis = axis_of(node, node.attr("axis", -2), past.ndim)
    if axis == 0:
        raise node.error("axis 0 is the batch axis")
    m, s = past.shape[axis], upd.shape[axis]
    shp = [1] * past.ndim
    shp[axis] = s
    seq = Tensor.arange(s, dtype=dtypes.int64, device=past.device).reshape(tuple(shp))
    start = (wi.cast(dtypes.int64).reshape((-1,) + (1,) * (past.ndim - 1)) if wi is not None else 0)
    idx = seq + start
    if node.attr("mode", "linear") == "circular":
        idx = idx % m
    idx = idx.expand(tuple(upd.shape)) if isinstance(idx, Tensor) else idx
    return past.scatter(axis, idx, upd)


# ---- shape queries and creation --------------------------------------------------------------------------------------
@onnx_op("Shape")
def shape(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    dims = list(x.shape)
    if node.opset >= 15:
        r = len(dims)
        start, end = node.attr("start", 0), node.attr("end", r)
        start = min(max(start + r if start < 0 else start, 0), r)
        end = min(max(end + r if end < 0 else end, 0), r)
        dims = dims[start:end]
    return const_tensor(np.array(dims, dtype=np.int64), x.device)


@onnx_op("Size")
def size(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    return const_tensor(np.array(x.numel(), dtype=np.int64), x.device)


@onnx_op("ConstantOfShape", since=9)
def constant_of_shape(node: Node, inputs: list) -> Tensor:
    s = req(node, inputs, 0, "input")
    dims = const_ints(node, s, "input") if s.numel() else []
    val = node.attr("value", None)
    if val is None:
        return Tensor.zeros(*dims, dtype=dtypes.float32, device=s.device) if dims else \
            const_tensor(np.zeros((), np.float32), s.device)
    arr = np.asarray(val).reshape(-1)
    if arr.size != 1:
        raise node.error(f"value must hold one element, got {arr.size}")
    from uopir.frontend.dtype_promotion import to_dtype
    d = dtypes.bfloat16 if arr.dtype.name == "bfloat16" else to_dtype(arr.dtype)
    v = arr[0].item() if arr.dtype.name != "bfloat16" else float(arr.astype(np.float32)[0])
    return Tensor.full(tuple(dims), v, dtype=d, device=s.device)


@onnx_op("Range", since=11)
def range_(node: Node, inputs: list) -> Tensor:
    ts = [req(node, inputs, i, w) for i, w in enumerate(("start", "limit", "delta"))]
    start, limit, delta = (scalar(node, t, w) for t, w in zip(ts, ("start", "limit", "delta"), strict=True))
    if delta == 0:
        raise node.error("delta is 0")
    d = ts[0].dtype
    n = max(math.ceil((limit - start) / delta), 0)
    npd = np_dtype(d)
    arr = (np.asarray(start, npd) + np.arange(n, dtype=npd if d.is_float else np.int64) * np.asarray(delta, npd))
    return Tensor(arr.astype(npd), dtype=d, device=ts[0].device)


@onnx_op("OneHot", since=9)
def one_hot(node: Node, inputs: list) -> Tensor:
    idx, dep, vals = req(node, inputs, 0), req(node, inputs, 1, "depth"), req(node, inputs, 2, "values")
    depth = int(scalar(node, dep, "depth"))
    if vals.numel() != 2:
        raise node.error(f"values must hold (off, on), got shape {vals.shape}")
    axis = axis_of(node, node.attr("axis", -1), idx.ndim + 1)
    ii = idx.cast(dtypes.int64) if idx.dtype != dtypes.int64 else idx
    ii = (ii < 0).where(ii + depth, ii).unsqueeze(axis)
    ar = Tensor.arange(depth, dtype=dtypes.int64, device=idx.device).reshape(
        tuple(depth if i == axis else 1 for i in range(idx.ndim + 1)))
    v = vals.reshape(2)
    return (ii == ar).where(v[1], v[0])


@onnx_op("Trilu", since=14)
def trilu(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    k = int(scalar(node, opt(inputs, 1), "k", 0))
    r, c = x.shape[-2:]
    rows = Tensor.arange(r, dtype=dtypes.int64, device=x.device).reshape(r, 1)
    cols = Tensor.arange(c, dtype=dtypes.int64, device=x.device).reshape(1, c)
    keep = (cols - rows >= k) if node.attr("upper", 1) else (cols - rows <= k)
    return keep.where(x, False if x.dtype.is_bool else 0).cast(x.dtype)


@onnx_op("EyeLike", since=9)
def eye_like(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    if x.ndim != 2:
        raise node.error(f"input must be 2-D, got shape {x.shape}")
    d = onnx_dtype(node.attr("dtype")) if node.has("dtype") else x.dtype
    arr = np.eye(x.shape[0], x.shape[1], node.attr("k", 0), dtype=np_dtype(d))
    return Tensor(arr, dtype=d, device=x.device)


# ---- selection -------------------------------------------------------------------------------------------------------
def _topk(node: Node, x: Tensor, k: int, axis: int, largest: bool) -> list[Tensor]:
    a = axis_of(node, axis, x.ndim)
    if not 0 <= k <= x.shape[a]:
        raise node.error(f"K={k} is out of range for dim {a} of shape {x.shape}")
    if k == 0:
        shp = tuple(0 if i == a else s for i, s in enumerate(x.shape))
        return [Tensor.zeros(*shp, dtype=x.dtype, device=x.device),
                Tensor.zeros(*shp, dtype=dtypes.int64, device=x.device)]
    v, i = x.topk(k, a, largest=largest)
    return [v, i.cast(dtypes.int64)]


@onnx_op("TopK")
def topk_v1(node: Node, inputs: list) -> list[Tensor]:
    return _topk(node, req(node, inputs, 0), node.attr("k"), node.attr("axis", -1), True)


@onnx_op("TopK", since=10)
def topk(node: Node, inputs: list) -> list[Tensor]:
    k = int(scalar(node, req(node, inputs, 1, "K"), "K"))
    largest = bool(node.attr("largest", 1)) if node.opset >= 11 else True
    return _topk(node, req(node, inputs, 0), k, node.attr("axis", -1), largest)


@onnx_op("NonZero", since=9)
def nonzero(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    m = host(x)
    return const_tensor(np.array(np.nonzero(m), dtype=np.int64).reshape(m.ndim, -1), x.device)


@onnx_op("Compress", since=9)
def compress(node: Node, inputs: list) -> Tensor:
    x, cond = req(node, inputs, 0), req(node, inputs, 1, "condition")
    c = host(cond).astype(bool).reshape(-1)
    axis = node.attr("axis", None)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = axis_of(node, axis, x.ndim)
    c = c[:x.shape[axis]]
    return take(x, axis, np.nonzero(c)[0])


@onnx_op("ReverseSequence", since=10)
def reverse_sequence(node: Node, inputs: list) -> Tensor:
    x, lens = req(node, inputs, 0), req(node, inputs, 1, "sequence_lens")
    ba, ta = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    if {ba, ta} != {0, 1}:
        raise node.error(f"batch_axis {ba} and time_axis {ta} must be 0 and 1")
    t = x.shape[ta]
    shp = [1] * x.ndim
    shp[ta] = t
    tt = Tensor.arange(t, dtype=dtypes.int64, device=x.device).reshape(tuple(shp))
    lshape = [1] * x.ndim
    lshape[ba] = x.shape[ba]
    ln = lens.cast(dtypes.int64).reshape(tuple(lshape))
    src = (tt < ln).where(ln - 1 - tt, tt).expand(tuple(x.shape))
    return x.gather(ta, src)


@onnx_op("Unique", since=11)
def unique(node: Node, inputs: list) -> list[Tensor]:
    x = req(node, inputs, 0)
    arr = host(x)
    axis = node.attr("axis", None)
    srt = bool(node.attr("sorted", 1))
    if axis is not None:
        axis = axis_of(node, axis, arr.ndim)
    y, idx, inv, cnt = np.unique(arr, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inv = inv.reshape(-1)
    if not srt:
        order = np.argsort(idx, kind="stable")
        y = np.take(y, order, axis=axis if axis is not None else 0)
        idx, cnt = idx[order], cnt[order]
        remap = np.empty_like(order)
        remap[order] = np.arange(len(order))
        inv = remap[inv]
    dev = x.device
    return [Tensor(np.array(y, order="C"), dtype=x.dtype, device=dev), const_tensor(idx.astype(np.int64), dev),
            const_tensor(inv.astype(np.int64), dev), const_tensor(cnt.astype(np.int64), dev)]


# ---- depth / space ---------------------------------------------------------------------------------------------------
@onnx_op("DepthToSpace")
def depth_to_space(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    b = node.attr("blocksize")
    if x.ndim != 4:
        raise node.error(f"input must be 4-D (N, C, H, W), got shape {x.shape}")
    n, c, h, w = x.shape
    if c % (b * b):
        raise node.error(f"channels {c} are not divisible by blocksize^2 = {b * b}")
    if node.attr("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@onnx_op("SpaceToDepth")
def space_to_depth(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    b = node.attr("blocksize")
    if x.ndim != 4 or x.shape[2] % b or x.shape[3] % b:
        raise node.error(f"input shape {x.shape} must be (N, C, H, W) with H and W divisible by {b}")
    n, c, h, w = x.shape
    perm = (0, 1, 3, 5, 2, 4) if node.attr("mode", "DCR") == "CRD" else (0, 3, 5, 1, 2, 4)
    y = x.reshape(n, c, h // b, b, w // b, b).permute(*perm)
    return y.reshape(n, c * b * b, h // b, w // b)


# ---- resize ----------------------------------------------------------------------------------------------------------
def _src_coord(node: Node, mode: str, dst: np.ndarray, scale: float, n_in: int, n_out: int,
               roi: tuple[float, float] | None) -> np.ndarray:
    """Input coordinates of the output positions dst. As the reference, the output width in the formulas is
    scale * n_in (not rounded to n_out) when the scales were given."""
    w = scale * n_in
    if mode == "half_pixel":
        return (dst + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        off = n_in / 2 * (1 - n_out / w) if w else 0.0
        return off + (dst + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (dst + 0.5) / scale - 0.5 if w != 1 else np.full_like(dst, -0.5)
    if mode == "align_corners":
        return dst * (n_in - 1) / (w - 1) if w != 1 else np.zeros_like(dst)
    if mode == "asymmetric":
        return dst / scale
    if mode == "tf_crop_and_resize":
        s, e = roi if roi is not None else (0.0, 1.0)
        if w != 1:
            return s * (n_in - 1) + dst * (e - s) * (n_in - 1) / (w - 1)
        return np.full_like(dst, 0.5 * (e - s) * (n_in - 1) + s * (n_in - 1))
    raise node.error(f"unsupported coordinate_transformation_mode {mode!r}")


def _nearest(node: Node, mode: str, x: np.ndarray, scale: float) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.where(x - np.floor(x) == 0.5, np.floor(x), np.round(x))
    if mode == "round_prefer_ceil":
        return np.where(x - np.floor(x) == 0.5, np.ceil(x), np.round(x))
    if mode == "floor":
        return np.floor(x)
    if mode == "ceil":
        return np.ceil(x)
    raise node.error(f"unsupported nearest_mode {mode!r}")


def _cubic_coeffs(t: np.ndarray, a: float) -> np.ndarray:
    """Weights of the 4 taps at offsets -1, 0, 1, 2 for fractional positions t (Keys' cubic, parameter a)."""
    def w(d: np.ndarray) -> np.ndarray:
        d = np.abs(d)
        return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                        np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))
    return np.stack([w(t + 1), w(t), w(1 - t), w(2 - t)], axis=-1)


def _mode(node: Node) -> str:
    m = node.attr("mode", "nearest")
    return "linear" if m == "bilinear" else m


def _resize_matrix(node: Node, n_in: int, n_out: int, scale: float, roi: tuple[float, float] | None) -> np.ndarray:
    """The (n_out, n_in) matrix of one axis's resize weights (float64)."""
    mode = _mode(node)
    ctm = node.attr("coordinate_transformation_mode", "half_pixel") if node.opset >= 11 else "asymmetric"
    dst = np.arange(n_out, dtype=np.float64)
    src = _src_coord(node, ctm, dst, scale, n_in, n_out, roi)
    m = np.zeros((n_out, n_in))
    extrap = ctm == "tf_crop_and_resize"
    outside = (src < 0) | (src > n_in - 1) if extrap else np.zeros(n_out, bool)
    antialias = node.opset >= 18 and bool(node.attr("antialias", 0)) and scale < 1 and mode != "nearest"
    if mode == "nearest":
        nm = node.attr("nearest_mode", "round_prefer_floor") if node.opset >= 11 else "floor"
        if node.opset < 11:
            idx = np.floor(src)
        else:
            idx = _nearest(node, nm, src, scale)
        idx = np.clip(idx, 0, n_in - 1).astype(np.int64)
        m[np.arange(n_out), idx] = 1.0
    elif mode in ("linear", "cubic"):
        a = node.attr("cubic_coeff_a", -0.75)
        excl = bool(node.attr("exclude_outside", 0))
        if antialias:
            supp = (2.0 if mode == "cubic" else 1.0) / scale
            for o in range(n_out):
                c = src[o]
                lo, hi = int(np.floor(c - supp)), int(np.ceil(c + supp))
                js = np.arange(lo, hi + 1)
                d = (js - c) * scale
                if mode == "linear":
                    wts = np.maximum(0.0, 1 - np.abs(d))
                else:
                    ad = np.abs(d)
                    wts = np.where(ad <= 1, ((a + 2) * ad - (a + 3)) * ad * ad + 1,
                                   np.where(ad < 2, ((a * ad - 5 * a) * ad + 8 * a) * ad - 4 * a, 0.0))
                if excl:
                    wts = np.where((js >= 0) & (js < n_in), wts, 0.0)
                tot = wts.sum()
                wts = wts / tot if tot else wts
                for j, wt in zip(np.clip(js, 0, n_in - 1), wts, strict=True):
                    m[o, j] += wt
        elif mode == "linear":
            s = np.clip(src, 0, n_in - 1) if not extrap else src
            lo = np.floor(s).astype(np.int64)
            t = s - lo
            lo_c, hi_c = np.clip(lo, 0, n_in - 1), np.clip(lo + 1, 0, n_in - 1)
            np.add.at(m, (np.arange(n_out), lo_c), 1 - t)
            np.add.at(m, (np.arange(n_out), hi_c), t)
        else:
            lo = np.floor(src).astype(np.int64)
            t = src - lo
            wts = _cubic_coeffs(t, a)
            for k, off in enumerate((-1, 0, 1, 2)):
                j = lo + off
                inside = (j >= 0) & (j < n_in)
                wk = np.where(inside, wts[:, k], 0.0) if excl else wts[:, k]
                np.add.at(m, (np.arange(n_out), np.clip(j, 0, n_in - 1)), wk)
            if excl:
                m = m / m.sum(axis=1, keepdims=True)
    else:
        raise node.error(f"unsupported mode {mode!r}")
    if extrap:
        m[outside] = 0.0
    return m


def _resize(node: Node, x: Tensor, scales: list[float] | None, sizes: list[int] | None,
            roi: list[float] | None, axes: list[int] | None) -> Tensor:
    r = x.ndim
    axes = list(range(r)) if axes is None else [axis_of(node, a, r) for a in axes]
    if sizes is not None:
        if len(sizes) != len(axes):
            raise node.error(f"sizes {sizes} needs one entry per axis {axes}")
        policy = node.attr("keep_aspect_ratio_policy", "stretch") if node.opset >= 18 else "stretch"
        if policy != "stretch":
            sc = [s / x.shape[a] for s, a in zip(sizes, axes, strict=True)]
            f = min(sc) if policy == "not_larger" else max(sc)
            scales = [f] * len(axes)
            sizes = [int(f * x.shape[a] + 0.5) for a in axes]
        else:
            scales = [s / x.shape[a] for s, a in zip(sizes, axes, strict=True)]
    elif scales is not None:
        if len(scales) != len(axes):
            raise node.error(f"scales {scales} needs one entry per axis {axes}")
        sizes = [int(math.floor(x.shape[a] * s)) for a, s in zip(axes, scales, strict=True)]
    else:
        raise node.error("one of scales and sizes is required")
    out = x
    compute = dtypes.float64 if x.dtype == dtypes.float64 else dtypes.float32
    mode = _mode(node)
    for k, (a, n_out, sc) in enumerate(zip(axes, sizes, scales, strict=True)):
        n_in = x.shape[a]
        if n_in == n_out and sc == 1.0 and (roi is None or node.attr("coordinate_transformation_mode", "") !=
                                            "tf_crop_and_resize"):
            continue
        rr = (roi[k], roi[k + len(axes)]) if roi is not None and len(roi) == 2 * len(axes) else None
        m = _resize_matrix(node, n_in, n_out, sc, rr)
        if mode == "nearest" and (m.sum(axis=1) == 1).all() and ((m == 0) | (m == 1)).all():
            # an integer upscale (each source repeated) or a strided pick is movement only: no one-hot gather
            out = take_host(out, a, m.argmax(axis=1))
            continue
        w = Tensor(m.T.astype(np.float64 if compute == dtypes.float64 else np.float32), device=x.device)
        y = out.cast(compute).transpose(a, -1) if a != out.ndim - 1 else out.cast(compute)
        y = y @ w
        out = y.transpose(a, -1) if a != out.ndim - 1 else y
        if node.attr("coordinate_transformation_mode", "") == "tf_crop_and_resize":
            ev = node.attr("extrapolation_value", 0.0)
            outside = np.asarray(m.sum(axis=1) == 0)
            if outside.any():
                shp = [1] * out.ndim
                shp[a] = n_out
                out = Tensor(outside.reshape(shp), device=x.device).where(ev, out)
    return out if out.dtype == x.dtype else out.cast(x.dtype)


def _floats(node: Node, t: Tensor | None) -> list[float] | None:
    if t is None or t.numel() == 0:
        return None
    return [float(v) for v in host(t).reshape(-1)]


@onnx_op("Resize", since=10)
def resize(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    if node.opset < 11:
        return _resize(node, x, _floats(node, req(node, inputs, 1, "scales")), None, None, None)
    roi = _floats(node, opt(inputs, 1))
    scales = _floats(node, opt(inputs, 2))
    sz = opt(inputs, 3)
    sizes = const_ints(node, sz, "sizes") if sz is not None and sz.numel() else None
    axes = node.attr("axes", None) if node.opset >= 18 else None
    return _resize(node, x, None if sizes is not None else scales, sizes, roi, axes)


@onnx_op("Upsample")
def upsample_v1(node: Node, inputs: list) -> Tensor:
    x = req(node, inputs, 0)
    if node.opset < 7:
        scales = [1.0, 1.0, float(node.attr("height_scale")), float(node.attr("width_scale"))]
    else:
        scales = list(node.attr("scales"))
    return _resize(node, x, scales, None, None, None)


@onnx_op("Upsample", since=9)
def upsample(node: Node, inputs: list) -> Tensor:
    return _resize(node, req(node, inputs, 0), _floats(node, req(node, inputs, 1, "scales")), None, None, None)


__all__ = ["axis_of", "const_tensor", "host", "opt", "req", "scalar", "take", "take_t"]
