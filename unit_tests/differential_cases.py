"""The programs of the differential suite (a helper module for test_differential.py, not a test).

A `Case` builds Tensor outputs from deterministic inputs on a given device; `run_case` builds it on a backend,
computes every output with the reference interpreter (the tensor-level graph, evaluated whole), realizes the outputs
on that backend and compares them under the tolerance table (uopir.backends.tolerance; the op class of each output
is read off its graph). Outputs of one dtype are realized concatenated (see realize_all).
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uopir import Tensor
from uopir.backends.buffers import graph_buffers
from uopir.backends.differential import OutputCheck, check_outputs
from uopir.backends.python.interpreter import evaluate
from uopir.backends.python.magnitude import reorder_magnitudes
from uopir.backends.tolerance import op_class
from uopir.dialects.semantics import cast_array, np_dtype
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

FLOATS = ("float16", "bfloat16", "float32", "float64")
SINTS = ("int8", "int16", "int32", "int64")
UINTS = ("uint8", "uint16", "uint32", "uint64")
INTS = SINTS + UINTS
ALL = FLOATS + INTS + ("bool",)

FLOAT_EDGES = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, math.nan, math.inf, -math.inf, 127.5, -128.5,
               255.5, 256.0, -129.0, 65504.0, 70000.0, -70000.0, 2.0**31, -(2.0**31) - 1, 2.0**63, 1e10, -1e10,
               3e38, 1e-40, 6e-8, 1e300)
INT_EDGES = (0, 1, -1, 2, 127, -128, 255, 256, 32767, -32768, 65535, 2**31 - 1, -(2**31), 2**32 - 1, 2**53 + 1,
             2**63 - 1, -(2**63), 2**64 - 1, 100, -100)


def _dt(d: str | DType) -> DType:
    return d if isinstance(d, DType) else dtypes.from_name(d)


class Inputs:
    """Deterministic inputs on one device: the same case name gives the same data on every backend."""

    def __init__(self, name: str, device: str):
        self.device = device
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))

    def _make(self, arr: np.ndarray, d: DType) -> Tensor:
        return Tensor(arr, dtype=d, device=self.device)

    def f(self, *shape: int, dtype: str = "float32", scale: float = 1.0) -> Tensor:
        """Normal floats (rounded to the dtype)."""
        d = _dt(dtype)
        arr = cast_array(self.rng.standard_normal(shape) * scale, dtypes.float64, d)
        return self._make(np.ascontiguousarray(arr), d)

    def i(self, *shape: int, dtype: str = "int32", lo: int = -9, hi: int = 9) -> Tensor:
        """Small integers (unsigned from 0)."""
        d = _dt(dtype)
        lo = max(lo, 0) if d.kind == "uint" else lo
        return self._make(self.rng.integers(lo, hi + 1, size=shape).astype(np_dtype(d)), d)

    def b(self, *shape: int) -> Tensor:
        return self._make(self.rng.random(shape) < 0.5, dtypes.bool)

    def any(self, *shape: int, dtype: str) -> Tensor:
        d = _dt(dtype)
        if d is dtypes.bool:
            return self.b(*shape)
        return self.f(*shape, dtype=dtype, scale=2.0) if d.is_float else self.i(*shape, dtype=dtype)

    def edges(self, n: int, dtype: str) -> Tensor:
        """`n` values of the dtype: its edge cases first (NaN, infinities, signed zeros, halves, limits, values that
        overflow narrower types), then random ones."""
        d = _dt(dtype)
        if d is dtypes.bool:
            arr = np.resize(np.array([True, False, False, True, True]), n)
        elif d.is_float:
            vals = np.concatenate([np.array(FLOAT_EDGES, np.float64), self.rng.standard_normal(n) * 100])[:n]
            arr = cast_array(vals, dtypes.float64, d)
        else:
            lo, hi = int(d.min), int(d.max)
            span = hi - lo + 1
            wrapped = [((v - lo) % span) + lo for v in INT_EDGES]
            rand = self.rng.integers(-300, 300, n).tolist()
            arr = np.array([((v - lo) % span) + lo for v in (wrapped + rand)[:n]], dtype=np_dtype(d))
        return self._make(np.ascontiguousarray(arr), d)


Builder = Callable[[Inputs], dict[str, Tensor]]


@dataclass(frozen=True)
class Case:
    name: str
    build: Builder


def reference(outputs: dict[str, Tensor]) -> list[np.ndarray]:
    """Every output on the reference interpreter: the tensor-level graph evaluated whole."""
    root = UOp.sink(*(t.uop for t in outputs.values()))
    arrays = {i: b.numpy() for i, b in graph_buffers(root).items()}
    out = evaluate(root, arrays)
    return [np.asarray(x) for x in out]


def magnitudes(outputs: dict[str, Tensor]) -> list[np.ndarray] | None:
    """Every output's reorder magnitude (uopir.backends.python.magnitude): what reordering its float sums may move
    it by; None where the graph holds an op the magnitudes do not cover."""
    root = UOp.sink(*(t.uop for t in outputs.values()))
    return reorder_magnitudes(root, {i: b.numpy() for i, b in graph_buffers(root).items()})


def grouped(outputs: dict[str, Tensor]) -> list[tuple[list[int], Tensor]]:
    """The tensors that get realized: the outputs of one dtype flattened and concatenated (one schedule, usually one
    kernel, per dtype instead of one per output: a cold compile cache costs seconds, not minutes), with the
    positions of the outputs each holds."""
    groups: dict[DType, list[int]] = {}
    ts = list(outputs.values())
    for k, t in enumerate(ts):
        groups.setdefault(t.dtype, []).append(k)
    out = []
    for ks in groups.values():
        if len(ks) == 1:
            out.append((ks, ts[ks[0]]))
        else:
            flat = [ts[k].flatten() for k in ks]
            out.append((ks, flat[0].cat(*flat[1:])))
    return out


def realize_all(outputs: dict[str, Tensor]) -> list[np.ndarray]:
    """Every output realized on its device (through `grouped`), each cut back out to be compared on its own."""
    ts = list(outputs.values())
    got: list[np.ndarray | None] = [None] * len(ts)
    for ks, t in grouped(outputs):
        arr = np.asarray(t.numpy())
        if len(ks) == 1:
            got[ks[0]] = arr
            continue
        off = 0
        for k in ks:
            n = math.prod(ts[k].shape)
            got[k] = np.array(arr[off:off + n].reshape(ts[k].shape), copy=True)
            off += n
    return got  # type: ignore[return-value]


def run_case(case: Case, device: str) -> list[OutputCheck]:
    outputs = case.build(Inputs(case.name, device))
    if isinstance(outputs, Tensor):
        outputs = {"out": outputs}
    labels = list(outputs)
    dts = [t.dtype for t in outputs.values()]
    classes = [op_class(t.uop) for t in outputs.values()]
    want = reference(outputs)
    got = realize_all(outputs)
    return check_outputs(labels, got, want, dts, classes)


# ---- the programs --------------------------------------------------------------------------------------------------
CASES: list[Case] = []


def case(name: str) -> Callable[[Builder], Builder]:
    def reg(fn: Builder) -> Builder:
        if any(c.name == name for c in CASES):
            raise ValueError(f"duplicate case {name}")
        CASES.append(Case(name, fn))
        return fn
    return reg


def _float_unary(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.f(4, 6, dtype=dtype, scale=2.0).cat(m.edges(6, dtype).reshape(1, 6), dim=0)
        out = {
            "neg": -x, "abs": x.abs(), "exp": x.exp(), "exp2": x.exp2(), "log": x.log(), "log2": x.log2(),
            "sqrt": x.sqrt(), "rsqrt": x.rsqrt(), "sin": x.sin(), "cos": x.cos(), "relu": x.relu(),
            "sigmoid": x.sigmoid(), "tanh": x.tanh(), "gelu": x.gelu(), "silu": x.silu(), "trunc": x.trunc(),
            "floor": x.floor(), "ceil": x.ceil(), "round": x.round(), "reciprocal": x.reciprocal(),
            "square": x.square(), "sign": x.sign(), "softplus": x.softplus(), "erf": x.erf(),
            "isnan": x.isnan(), "isinf": x.isinf(), "isfinite": x.isfinite(),
        }
        return out
    return build




def _int_unary(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.edges(20, dtype).reshape(4, 5)
        out = {"neg": -x, "not": ~x, "double": x + x, "times3": x * 3, "square": x * x, "shl1": x << 1,
               "shr1": x >> 1, "max0": x.maximum(0), "min5": x.minimum(5), "abs": x.abs(), "eq0": x == 0,
               "lt0": x < 0, "div3": x // 3, "mod3": x % 3}
        return out
    return build




def _binary(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        d = _dt(dtype)
        a, b = m.any(3, 4, dtype=dtype), m.any(4, dtype=dtype)  # b broadcasts along the rows
        out = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
               "where": (a < b).where(a, b), "maximum": a.maximum(b), "minimum": a.minimum(b)}
        if d is dtypes.bool:
            out |= {"and": a & b, "or": a | b, "xor": a ^ b, "not": a.logical_not()}
            return out
        out |= {"add": a + b, "sub": a - b, "mul": a * b}
        if d.is_float:
            out |= {"div": a / b, "mod": a % b, "pow": a.abs().pow(b), "lerp": a.lerp(b, 0.25),
                    "clip": a.clip(-0.5, 0.75), "where_nan": (a > 0).where(a, math.nan)}
        else:
            nz = (b == 0).where(1, b)
            out |= {"floordiv": a // nz, "mod": a % nz, "and": a & b, "or": a | b, "xor": a ^ b,
                    "shl": a << (b & 3), "shr": a >> (b & 3)}
        return out
    return build


def _merged(*parts: tuple[str, Builder]) -> Builder:
    """One case from several builders (labels prefixed): fewer, larger kernels, so a cold compile cache costs less."""
    def build(m: Inputs) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        for prefix, b in parts:
            out |= {f"{prefix}{k}": v for k, v in b(m).items()}
        return out
    return build


# every float dtype: the unary and binary ops (one kernel per output dtype); the integer dtypes together
for _d in FLOATS:
    case(f"elementwise-{_d}")(_merged(("unary:", _float_unary(_d)), ("binary:", _binary(_d))))
case("elementwise-ints")(_merged(*((f"{d}:", _int_unary(d)) for d in INTS), *((f"{d}:", _binary(d)) for d in INTS)))
case("elementwise-bool")(_binary("bool"))


def _cast_to(dst: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        return {f"{src}->{dst}": m.edges(30, src).cast(dst) for src in ALL}
    return build


for _d in ALL:
    case(f"cast-to-{_d}")(_cast_to(_d))


@case("bitcast")
def _bitcast(m: Inputs) -> dict[str, Tensor]:
    f = m.edges(12, "float32")
    h = m.edges(12, "float16")
    return {"f32->i32": f.bitcast(dtypes.int32), "f32->u32": f.bitcast(dtypes.uint32),
            "f16->i16": h.bitcast(dtypes.int16), "i32->f32": m.edges(12, "int32").bitcast(dtypes.float32)}


def _movement(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.any(2, 3, 4, dtype=dtype)
        out = {
            "reshape": x.reshape(4, 6), "permute": x.permute(2, 0, 1), "transpose": x.transpose(0, 2),
            "expand": x[:, :1, :].expand(2, 5, 4), "pad": x.pad(((1, 0), (0, 2), (1, 1))),
            "shrink": x.shrink(((0, 1), (1, 3), (1, 4))), "flip0": x.flip(0), "flip2": x.flip(2),
            "flip02": x.flip(0, 2), "slice-step": x[:, ::2, ::-3], "index": x[1, :, 2],
            "cat": x.cat(x.flip(1), dim=1), "repeat": x.repeat(1, 2, 1), "stack": Tensor.stack(x, x.flip(2), dim=1),
            "pad-flip-permute": x.pad(((0, 1), (2, 0), (0, 0))).flip(1).permute(1, 2, 0).shrink(
                ((1, 4), (0, 4), (0, 3))),
            "tril": x.tril(), "triu": x.triu(1),
        }
        return out
    return build


for _d in ("float32", "float16", "int8", "bool", "uint64"):
    case(f"movement-{_d}")(_movement(_d))


@case("pad-value")
def _pad_value(m: Inputs) -> dict[str, Tensor]:
    x = m.f(3, 4)
    return {"pad-neg-inf": x.pad(((1, 1), (2, 0)), value=-math.inf), "pad-2": x.pad(((0, 2), (1, 1)), value=2.0),
            "pad-negative": x.pad(((-1, 1), (0, -2)))}


ALL_AXES = (0, 1, 2, (0, 1), (1, 2), (0, 2), None)
SOME_AXES = ((0, 2), None)


def _reductions(dtype: str, full: bool) -> Builder:
    """Every axis set of a 3-d tensor with keepdim, plus mean/var/std/logsumexp/argmax/argmin/cumsum (full); or
    sum/max/min/prod over two axis sets (the other dtypes: the reduce kernels are dtype-generic)."""
    axes = ALL_AXES if full else SOME_AXES

    def build(m: Inputs) -> dict[str, Tensor]:
        d = _dt(dtype)
        x = m.any(3, 4, 5, dtype=dtype)
        out: dict[str, Tensor] = {}
        for ax in axes:
            name = "all" if ax is None else "-".join(map(str, ax if isinstance(ax, tuple) else (ax,)))
            if d is dtypes.bool:
                out[f"any-{name}"] = x.any(ax)
                out[f"all-{name}"] = x.all(ax)
                continue
            out[f"sum-{name}"] = x.sum(ax)
            out[f"max-{name}"] = x.max(ax)
            out[f"min-{name}"] = x.min(ax)
            if ax in (1, (0, 2)):
                out[f"sum-{name}-keep"] = x.sum(ax, keepdim=True)
                out[f"max-{name}-keep"] = x.max(ax, keepdim=True)
                out[f"prod-{name}"] = x.prod(ax)
        if full and d.is_float:
            out |= {"mean-1": x.mean(1), "var-2": x.var(2), "std-0": x.std(0), "logsumexp-2": x.logsumexp(2)}
        if full and d is not dtypes.bool:
            out |= {"argmax-1": x.argmax(1), "argmin-2": x.argmin(2), "cumsum-2": x.cumsum(2)}
        return out
    return build


for _d in ("float32", "int32", "bool", "float16", "bfloat16", "float64", "int8", "uint8", "int64"):
    case(f"reduce-{_d}")(_reductions(_d, _d in ("float32", "int32", "bool")))


def _matmul(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        a, b = m.any(3, 5, dtype=dtype), m.any(5, 4, dtype=dtype)
        ba, bb = m.any(2, 3, 4, dtype=dtype), m.any(2, 4, 5, dtype=dtype)
        v = m.any(5, dtype=dtype)
        return {"mm": a @ b, "batched": ba @ bb, "vec-mat": v @ b, "mat-vec": a @ v, "a-bT": a @ a.transpose()}
    return build


for _d in ("float32", "float16", "bfloat16", "float64", "int32", "int8"):
    case(f"matmul-{_d}")(_matmul(_d))


def _conv(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.f(2, 4, 7, 7, dtype=dtype)
        w, bias = m.f(6, 4, 3, 3, dtype=dtype, scale=0.5), m.f(6, dtype=dtype)
        wg = m.f(6, 2, 3, 3, dtype=dtype, scale=0.5)
        return {"conv": x.conv2d(w, bias), "stride2-pad1": x.conv2d(w, stride=2, padding=1),
                "groups2": x.conv2d(wg, groups=2), "dilation2": x.conv2d(w, dilation=2, padding=(1, 2))}
    return build


for _d in ("float32", "float16"):
    case(f"conv2d-{_d}")(_conv(_d))


def _pool(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.any(2, 3, 6, 6, dtype=dtype)
        out = {"max2": x.max_pool2d(2), "max3-s2-p1": x.max_pool2d(3, stride=2, padding=1)}
        if _dt(dtype).is_float:
            out |= {"avg2": x.avg_pool2d(2), "avg3-s2-p1": x.avg_pool2d(3, stride=2, padding=1)}
        return out
    return build


for _d in ("float32", "float16", "int32"):
    case(f"pool-{_d}")(_pool(_d))


def _softmax(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.f(3, 5, dtype=dtype, scale=3.0)
        return {"softmax": x.softmax(), "softmax-0": x.softmax(0), "log_softmax": x.log_softmax(),
                "log_softmax-0": x.log_softmax(0)}
    return build


for _d in ("float32", "float16", "bfloat16"):
    case(f"softmax-{_d}")(_softmax(_d))


def _attention(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        q, k, v = (m.f(2, 2, 4, 8, dtype=dtype) for _ in range(3))
        mask = m.b(4, 4) | Tensor.eye(4, dtype=dtypes.bool, device=m.device)
        return {"sdpa": q.scaled_dot_product_attention(k, v),
                "causal": q.scaled_dot_product_attention(k, v, is_causal=True),
                "masked": q.scaled_dot_product_attention(k, v, attn_mask=mask)}
    return build


for _d in ("float32", "float16"):
    case(f"attention-{_d}")(_attention(_d))


def _mlp(dtype: str) -> Builder:
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.f(4, 8, dtype=dtype)
        w1, b1 = m.f(16, 8, dtype=dtype, scale=0.35), m.f(16, dtype=dtype, scale=0.1)
        w2, b2 = m.f(4, 16, dtype=dtype, scale=0.25), m.f(4, dtype=dtype, scale=0.1)
        h = x.linear(w1.transpose(), b1).relu()
        logits = h.linear(w2.transpose(), b2)
        return {"logits": logits, "log_probs": logits.log_softmax(), "hidden-gelu": x.linear(w1.transpose()).gelu(),
                "layernorm": h.layernorm()}
    return build


for _d in ("float32", "float16"):
    case(f"mlp-{_d}")(_mlp(_d))


@case("cnn-float32")
def _cnn(m: Inputs) -> dict[str, Tensor]:
    x = m.f(2, 1, 8, 8)
    w1, b1 = m.f(4, 1, 3, 3, scale=0.5), m.f(4, scale=0.1)
    w2, b2 = m.f(6, 4, 3, 3, scale=0.3), m.f(6, scale=0.1)
    wl = m.f(6, 5, scale=0.4)
    h = x.conv2d(w1, b1, padding=1).relu().max_pool2d(2)
    h = h.conv2d(w2, b2).relu().avg_pool2d(2)
    logits = h.flatten(1) @ wl
    return {"features": h, "probs": logits.softmax()}


@case("mlp-backward-float32")
def _mlp_backward(m: Inputs) -> dict[str, Tensor]:
    """One training step's gradients: an MLP with a cross-entropy loss, differentiated by autograd."""
    x, labels = m.f(4, 8), m.i(4, dtype="int32", lo=0, hi=3)
    w1, b1 = m.f(8, 16, scale=0.35), m.f(16, scale=0.1)
    w2, b2 = m.f(16, 4, scale=0.25), m.f(4, scale=0.1)
    loss = x.linear(w1, b1).relu().linear(w2, b2).sparse_categorical_crossentropy(labels)
    gw1, gb1, gw2, gb2 = loss.gradient(w1, b1, w2, b2)
    return {"loss": loss, "grad-w1": gw1, "grad-b1": gb1, "grad-w2": gw2, "grad-b2": gb2}


