"""The real models of issue 26 (uopir/onnx/testmodels_cnn.py: ResNet-18, MobileNetV3-small, EfficientNet-B0,
SqueezeNet 1.1, batch 1, 224x224; uopir/onnx/testmodels_transformer.py: a ViT of 6 layers, width 384, 224x224, and
a TransformerEncoder of 4 layers, d 256, 64 tokens; a BERT-tiny encoder, vocab 30522, 2 layers, d 128, 128 tokens;
random weights) through uopir beside onnxruntime, and where uopir's time goes.

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

--profile: one warm-up call, then --repeat steady calls, each replayed natively with every kernel timed as the
replay runs it (uopir.backends.cpu.graph.LaunchGraph.profile: the worker pool kept hot between kernels, as in a steady
call; a kernel launched and timed alone would find it asleep and pay its wake-up), the best time per kernel; prints
the --top kernels by time with their kind, and the share of the model's kernel time per kind. A kernel's kind comes
from its own IR (the kernel.def before kernel-optimize, recorded while the model compiles), not from its flop count
(a fused BN/SiLU changes that): the ranges of its outermost reduction and the buffers it reads under it:
    elementwise (no reduction: pads, activations, adds, copies), copy (a buffer copy of the graph), maxpool (a max
    reduction), pool / row reduce (a sum of one buffer: global average pool, a softmax's or layernorm's sums),
    depthwise kxk[/s2] (a product reduced over a kxk window only), conv kxk[/s2] (over channels and a kxk window),
    pointwise 1x1 (over channels only, spatial output), FC / SE conv (over channels, a vector out), matmul (a
    transformer's products: linear layers, attention); "split" counts a kind's kernels split across cores.
    A window is the last two reduce ranges of equal extent <= 7 (kh, kw), /s2 when the input index steps twice as
    far along an output range as along a window range.
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

MODELS = ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1", "vit", "transformer_encoder",
          "bert_tiny")

CHILD = r"""
import json, sys, time
import numpy as np
import onnxruntime as ort
from uopir.onnx import from_onnx
from uopir.onnx.testmodels_cnn import MODELS
from uopir.onnx.testmodels_transformer import MODELS as TX
name, device, repeat, size, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
if profile:
    sys.path.insert(0, sys.argv[6])
    from real_models import capture_kernel_defs, profile_rows
    KDEFS = capture_kernel_defs()
m, feeds = TX[name]() if name in ("transformer_encoder", "bert_tiny") else {**MODELS, **TX}[name](size=size)
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
if profile:  # the C binaries too (the profile times the steady replay, which runs them)
    from uopir.backends.c.compiler import wait_background
    wait_background()
    model.run(feeds)
    from uopir.backends.cpu.graph import LaunchGraph
    LaunchGraph.profile = []
steady = []
for i in range(repeat):
    t = time.perf_counter()
    model.run(feeds)
    steady.append(time.perf_counter() - t)
if profile:
    print("PROFILE " + json.dumps(profile_rows(model, LaunchGraph.profile, KDEFS, name in TX)), flush=True)
    LaunchGraph.profile = None
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

