"""Launch overhead (issue 26, item 5): microseconds per kernel of a TinyJit replay of a chain of N small kernels, and
of an eager one-kernel realize on a schedule-cache hit, on c and llvm, beside torch eager doing the same small op in
the same run (`--peers PYTHON`: an interpreter with torch; skipped without it).

Prints one machine-readable line per figure:
    launch_overhead what=<jit_replay|eager_hit|eager_parallel> device=<c|llvm|torch> kernels=<N> us_per_kernel=<best>
Each figure is the best of ROUNDS rounds of many calls (the cores are shared and noisy). eager_hit also gives
cpu_us_per_kernel: the calling thread's CPU time (time.thread_time) per call, best of the same rounds: the Python
overhead itself, which a machine loaded by other processes inflates far less than the wall time (a 64-element
kernel's own run is well under a microsecond). onnx_run: a steady ONNX `model.run` of a tiny graph (a 1x8x4x4
Transpose) and the stages inside it, beside onnxruntime's `run` in the same process:
    launch_overhead what=onnx_run device=<c|llvm> stage=<model.run|...|onnxruntime> us=<best> cpu_us=<best>
Nothing is asserted.
Run: python3 bench/launch_overhead.py [--peers /tmp/peers/bin/python] [--n 32]
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from uopir.frontend.jit import TinyJit  # noqa: E402
from uopir.frontend.tensor import Tensor  # noqa: E402

ROUNDS = 5
SIZE = 64  # elements of each small kernel's buffers

TORCH = """
import time, torch
torch.set_num_threads(2)
x = torch.ones(%d)
def chain(x, n):
    for _ in range(n):
        x = x + 1.0
    return x
best = 1e9
for _ in range(%d):
    t0 = time.perf_counter(); [chain(x, %d) for _ in range(20)]
    best = min(best, (time.perf_counter() - t0) / (20 * %d))
print(best * 1e6)
"""


def _best(fn, calls: int, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - t0) / calls)
    return best


def jit_replay(device: str, n: int) -> float:
    @TinyJit
    def chain(x: Tensor) -> Tensor:
        for _ in range(n):
            x = (x + 1.0).realize()
        return x

    x = Tensor(np.zeros(SIZE, np.float32), device=device).realize()
    for _ in range(3):
        out = chain(x)
    assert float(out.numpy()[0]) == n, out.numpy()[:4]
    return _best(lambda: chain(x), 200) / n


def eager_hit(device: str, size: int = SIZE, clock=time.perf_counter) -> float:
    x = Tensor(np.zeros(size, np.float32), device=device).realize()
    (x + 1.0).realize()
    return _best(lambda: (x + 1.0).realize(), 300, clock)


def onnx_run(device: str) -> list[tuple[str, float, float]] | None:
    """(stage, wall us, thread CPU us) of one steady `OnnxModel.run` of a 1x8x4x4 Transpose and of each stage inside
    it (the FastPlan, TinyJit.replay_arrays, the native LaunchGraph.run), then onnxruntime's `run`; None without
    onnx/onnxruntime or a native replay."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    from uopir.onnx import from_onnx
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model = from_onnx(m, device=device, jit=True)
    x = np.random.default_rng(0).random((1, 8, 4, 4), np.float32)
    feeds = {"x": x}
    for _ in range(20):
        model.run(feeds)
    fp = model._fast_plan(feeds)
    if fp is None or fp.run_arrays(feeds) is None:
        return None
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    stages = [("model.run", lambda: model.run(feeds)), ("FastPlan.run_arrays", lambda: fp.run_arrays(feeds)),
              ("TinyJit.replay_arrays", lambda: fp.jit.replay_arrays([x], borrowed=True)),
              ("LaunchGraph.run", fp.jit._graph.graph.run), ("onnxruntime", lambda: sess.run(None, feeds))]
    return [(nm, _best(fn, 3000) * 1e6, _best(fn, 3000, time.thread_time) * 1e6) for nm, fn in stages]


def main(argv: list[str]) -> None:
    n = int(argv[argv.index("--n") + 1]) if "--n" in argv else 32
    print(f"launch_overhead loadavg={open('/proc/loadavg').read().split()[0]}", flush=True)
    for device in ("c", "llvm"):
        print(f"launch_overhead what=jit_replay device={device} kernels={n} "
              f"us_per_kernel={jit_replay(device, n) * 1e6:.2f}", flush=True)
        print(f"launch_overhead what=eager_hit device={device} kernels=1 us_per_kernel={eager_hit(device) * 1e6:.2f} "
              f"cpu_us_per_kernel={eager_hit(device, clock=time.thread_time) * 1e6:.2f}", flush=True)
        print(f"launch_overhead what=eager_parallel device={device} kernels=1 size=1048576 "
              f"us_per_kernel={eager_hit(device, 1 << 20) * 1e6:.2f}", flush=True)
        for stage, wall, cpu in onnx_run(device) or []:
            print(f"launch_overhead what=onnx_run device={device} stage={stage} us={wall:.2f} cpu_us={cpu:.2f}",
                  flush=True)
    if "--peers" in argv:
        py = argv[argv.index("--peers") + 1]
        try:
            out = subprocess.run([py, "-c", TORCH % (SIZE, ROUNDS, n, n)], capture_output=True, text=True,
                                 timeout=300).stdout.strip()
            print(f"launch_overhead what=eager device=torch kernels={n} us_per_kernel={float(out):.2f}", flush=True)
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            print(f"launch_overhead skipped impl=torch reason={type(e).__name__}", flush=True)


if __name__ == "__main__":
    main(sys.argv)