@case("int-bool-programs")
def _int_bool(m: Inputs) -> dict[str, Tensor]:
    labels = m.i(6, dtype="int32", lo=0, hi=4)
    x = m.i(6, 5, dtype="int16")
    flags = m.b(6, 5)
    idx = m.i(6, 2, dtype="int64", lo=0, hi=4)
    return {"one_hot": labels.one_hot(5), "gather": x.gather(1, idx), "masked_fill": x.masked_fill(flags, -1),
            "count-true": flags.sum(1), "where-int": flags.where(x, x * -2), "xor-reduce": (flags ^ (x > 0)).any(0),
            "int8-wrap-sum": x.cast(dtypes.int8).sum(0), "uint8-wrap-mul": (x.cast(dtypes.uint8) * 37).max(1)}


@case("pad-and-flip-nn")
def _pad_flip(m: Inputs) -> dict[str, Tensor]:
    x = m.f(2, 3, 5, 5)
    return {"reflect-like": x.flip(3).pad(((0, 0), (0, 0), (1, 1), (2, 2))).sum(1),
            "conv-of-flipped": x.flip(2, 3).conv2d(m.f(2, 3, 2, 2), padding=1)}


def _shape_nn(dtype: str) -> Builder:
    """einsum, conv_transpose2d, interpolate and the pad modes (decompositions of issue 12)."""
    def build(m: Inputs) -> dict[str, Tensor]:
        a, b, c = m.f(2, 3, 4, dtype=dtype), m.f(2, 4, 5, dtype=dtype), m.f(3, 3, dtype=dtype)
        x, w = m.f(1, 4, 4, 3, dtype=dtype), m.f(4, 3, 3, 2, dtype=dtype, scale=0.5)
        img = m.f(1, 2, 5, 4, dtype=dtype)
        return {"einsum-bmm": Tensor.einsum("bij,bjk->bik", a, b), "einsum-trace": Tensor.einsum("ii->", c),
                "einsum-ellipsis": Tensor.einsum("...j,...j->...", a, a),
                "conv_t-s2-p1-op1-g2": x.conv_transpose2d(w, stride=2, padding=1, output_padding=1, groups=2),
                "conv_t-dil2": x.conv_transpose2d(w, dilation=2),
                "bilinear": img.interpolate((7, 3), mode="bilinear"),
                "bilinear-aligned": img.interpolate((3, 6), mode="bilinear", align_corners=True),
                "nearest-exact": img.interpolate((8, 3), mode="nearest-exact"),
                "pad-reflect": img.pad((2, 1, 1, 3), mode="reflect"), "pad-circular": img.pad((1, 2), mode="circular")}
    return build


