"""The real models of issue 26 (uopir/onnx/testmodels_cnn.py: ResNet-18, MobileNetV3-small, EfficientNet-B0,
SqueezeNet 1.1, batch 1, 224x224; uopir/onnx/testmodels_transformer.py: a ViT of 6 layers, width 384, 224x224, and
a TransformerEncoder of 4 layers, d 256, 64 tokens; random weights) through uopir beside onnxruntime, and where
uopir's time goes.

Timing (default): for each model and uopir device, one fresh subprocess with an empty compile cache measures
    first  = from_onnx(..., jit=True) + the first call, output realized into numpy (lowering, compiles, run)
    settle = on c, the wait for the C binaries compiled in the background meanwhile (tier 0, LLVM in process, ran
             the first calls) and one call that finds them all
    steady = the best of --repeat later calls (the captured plan replayed in one native call)
beside onnxruntime's best steady run in the same process (its own thread count), as
    real_models model=<m> device=<d> first=<s> settle=<s> steady=<ms> ort_steady=<ms> ratio=<steady/ort>
        max_abs_diff=<d>
        rel_diff=<d>
rel_diff = max |uopir - ort| / max |ort| of the logits (must be ~1e-6; the test tolerance is 1e-4).

--profile: one warm-up call, then --repeat calls under UOPIR_DEBUG=2 (each kernel launched and timed alone, the
native replay off), the best time per kernel; prints the --top kernels by time with their kind, and the share of
the model's kernel time per kind. A kernel's kind comes from the ONNX node it computes: the Conv (or pool) with
the kernel's output shape whose work per output (2 * Cin/group * k * k flop) matches the kernel's estimated flop:
    conv kxk[/s2] (dense), depthwise kxk[/s2] (group == C), pointwise 1x1[/s2], fire: concat(1x1, 3x3) (SqueezeNet's
    two expand convs and their Concat in one kernel), maxpool, global-pool / gemm / SE (a reduce to a vector),
    elementwise (E_ kernels: pads, activations, adds; "im2col copy" for a 4-d one, the taps of a strided
    depthwise conv), unmatched; with a suffix when the kernel holds more than the node: "->pad" (written into the
    next conv's zero-padded input), "+maxpool xN" (the following max pool fused, the conv recomputed N times per
    pooled output), "+GAP" (the global average pool fused); a transformer's kernels: linear (a MatMul by a weight or
    a Gemm), attention QK^T / AV, softmax, layernorm (a reduce of that node's shape and a few flop per output),
    patch conv, elementwise (E_ kernels: GELU, residual adds, copies)

    python3 bench/real_models.py [--devices c,llvm] [--models resnet18,...] [--repeat N] [--size 224]
        [--profile [--top 12]]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

MODELS = ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "vit", "transformer_encoder")

CHILD = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
from uopir.onnx import from_onnx
from uopir.onnx.testmodels_cnn import MODELS
from uopir.onnx.testmodels_transformer import MODELS as TX
name, device, repeat, size, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
m, feeds = TX[name]() if name == "transformer_encoder" else {**MODELS, **TX}[name](size=size)
out = m.graph.output[0].name
t = time.perf_counter()
model = from_onnx(m, device=device, jit=True)
got = model.run(feeds)[out]
first = time.perf_counter() - t
settle = 0.0
if device == "c" and not profile:  # the C binaries compile in the background (tier 0 runs meanwhile): wait for them
    from uopir.backends.c.compiler import wait_background
    t = time.perf_counter()
    wait_background()
    model.run(feeds)  # the replay that finds every binary built (the native graph is made then)
    settle = time.perf_counter() - t
steady = []
for i in range(repeat):
    if profile:
        print(f"=== call {i}", file=sys.stderr, flush=True)  # beside the UOPIR_DEBUG=2 lines (stderr)
    t = time.perf_counter()
    model.run(feeds)
    steady.append(time.perf_counter() - t)
sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
want = sess.run(None, feeds)[0]
ort_steady = []
for _ in range(max(repeat, 20)):
    t = time.perf_counter()
    sess.run(None, feeds)
    ort_steady.append(time.perf_counter() - t)
print("RESULT " + json.dumps({"first": first, "settle": settle, "steady": min(steady), "ort_steady": min(ort_steady),
                              "max_abs_diff": float(np.abs(got - want).max()),
                              "rel_diff": float(np.abs(got - want).max() / np.abs(want).max())}), flush=True)
"""

