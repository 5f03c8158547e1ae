"""Single ONNX operators (or tiny subgraphs) at the float32 shapes of real models outside the suite (U-Nets, detection
heads, BERT/GPT-style, audio), uopir beside onnxruntime in the same process.

Each case is one ONNX model built with onnx.helper (weights as initializers): uopir runs it through
`from_onnx(..., jit=True)` on each device (steady state, warm), onnxruntime (its own thread count) the same model.
The timed calls interleave the impls over `--rounds` rounds, each the best of `--inner` calls after a settle pause
and an untimed call (another impl's worker threads may still spin), and the best over rounds is kept. Prints, per
case and impl, the best call and the ratio to onnxruntime's best (> 1: uopir slower), then the cases sorted by
their best uopir ratio, nothing asserted:
    onnx_ops op=<case> impl=<impl> us=<best call> ratio=<us / ort us> max_rel_err=<vs ort>
Run: python3 bench/onnx_ops.py [--devices llvm,c] [--rounds N] [--inner N] [--only resize_nearest,topk,...]
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _timing import best  # noqa: E402  (bench/ is the script's folder; it also times c's own binary, not its LLVM tier)

SETTLE_S = 0.05
OPSET = 17

Case = tuple[object, dict[str, np.ndarray]]  # (onnx.ModelProto, feeds)


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _model(nodes: list, inputs: dict[str, np.ndarray], outputs: list[str], inits: dict[str, np.ndarray]) -> Case:
    """A model of `nodes` whose graph inputs are `inputs` (fed by value) and `inits` initializers; the outputs' types
    and shapes are left for onnx's shape inference to fill in."""
    from onnx import helper, numpy_helper, shape_inference
    elem = {np.dtype(np.float32): 1, np.dtype(np.int64): 7, np.dtype(np.bool_): 9}
    ins = [helper.make_tensor_value_info(k, elem[v.dtype], list(v.shape)) for k, v in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    g = helper.make_graph(nodes, "op", ins, outs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m = shape_inference.infer_shapes(m, strict_mode=True)
    inferred = {v.name: v for v in m.graph.value_info}
    for o in m.graph.output:  # copy the inferred type onto each output (onnxruntime wants it declared)
        if o.name in inferred:
            o.type.CopyFrom(inferred[o.name].type)
    return m, inputs


def _x(*shape: int) -> np.ndarray:
    return _rng().standard_normal(shape, dtype=np.float32)


def _unary(op: str, shape: tuple[int, ...], inits: dict[str, np.ndarray] | None = None, extra: tuple = (),
           outs: tuple[str, ...] = ("y",), **attrs: object) -> Callable[[], Case]:
    """One node `op(x, *extra)`: x a graph input of `shape`, `extra` the names of initializers in `inits`."""
    def build() -> Case:
        from onnx import helper
        return _model([helper.make_node(op, ["x", *extra], list(outs), **attrs)], {"x": _x(*shape)}, list(outs),
                      inits or {})
    return build


def _convt(cin: int, cout: int, hw: int, k: int, pad: int) -> Callable[[], Case]:
    w = (_x(cin, cout, k, k) / np.sqrt(cin * k * k)).astype(np.float32)
    return _unary("ConvTranspose", (1, cin, hw, hw), {"w": w, "b": _x(cout)}, ("w", "b"), kernel_shape=[k, k],
                  strides=[2, 2], pads=[pad] * 4)


def _resize(mode: str) -> Callable[[], Case]:
    scales = np.array([1, 1, 2, 2], np.float32)
    return _unary("Resize", (1, 64, 56, 56), {"scales": scales}, ("", "scales"), mode=mode)


def _nodes(nodes: Callable[[], list], inputs: Callable[[], dict[str, np.ndarray]], inits: dict[str, np.ndarray],
           outputs: tuple[str, ...] = ("y",)) -> Callable[[], Case]:
    return lambda: _model(nodes(), inputs(), list(outputs), inits)


def _h(op: str, ins: list[str], outs: list[str], **attrs: object) -> object:
    from onnx import helper
    return helper.make_node(op, ins, outs, **attrs)


def _i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def _groupnorm() -> Case:
    """GroupNorm as torch exports it before opset 18: reshape to (N, G, -1), InstanceNormalization-free mean/var by
    ReduceMean, normalize, reshape back, per-channel scale and bias."""
    nodes = [_h("Reshape", ["x", "gshape"], ["g"]),
             _h("ReduceMean", ["g"], ["m"], axes=[2]), _h("Sub", ["g", "m"], ["d"]), _h("Mul", ["d", "d"], ["d2"]),
             _h("ReduceMean", ["d2"], ["v"], axes=[2]), _h("Add", ["v", "eps"], ["ve"]), _h("Sqrt", ["ve"], ["s"]),
             _h("Div", ["d", "s"], ["n"]), _h("Reshape", ["n", "xshape"], ["r"]), _h("Mul", ["r", "gamma"], ["rg"]),
             _h("Add", ["rg", "beta"], ["y"])]
    inits = {"gshape": _i64(1, 32, -1), "xshape": _i64(1, 64, 56, 56), "eps": np.array(1e-5, np.float32),
             "gamma": _x(64, 1, 1), "beta": _x(64, 1, 1)}
    return _model(nodes, {"x": _x(1, 64, 56, 56)}, ["y"], inits)


def _gelu() -> Case:
    nodes = [_h("Div", ["x", "sqrt2"], ["a"]), _h("Erf", ["a"], ["e"]), _h("Add", ["e", "one"], ["p"]),
             _h("Mul", ["x", "p"], ["q"]), _h("Mul", ["q", "half"], ["y"])]
    inits = {"sqrt2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32),
             "half": np.array(0.5, np.float32)}
    return _model(nodes, {"x": _x(1, 128, 3072)}, ["y"], inits)


def _where() -> Case:
    """An attention mask: a causal 1x1x128x128 bool mask broadcast over 12 heads' scores."""
    mask = np.tril(np.ones((128, 128), np.bool_))[None, None]
    return _model([_h("Where", ["mask", "x", "neg"], ["y"])], {"x": _x(1, 12, 128, 128)}, ["y"],
                  {"mask": mask, "neg": np.array(-1e9, np.float32)})


def _batchnorm() -> Case:
    c = 64
    inits = {"s": _x(c), "b": _x(c), "m": _x(c), "v": (np.abs(_x(c)) + 0.5).astype(np.float32)}
    return _model([_h("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], {"x": _x(1, c, 112, 112)}, ["y"],
                  inits)


CASES: dict[str, Callable[[], Case]] = {
    "convT_2x2s2_128x32": _convt(128, 64, 32, 2, 0),          # U-Net decoder upsampling
    "convT_4x4s2_256x16": _convt(256, 128, 16, 4, 1),         # DCGAN generator
    "conv1d_k3_audio": _unary("Conv", (1, 80, 1500), {"w": (_x(384, 80, 3) / 16).astype(np.float32), "b": _x(384)},
                              ("w", "b"), pads=[1, 1]),  # a speech encoder's first conv over mel frames
    "conv_dilated3x3": _unary("Conv", (1, 64, 56, 56), {"w": (_x(64, 64, 3, 3) / 24).astype(np.float32)}, ("w",),
                              pads=[2] * 4, dilations=[2, 2]),  # DeepLab's atrous conv
    "resize_nearest": _resize("nearest"),
    "resize_linear": _resize("linear"),
    "maxpool_3x3s2": _unary("MaxPool", (1, 64, 112, 112), kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
    "avgpool_2x2s2": _unary("AveragePool", (1, 128, 56, 56), kernel_shape=[2, 2], strides=[2, 2]),
    "global_avgpool": _unary("GlobalAveragePool", (1, 256, 28, 28)),
    "concat_ch": _nodes(lambda: [_h("Concat", ["x", "z"], ["y"], axis=1)],
                        lambda: {"x": _x(1, 64, 56, 56), "z": _x(1, 64, 56, 56)}, {}),
    "split_ch": _nodes(lambda: [_h("Split", ["x"], ["y", "z"], axis=1, num_outputs=2)] if OPSET >= 18 else
                       [_h("Split", ["x", "sp"], ["y", "z"], axis=1)], lambda: {"x": _x(1, 128, 56, 56)},
                       {"sp": _i64(64, 64)}, ("y", "z")),
    "slice": _unary("Slice", (1, 128, 56, 56), {"st": _i64(32, 1, 1), "en": _i64(96, 55, 55), "ax": _i64(1, 2, 3)},
                    ("st", "en", "ax")),
    "transpose_0213": _unary("Transpose", (1, 12, 128, 64), perm=[0, 2, 1, 3]),
    "transpose_nhwc": _unary("Transpose", (1, 64, 56, 56), perm=[0, 2, 3, 1]),
    "matmul_batched": _nodes(lambda: [_h("MatMul", ["x", "z"], ["y"])],
                             lambda: {"x": _x(12, 128, 64), "z": _x(12, 64, 128)}, {}),
    "matmul_qkT": _nodes(lambda: [_h("Transpose", ["z"], ["zt"], perm=[0, 1, 3, 2]), _h("MatMul", ["x", "zt"], ["y"])],
                         lambda: {"x": _x(1, 12, 128, 64), "z": _x(1, 12, 128, 64)}, {}),  # attention's q @ k^T
    "einsum_qk": _nodes(lambda: [_h("Einsum", ["x", "z"], ["y"], equation="bhqd,bhkd->bhqk")],
                        lambda: {"x": _x(1, 12, 128, 64), "z": _x(1, 12, 128, 64)}, {}),
    "matmul_qkT_vit": _nodes(lambda: [_h("Transpose", ["z"], ["zt"], perm=[0, 1, 3, 2]),
                                      _h("MatMul", ["x", "zt"], ["y"])],
                             lambda: {"x": _x(1, 6, 197, 64), "z": _x(1, 6, 197, 64)}, {}),  # ViT: 197 tokens
    "matmul_qkT_50": _nodes(lambda: [_h("Transpose", ["z"], ["zt"], perm=[0, 1, 3, 2]),
                                     _h("MatMul", ["x", "zt"], ["y"])],
                            lambda: {"x": _x(1, 12, 50, 64), "z": _x(1, 12, 50, 64)}, {}),
    "matmul_pv_vit": _nodes(lambda: [_h("MatMul", ["x", "z"], ["y"])],
                            lambda: {"x": _x(1, 6, 197, 197), "z": _x(1, 6, 197, 64)}, {}),  # ViT: scores @ v
    "gemm_bias": _unary("Gemm", (128, 768), {"w": (_x(3072, 768) / 28).astype(np.float32), "b": _x(3072)},
                        ("w", "b"), transB=1),
    "layernorm": _unary("LayerNormalization", (1, 128, 768), {"g": _x(768), "b": _x(768)}, ("g", "b"), axis=-1),
    "instancenorm": _unary("InstanceNormalization", (1, 64, 56, 56), {"g": _x(64), "b": _x(64)}, ("g", "b")),
    "groupnorm_sub": _groupnorm,
    "gelu_erf": _gelu,
    "where_mask": _where,
    "expand": _unary("Expand", (1, 64, 1, 1), {"sh": _i64(1, 64, 56, 56)}, ("sh",)),
    "tile": _unary("Tile", (1, 64, 28, 28), {"rep": _i64(1, 1, 2, 2)}, ("rep",)),
    "reducemean_last": _unary("ReduceMean", (1, 128, 768), axes=[-1]),
    "reducesum_spatial": _unary("ReduceSum", (1, 256, 28, 28), {"ax": _i64(2, 3)}, ("ax",)),
    "argmax": _unary("ArgMax", (64, 1000), axis=-1),
    "topk": _unary("TopK", (64, 1000), {"k": _i64(5)}, ("k",), ("y", "i")),
    "topk_det": _unary("TopK", (1, 8400), {"k": _i64(100)}, ("k",), ("y", "i")),  # a detector's best 100 boxes
    "cumsum": _unary("CumSum", (64, 1024), {"ax": np.array(1, np.int64)}, ("ax",)),
    "pad_reflect": _unary("Pad", (1, 64, 64, 64), {"p": _i64(0, 0, 3, 3, 0, 0, 3, 3)}, ("p",), mode="reflect"),
    "pad_edge": _unary("Pad", (1, 64, 64, 64), {"p": _i64(0, 0, 1, 1, 0, 0, 1, 1)}, ("p",), mode="edge"),
    "depth_to_space": _unary("DepthToSpace", (1, 256, 28, 28), blocksize=2),
    "softmax_ch": _unary("Softmax", (1, 64, 56, 56), axis=1),
    "clip": _unary("Clip", (1, 64, 112, 112), {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)},
                   ("lo", "hi")),
    "leakyrelu": _unary("LeakyRelu", (1, 64, 112, 112), alpha=0.1),
    "prelu": _unary("PRelu", (1, 64, 112, 112), {"sl": (_x(64, 1, 1) * 0.1).astype(np.float32)}, ("sl",)),
    "batchnorm": _batchnorm,
}


def uopir_call(m: object, feeds: dict[str, np.ndarray], device: str) -> Callable[[], list[np.ndarray]]:
    from uopir.onnx import from_onnx
    model = from_onnx(m, device=device, jit=True)
    names = [o.name for o in m.graph.output]

    def call() -> list[np.ndarray]:
        out = model.run(feeds)
        return [out[n] for n in names]
    return call


def ort_call(m: object, feeds: dict[str, np.ndarray]) -> Callable[[], list[np.ndarray]]:
    import onnxruntime as ort
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


def rel_err(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    err = 0.0
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g.shape != w.shape:
            return float("inf")
        err = max(err, float(np.abs(g - w).max() / (np.abs(w).max() or 1)))
    return err


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="llvm,c")
    ap.add_argument("--rounds", type=_positive, default=3)
    ap.add_argument("--inner", type=_positive, default=10)
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or list(CASES)
    bad = [n for n in names if n not in CASES]
    if bad:
        ap.error(f"unknown case(s) {', '.join(bad)}; known: {', '.join(CASES)}")
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as e:
        ap.error(f"needs onnx and onnxruntime (the project's test extra): {e}")
    from uopir.backends import available
    devices = [d for d in a.devices.split(",") if d]
    if not devices or any(d not in available() for d in devices):
        ap.error(f"--devices {a.devices!r}: each must be one of the available devices {', '.join(available())}")
    summary: list[tuple[float, str, str]] = []
    for name in names:
        m, feeds = CASES[name]()
        impls = {"ort": ort_call(m, feeds)}
        for d in devices:
            impls[d] = uopir_call(m, feeds, d)
        want = impls["ort"]()
        errs = {k: rel_err(f(), want) for k, f in impls.items()}
        times = dict.fromkeys(impls, float("inf"))
        for _ in range(a.rounds):
            for k, f in impls.items():
                times[k] = min(times[k], best(f, a.inner, settle=SETTLE_S))
        for k, t in times.items():
            print(f"onnx_ops op={name} impl={k} us={t * 1e6:.1f} ratio={t / times['ort']:.2f} "
                  f"max_rel_err={errs[k]:.1e}", flush=True)
        dev = min((k for k in impls if k != "ort"), key=times.__getitem__)
        summary.append((times[dev] / times["ort"], name, dev))
    print("onnx_ops worst first (best uopir device / ort):")
    for r, name, dev in sorted(summary, reverse=True):
        print(f"  {name:22s} {r:6.2f}x ({dev})")
    print(f"onnx_ops loadavg={' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