case("shape-nn-ops-float32")(_shape_nn("float32"))  # one dtype: these lower to the kernels the conv, pool and
# gather cases already run in the others


def _math_ops(dtype: str) -> Builder:
    """The math_ops decompositions (range reductions, series branches, sign bits) over normals and edge values."""
    def build(m: Inputs) -> dict[str, Tensor]:
        x = m.f(4, 6, dtype=dtype, scale=2.0).cat(m.edges(6, dtype).reshape(1, 6), dim=0)
        u = x.clip(-1, 1)
        y = m.f(6, dtype=dtype, scale=3.0)
        return {"asin": u.asin(), "acos": u.acos(), "atan": x.atan(), "sinh": x.sinh(), "cosh": x.cosh(),
                "asinh": x.asinh(), "acosh": (x.abs() + 1).acosh(), "atanh": (u * 0.99).atanh(), "log10": x.log10(),
                "logaddexp": x.logaddexp(y), "copysign": x.copysign(y), "fmod": x.fmod(y), "isclose": x.isclose(y),
                "selu": x.selu(), "logsigmoid": x.logsigmoid(), "softsign": x.softsign(), "softmin": x.softmin()}
    return build


for _d in ("float32", "float16"):
    case(f"math-ops-{_d}")(_math_ops(_d))