KERNEL = re.compile(r"^\*\*\* \S+\s+\d+ (\S+)\s+arg\s+(\d+)\s+tm\s+([\d.]+)us.*\((\d+) flop, (\d+) B\)")


def child(model: str, device: str, repeat: int, size: int, profile: bool) -> tuple[dict, str]:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
        env = {**os.environ, "UOPIR_CACHE_DIR": cache, "UOPIR_C_TIERED": "0"}
        if profile:
            env["UOPIR_DEBUG"] = "2"
        args = [model, device, str(repeat), str(size), "1" if profile else "0"]
        p = subprocess.run([sys.executable, "-c", CHILD, *args],
                           capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode:
        raise RuntimeError(f"{model} on {device} failed:\n{p.stderr[-2000:]}")
    res = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("RESULT "))
    return json.loads(res[7:]), p.stderr  # the UOPIR_DEBUG=2 lines --profile reads are on stderr


def node_table(model: str, size: int) -> list[tuple[tuple[int, ...], str, float]]:
    """(output shape without batch, kind, flop per output) of every Conv, Concat of Convs and MaxPool."""
    import onnx
    from onnx import numpy_helper

    from uopir.onnx.testmodels_cnn import MODELS
    m = onnx.shape_inference.infer_shapes(MODELS[model](size=size)[0])
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)[1:]
              for v in [*m.graph.value_info, *m.graph.output]}
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    made: dict[str, tuple[str, float]] = {}  # a conv's output (or its Relu's) -> (kind, flop per output)
    out = []
    for n in m.graph.node:
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        shape = shapes.get(n.output[0], ())
        if n.op_type == "Conv":
            w = inits[n.input[1]]
            k, s, g = w.shape[2], a.get("strides", [1])[0], a.get("group", 1)
            kind = (f"depthwise {k}x{k}" if g > 1 and w.shape[1] == 1 else "pointwise 1x1" if k == 1
                    else f"conv {k}x{k}") + ("/s2" if s == 2 else "")
            if all(d == 1 for d in shape[1:]):
                kind = "SE conv (1x1 spatial)"
            made[n.output[0]] = (kind, 2 * w.shape[1] * k * k)
            out.append((shape, kind, 2 * w.shape[1] * k * k))
        elif n.op_type == "Relu" and n.input[0] in made:
            made[n.output[0]] = made[n.input[0]]
        elif n.op_type == "Concat" and all(i in made for i in n.input):
            f = sum(made[i][1] for i in n.input) / len(n.input)
            out.append((shape, "fire: concat(1x1, 3x3)", f))
        elif n.op_type == "MaxPool":
            out.append((shape, "maxpool", 0))
    return out