def child(model: str, device: str, repeat: int, size: int, profile: bool) -> tuple[dict, str]:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
        env = {**os.environ, "UOPIR_CACHE_DIR": cache, "UOPIR_C_TIERED": "0"}
        here = os.path.dirname(os.path.abspath(__file__))
        args = [model, device, str(repeat), str(size), "1" if profile else "0", here]
        p = subprocess.run([sys.executable, "-c", CHILD, *args],
                           capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode:
        raise RuntimeError(f"{model} on {device} failed:\n{p.stderr[-2000:]}")
    res = next(ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("RESULT "))
    return json.loads(res[7:]), p.stdout


def capture_kernel_defs() -> dict[str, object]:
    """Record, while a model compiles, each kernel's kernel.def as kernel-optimize receives it (plain output and
    reduce ranges, before any split), by kernel name: a Backend.lower wrapper adds the instrument (the profile
    child's own process only)."""
    from uopir.backends.interface import Backend
    from uopir.dialects import kernel, tensor
    from uopir.passes.instruments import PassInstrumentation

    kdefs: dict[str, object] = {}

    class Capture(PassInstrumentation):
        def run_before_pass(self, event, ir) -> None:  # noqa: ANN001 - the instrument's hook
            if event.pass_name != "kernel-optimize":
                return
            if ir.op is kernel.DEF:
                kdefs.setdefault(ir.arg if isinstance(ir.arg, str) else "?", ir)
                return
            for u in ir.toposort():
                if u.op is tensor.CALL and isinstance(u.arg, tuple) and u.arg[0].op is kernel.DEF:
                    kdefs.setdefault(u.arg[1], u.arg[0])

    lower = Backend.lower

    def wrapped(self, root, *args, instruments=None, **kw):  # noqa: ANN001, ANN202 - Backend.lower's own signature
        return lower(self, root, *args, instruments=[*(instruments or []), Capture()], **kw)

    Backend.lower = wrapped
    return kdefs


def reduction_shape(kdef) -> tuple[str, list[int], int, int] | None:  # noqa: ANN001 - a kernel.def UOp
    """(reduce op, extents of the outermost reduction's ranges in axis order, buffers it multiplies (loads under it
    that vary with its ranges), stride of its window: 2 when an input index steps twice as far along an output range
    as along a reduce range, in any of a peeled kernel's segments) of the kernel's largest reduction; None without
    one."""
    import math

    from uopir.dialects import kernel as K
    from uopir.passes.kernel.facts import KernelFacts
    from uopir.passes.kernel.indexmath import const_extent, linear_coeffs

    f = KernelFacts(kdef)
    nested = {s for red in f.reduces for s in red.src[0].toposort() if s.op is K.REDUCE}
    best = None
    for red in f.reduces:
        if red in nested:
            continue
        chain = [red, *(s for s in red.src[0].toposort() if s.op is K.REDUCE)]
        rngs = sorted({r for c in chain for r in c.src[1:] if r.op is K.RANGE}, key=lambda r: r.attrs.axis)
        ext = [const_extent(r) or 1 for r in rngs]
        bufs, stride = set(), 1
        every = frozenset(f.deps[red.src[0]]) | frozenset(rngs)
        for ld in red.src[0].toposort():
            if ld.op is not K.LOAD or not f.deps[ld] & set(rngs) or ld.src[0].op is not K.INDEX:
                continue
            bufs.add(ld.src[0].src[0])
            co = linear_coeffs(ld.src[0].src[1], every, f.deps) or {}
            for r in rngs[-2:]:
                if co.get(r) and any(o not in rngs and c == 2 * co[r] for o, c in co.items()):
                    stride = 2
        if best is None or math.prod(ext) > math.prod(best[1]):
            best = (str(red.attrs.op), ext, len(bufs), stride)
        elif math.prod(ext) == math.prod(best[1]):  # a peeled kernel's segments: the interior shows the stride
            best = (*best[:3], max(best[3], stride))
    return best


def kernel_kind(name: str, kdef, transformer: bool) -> str:  # noqa: ANN001 - a kernel.def UOp or None
    """A kernel's kind from its IR (see the module's --profile notes); its name gives the output shape."""
    if kdef is None:
        return "unknown (not compiled in this process)"
    shape = reduction_shape(kdef)
    if shape is None:
        return "elementwise"
    op, ext, bufs, stride = shape
    head = re.match(r"^[A-Za-z]+((?:_\d+)*)", name)
    dims = [int(d) for d in head[1].split("_")[1:] if d != "1"] if head else []
    if op == "max":
        return "maxpool"
    if bufs < 2:
        return "pool / row reduce"
    if transformer:
        return "matmul"
    s2 = "/s2" if stride == 2 else ""
    if len(ext) >= 2 and ext[-1] == ext[-2] <= 7:
        k = ext[-1]
        return f"depthwise {k}x{k}{s2}" if _prod(tuple(ext)) == k * k else f"conv {k}x{k}{s2}"
    return "pointwise 1x1" if len(dims) >= 2 else "FC / SE conv (1x1 spatial)"


def profile_rows(model, runs: list, kdefs: dict, transformer: bool) -> list:  # noqa: ANN001 - an OnnxModel
    """(name, kind, cores, best us, flop, bytes) per entry of the model's native replay, from LaunchGraph.profile's
    (graph, ns per entry) of the steady calls, after a first row whose us is the best replay's sum."""
    from uopir.backends.cpu.runtime import address
    from uopir.backends.estimates import estimate

    jit = next(j for j in model._plans.values() if j is not None)
    graph = jit._graph.graph
    steps = {}
    for st in jit.steps:
        for ps in st.launch.plan.steps:
            k = ps.program.entry
            for fn in (getattr(k, "_fn", None), getattr(k, "_aliased", None)):
                if fn is not None:
                    steps[address(fn)] = (ps, st.launch.var_vals)
    ours = [ns for g, ns in runs if g is graph]
    times = np.min(ours, axis=0)
    rows = [("(best run)", "total", 0, min(int(ns.sum()) for ns in ours) / 1e3, 0, 0)]
    for i in range(graph.n):
        e = graph.entries[i]
        if not e.fn:
            rows.append(("copy", "copy", 0, times[i] / 1e3, 0, 0))
            continue
        ps, var_vals = steps.get(e.fn, (None, {}))
        if ps is None:
            rows.append(("?", "unknown", e.cores, times[i] / 1e3, 0, 0))
            continue
        est = estimate(ps.program.program, var_vals)
        kind = kernel_kind(ps.name, kdefs.get(ps.name), transformer)
        rows.append((ps.name, kind, e.cores, times[i] / 1e3, est.flops, est.bytes))
    return rows


def _prod(s: tuple[int, ...]) -> int:
    p = 1
    for d in s:
        p *= d
    return p


def profile(model: str, device: str, repeat: int, size: int, top: int) -> None:
    res, out = child(model, device, repeat, size, True)
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("PROFILE ")), None)
    if line is None:
        print(f"real_models profile model={model} device={device}: no native replay to profile")
        return
    best_run, *ks = json.loads(line[8:])
    total = sum(k[3] for k in ks)
    print(f"real_models profile model={model} device={device} kernels={len(ks)} kernel_ms={total / 1e3:.2f} "
          f"best_replay_ms={best_run[3] / 1e3:.2f} steady_ms={res['steady'] * 1e3:.2f} (native replay, each kernel "
          f"timed as the replay runs it; kernel_ms sums each kernel's best, best_replay_ms is the best replay's sum) "
          f"ort_ms={res['ort_steady'] * 1e3:.2f}")
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0, 0])
    for _name, kind, cores, us, flop, _nbytes in ks:
        by_kind[kind][0] += us
        by_kind[kind][1] += 1
        by_kind[kind][2] += flop
        by_kind[kind][3] += cores > 1
    for kind, (us, n, flop, split) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        print(f"  kind {kind:<28} {n:3d} kernels ({split:3d} split) {us / 1e3:9.2f} ms {100 * us / total:5.1f}%  "
              f"{flop / us / 1e3 if us else 0:7.2f} GFLOP/s")
    for name, kind, cores, us, flop, nbytes in sorted(ks, key=lambda k: -k[3])[:top]:
        print(f"  top {name:<16} {kind:<28} cores {max(1, cores)} {us / 1e3:8.3f} ms {100 * us / total:5.1f}%  "
              f"{flop / us / 1e3 if us else 0:7.2f} GFLOP/s {nbytes / us / 1e3 if us else 0:7.2f} GB/s")


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