@case("sort-scatter-programs")
def _selection(m: Inputs) -> dict[str, Tensor]:
    x = m.f(3, 7)
    ties = m.i(3, 7, dtype="int32", lo=-2, hi=2)
    idx = m.i(2, 7, dtype="int32", lo=0, hi=2)
    cm, ci = x.cummax(1)
    sv, si = ties.sort(1, descending=True)
    return {"sort-values": x.sort(1)[0], "sort-indices": x.sort(0)[1], "sort-ties": sv, "sort-ties-indices": si,
            "topk": x.topk(3)[0], "cummax": cm, "cummax-index": ci, "cummin-index": ties.cummin(1)[1],
            "logcumsumexp": x.logcumsumexp(1), "scatter": x.scatter(0, idx, m.f(2, 7)),
            "scatter-amax": x.scatter_reduce(0, idx, m.f(2, 7), "amax", include_self=False),
            "scatter-mean-int": ties.scatter_reduce(0, idx, ties[:2], "mean"),
            "masked-select": x.masked_select(x > 0, size=8, fill_value=-1),
            "nonzero": (ties > 0).nonzero(size=6)}


CASE_NAMES = [c.name for c in CASES]


def device_programs(target: str, cases: list[Case] | None = None) -> list[tuple[str, UOp]]:
    """(case name, program) for every distinct linearized device.program the suite's cases lower to with
    `default{target=TARGET}`: what a compile-only check renders and compiles where a backend cannot run (CUDA
    without a GPU: every kernel to PTX)."""
    from uopir.dialects import device as D
    from uopir.ir.regions import regions_of
    from uopir.passes.manager import PassManager

    pm = PassManager.parse(f"default{{target={target}}}")
    seen: set[UOp] = set()
    out: list[tuple[str, UOp]] = []
    for c in CASES if cases is None else cases:
        outputs = c.build(Inputs(c.name, "python"))
        lowered = pm.run(UOp.sink(*(t.uop for _, t in grouped(outputs))))
        for u in lowered.toposort():
            for r in regions_of(u):
                if r.op is D.PROGRAM and r not in seen:
                    seen.add(r)
                    out.append((c.name, r))
    return out