def classify(name: str, flop: int, table: list) -> str:
    """The kind of a kernel from its name (E_/r_ and output shape) and estimated flop: the node that computes it,
    its output written into the next conv's zero-padded input ("->pad"), a max pool or global pool fused into it
    ("+maxpool xN": the conv recomputed N times per pooled output; "+GAP")."""
    head = re.match(r"^[A-Za-z]+((?:_\d+)*)", name)
    dims = tuple(int(d) for d in head[1].split("_")[1:]) if head else ()
    if name.startswith("E_"):
        return "elementwise" + (" (im2col copy)" if len(dims) == 4 else "")
    if not dims:
        return "other"
    per = flop / _prod(dims)
    pooled = any(kind == "maxpool" and shape == dims for shape, kind, _ in table)
    best: tuple[float, str] | None = None
    for shape, kind, f in table:
        if len(shape) != 3 or shape[0] != dims[0]:
            continue
        if kind == "maxpool":
            if shape[1:] == dims[1:] and per < 100:
                return kind
            continue
        ratio = per / f
        hw = shape[1] * shape[2]
        if len(dims) == 1:  # a reduce to C: the conv and the global pool after it
            cands = [(ratio / hw, " +GAP", 0.0)]
        elif dims[1:] == shape[1:]:
            cands = [(ratio, "", 0.0)]
        elif dims[1] > shape[1] and dims[1] - shape[1] == dims[2] - shape[2] <= 6:
            cands = [(ratio, f" ->pad ({_prod(dims[1:]) / hw:.2f}x the outputs)", 0.0)]  # the border is computed too
        elif pooled and dims[1] < shape[1] and 1.5 < ratio < 30:
            # any recompute factor fits: behind any conv whose output has this shape and this work per output
            cands = [(1.0, f" +maxpool (x{ratio:.1f} recompute)", 1.0)]
        else:
            continue
        for r, tag, penalty in cands:
            if 0.7 <= r <= 2.0:
                err = abs(np.log(r)) + penalty
                if best is None or err < best[0]:
                    best = (err, kind + tag)
    if best:
        return best[1]
    return "global-pool / gemm / SE" if len(dims) == 1 else f"unmatched ({per:.0f} flop per output)"


TRANSFORMERS = ("vit", "transformer_encoder")


def tx_table(model: str) -> list[tuple[tuple[int, ...], str, float]]:
    """(output shape without 1-dims, kind, flop per output) of a transformer's Conv, MatMul, Gemm, Softmax and
    LayerNormalization nodes: a MatMul by an initializer or a Gemm is a linear layer, one of two activations is
    attention (QK^T when its output is square, else the weighted sum of V)."""
    import onnx
    from onnx import numpy_helper

    from uopir.onnx.testmodels_transformer import MODELS as TX
    m = onnx.shape_inference.infer_shapes(TX[model]()[0])
    shapes = {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim if d.dim_value != 1)
              for v in [*m.graph.value_info, *m.graph.output, *m.graph.input]}
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = []
    for n in m.graph.node:
        shape = shapes.get(n.output[0], ())
        if n.op_type == "Conv":
            w = inits[n.input[1]]
            out.append((shape, "patch conv", 2 * w[0].size))
        elif n.op_type in ("MatMul", "Gemm"):
            k = (inits[n.input[1]].shape[1 if n.op_type == "Gemm" else 0] if n.input[1] in inits
                 else shapes[n.input[0]][-1])
            kind = ("linear" if n.input[1] in inits else "attention QK^T" if shape[-1] == shape[-2]
                    else "attention AV")
            out.append((shape, kind, 2 * k))
        elif n.op_type == "Softmax":  # two exps per output (the sum's, the output's), ~25 ALU ops each as vectors
            out.append((shape, "softmax", 60))
        elif n.op_type == "LayerNormalization":
            out.append((shape, "layernormalization", 8))
    return out


def tx_classify(name: str, flop: int, table: list) -> str:
    """A transformer kernel's kind: the node of its output shape nearest its flop per output (a reduce whose flop
    per output is a matmul's is that matmul; a few flop per output, a softmax or a layernorm), elementwise (E_)."""
    head = re.match(r"^[A-Za-z]+((?:_\d+)*)", name)
    dims = tuple(int(d) for d in head[1].split("_")[1:] if d != "1") if head else ()
    if name.startswith("E_"):
        return "elementwise (gelu, adds, copies)"
    per = flop / max(1, _prod(dims))
    best = min(((abs(np.log(max(per, 1e-3) / f)), kind) for shape, kind, f in table if shape == dims), default=None)
    if best and best[0] < 1.0:
        return best[1]
    return "other reduce (fused: layernorm + residual, the head)" if per < 2000 else "other reduce (a fused matmul)"


