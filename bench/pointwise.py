"""Pointwise (1x1) convolutions of EfficientNet-B0 and MobileNetV3-small, one Conv per shape, uopir beside onnxruntime.

Each shape is one 1x1 conv at batch 1 (Cin -> Cout over HW x HW) with its bias, and with SiLU where the model's
expansion has one: uopir runs it as a TinyJit replay of one Tensor program per device (steady state, warm), and
onnxruntime (when importable) the same Conv (+ Sigmoid * x) as an ONNX graph in this process. Prints, per shape,
the best call of `--rounds` interleaved rounds (each the best of a few calls) and its GFLOP/s (2 flops per
multiply-add), nothing asserted. `--one-core`: one thread each (UOPIR_THREADS=1, onnxruntime's intra-op threads 1),
timed by the calling thread's CPU time, which a busy shared machine disturbs far less than the wall clock:
    pointwise shape=<cin>x<cout>@<hw> impl=<impl> us=<best call> gflops=<rate> [max_rel_err=<vs numpy>]
Run: python3 bench/pointwise.py [--devices llvm,c] [--rounds N] [--shapes 16x96@112s,...] [--one-core]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("UOPIR_C_TIERED", "0")  # time c's own binary, not the LLVM tier it runs while that compiles

# (cin, cout, hw, silu): EfficientNet-B0's expansions (SiLU) and projections, MobileNetV3-small's, SqueezeNet's
SHAPES = [(16, 96, 112, True), (24, 144, 56, True), (40, 240, 28, True), (80, 480, 14, True), (112, 672, 14, True),
          (192, 1152, 7, True), (96, 24, 56, False), (144, 40, 28, False), (480, 112, 14, False),
          (1152, 192, 7, False), (320, 1280, 7, True), (16, 72, 56, False), (96, 576, 7, False), (576, 96, 7, False)]


def parse_shape(text: str) -> tuple[int, int, int, bool]:
    """`16x96@112` (or `16x96@112s` with SiLU) as (cin, cout, hw, silu)."""
    try:
        ch, hw = text.split("@")
        cin, cout = ch.split("x")
        silu = hw.endswith("s")
        return int(cin), int(cout), int(hw.rstrip("s")), silu
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: expected CINxCOUT@HW[s], e.g. 16x96@112s") from None


def data(cin: int, cout: int, hw: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((1, cin, hw, hw), dtype=np.float32),
            (rng.standard_normal((cout, cin, 1, 1), dtype=np.float32) / np.sqrt(cin)).astype(np.float32),
            rng.standard_normal((cout,), dtype=np.float32))


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, silu: bool) -> np.ndarray:
    y = np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x) + b[None, :, None, None]
    return y / (1 + np.exp(-y)) if silu else y


def uopir_call(device: str, x: np.ndarray, w: np.ndarray, b: np.ndarray, silu: bool) -> Callable[[], np.ndarray]:
    from uopir import TinyJit
    from uopir.frontend.tensor import Tensor

    ts = [Tensor(a, device=device).realize() for a in (x, w, b)]

    def op(x: Tensor) -> Tensor:
        y = x.conv2d(ts[1], ts[2])
        return (y * y.sigmoid() if silu else y).realize()
    jit = TinyJit(op, constants=ts[1:])  # the weights, as uopir.onnx passes them: their repack runs once
    return lambda: jit(ts[0]).numpy()


def ort_call(x: np.ndarray, w: np.ndarray, b: np.ndarray, silu: bool, threads: int = 0
             ) -> Callable[[], np.ndarray] | None:
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    cout = w.shape[0]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y" if not silu else "c"])]
    if silu:
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
    g = helper.make_graph(nodes, "pw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, *x.shape[2:]])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    del onnx
    return lambda: sess.run(None, {"x": x})[0]


def best(call: Callable[[], object], inner: int, clock: Callable[[], float] = time.perf_counter) -> float:
    t_best = float("inf")
    for _ in range(inner):
        t = clock()
        call()
        t_best = min(t_best, clock() - t)
    return t_best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="llvm,c")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--shapes", type=lambda s: [parse_shape(p) for p in s.split(",")], default=SHAPES)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--one-core", action="store_true", help="one thread each, timed by the thread's CPU time")
    a = ap.parse_args()
    if a.one_core:
        os.environ["UOPIR_THREADS"] = "1"
    clock = time.thread_time if a.one_core else time.perf_counter
    for cin, cout, hw, silu in a.shapes:
        x, w, b = data(cin, cout, hw)
        ref = reference(x, w, b, silu)
        impls: dict[str, Callable[[], np.ndarray]] = {d: uopir_call(d, x, w, b, silu) for d in a.devices.split(",")}
        o = None if a.no_ort else ort_call(x, w, b, silu, 1 if a.one_core else 0)
        if o is not None:
            impls["ort"] = o
        errs = {}
        for name, call in impls.items():
            for _ in range(3):
                got = call()
            errs[name] = float(np.abs(got - ref).max() / (np.abs(ref).max() or 1))
        times = dict.fromkeys(impls, float("inf"))
        for _ in range(a.rounds):
            for name, call in impls.items():
                times[name] = min(times[name], best(call, a.inner, clock))
        flops = 2.0 * cin * cout * hw * hw
        tag = f"{cin}x{cout}@{hw}{'s' if silu else ''}"
        for name, t in times.items():
            print(f"pointwise shape={tag} impl={name} us={t * 1e6:.1f} gflops={flops / t / 1e9:.1f} "
                  f"max_rel_err={errs[name]:.1e}", flush=True)
    print(f"pointwise loadavg={' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