def _prod(s: tuple[int, ...]) -> int:
    p = 1
    for d in s:
        p *= d
    return p


def profile(model: str, device: str, repeat: int, size: int, top: int) -> None:
    res, out = child(model, device, repeat, size, True)
    calls: list[list[tuple[str, int, float, int, int]]] = []
    for ln in out.splitlines():
        if ln.startswith("=== call"):
            calls.append([])
        elif calls and (mt := KERNEL.match(ln)):
            calls[-1].append((mt[1], int(mt[2]), float(mt[3]), int(mt[4]), int(mt[5])))
    calls = calls[1:] if len(calls) > 1 else calls  # the first call may still page in its buffers
    ks = [(c[0][:2] + (min(x[i][2] for x in calls),) + c[0][3:]) for i, c in enumerate(zip(*calls, strict=True))]
    tx = model in TRANSFORMERS
    table = tx_table(model) if tx else node_table(model, size)
    total = sum(k[2] for k in ks)
    print(f"real_models profile model={model} device={device} kernels={len(ks)} kernel_ms={total / 1e3:.2f} "
          f"steady_ms={res['steady'] * 1e3:.2f} (jit replay, native graph off under UOPIR_DEBUG=2, so the weight "
          f"re-packing kernels it runs once per plan are listed too: E_.._16/E_.._8 with 2 args) "
          f"ort_ms={res['ort_steady'] * 1e3:.2f}")
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0])
    rows = []
    for name, nargs, us, flop, nbytes in ks:
        kind = tx_classify(name, flop, table) if tx else classify(name, flop, table)
        by_kind[kind][0] += us
        by_kind[kind][1] += 1
        by_kind[kind][2] += flop
        rows.append((us, name, nargs, kind, flop, nbytes))
    for kind, (us, n, flop) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        print(f"  kind {kind:<44} {n:3d} kernels {us / 1e3:9.2f} ms {100 * us / total:5.1f}%  "
              f"{flop / us / 1e3 if us else 0:7.2f} GFLOP/s")
    for us, name, nargs, kind, flop, nbytes in sorted(rows, reverse=True)[:top]:
        print(f"  top {name:<16} {kind:<44} args {nargs} {us / 1e3:8.2f} ms {100 * us / total:5.1f}%  "
              f"{flop / us / 1e3:7.2f} GFLOP/s {nbytes / us / 1e3:7.2f} GB/s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", default="c,llvm")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--profile", action="store_true", help="per-kernel times (UOPIR_DEBUG=2) instead of the table")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    bad = [m for m in a.models.split(",") if m not in MODELS]
    if bad:
        ap.error(f"unknown model(s) {', '.join(bad)}; the models are {', '.join(MODELS)}")
    from uopir.backends.registry import DEVICES
    bad = [d for d in a.devices.split(",") if d not in DEVICES]
    if bad:
        ap.error(f"unknown device(s) {', '.join(bad)}; the devices are {', '.join(DEVICES)}")
    if a.repeat < 1 or a.size < 32 or a.top < 0:
        ap.error("--repeat must be >= 1, --size >= 32 and --top >= 0")
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print("real_models skipped: onnx / onnxruntime are not installed")
        return 0
    print(f"real_models: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine: read "
          "the ratios)", flush=True)
    t0 = time.perf_counter()
    for model in a.models.split(","):
        for dev in a.devices.split(","):
            if a.profile:
                profile(model, dev, a.repeat, a.size, a.top)
                continue
            r, _ = child(model, dev, a.repeat, a.size, False)
            print(f"real_models model={model} device={dev} first={r['first']:.1f} settle={r['settle']:.1f} "
                  f"steady={r['steady'] * 1e3:.2f} "
                  f"ort_steady={r['ort_steady'] * 1e3:.2f} ratio={r['steady'] / r['ort_steady']:.1f} "
                  f"max_abs_diff={r['max_abs_diff']:.1e} rel_diff={r['rel_diff']:.1e}", flush=True)
    print(f"real_models: {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
