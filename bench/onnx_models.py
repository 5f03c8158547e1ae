"""ONNX models through uopir beside onnxruntime: the small CNN and the transformer block of uopir/onnx/testmodels.py,
the 2-layer LSTM, GRU and RNN (20 steps, torch's export layout) of uopir/onnx/testmodels_rnn.py.

For each model and uopir device, one fresh subprocess with an empty compile cache (UOPIR_CACHE_DIR in a temporary
folder) measures
    first  = from_onnx + the first call, outputs realized into numpy (graph build, lowering, compiles, run)
    steady = the best of --repeat later calls (on c after the C binaries compiled in the background meanwhile are
             built and one call found them): the plan captured by the first call replayed on the same
             inputs (no graph building, scheduling or compiling); with --no-jit (`from_onnx(..., jit=False)`) the
             graph is rebuilt from the nodes on every call (the schedule cache and the compiled kernels are reused)
beside onnxruntime's session creation and its best steady run in the same process. Figures are wall seconds on a
machine shared with other jobs (the ratios uopir/onnxruntime are the figures to read; `cpu` adds the CPU seconds
of the process and its compilers for the first run, which a loaded machine inflates less):
    onnx_models model=<name> device=<dev> jit=<0|1> first=<s> first_cpu=<s> steady=<s> ort_first=<s>
        ort_steady=<s> ratio_first=<uopir/ort> ratio_steady=<uopir/ort> steady_cpu=<s> ort_cpu=<s>
        ratio_steady_cpu=<uopir/ort, CPU seconds of the process> max_abs_diff=<d>

    python3 bench/onnx_models.py [--devices python,c] [--models small_cnn,transformer_block,lstm,gru,rnn] [--repeat N]
        [--no-jit]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np
import onnxruntime as ort
from uopir.onnx import from_onnx
from uopir.onnx import testmodels, testmodels_rnn
name, device, repeat, jit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
m, feeds = getattr(testmodels_rnn if name in ("lstm", "gru", "rnn") else testmodels, name)()
out_name = m.graph.output[0].name
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
c0, t = cpu(), time.perf_counter()
model = from_onnx(m, device=device, jit=jit)
got = model.run(feeds)[out_name]
first, first_cpu = time.perf_counter() - t, cpu() - c0
if device == "c":  # the C binaries compile in the background (tier 0 runs meanwhile): steady is after them
    from uopir.backends.c.compiler import wait_background
    wait_background()
    model.run(feeds)
steady, steady_cpu = [], []
for _ in range(repeat):
    t, c = time.perf_counter(), time.process_time()
    model.run(feeds)
    steady.append(time.perf_counter() - t)
    steady_cpu.append(time.process_time() - c)
t = time.perf_counter()
sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
want = sess.run(None, feeds)[0]
ort_first = time.perf_counter() - t
ort_steady, ort_cpu = [], []
for _ in range(max(repeat, 20)):
    t, c = time.perf_counter(), time.process_time()
    sess.run(None, feeds)
    ort_steady.append(time.perf_counter() - t)
    ort_cpu.append(time.process_time() - c)
print(json.dumps({"first": first, "first_cpu": first_cpu, "steady": min(steady), "ort_first": ort_first,
                  "ort_steady": min(ort_steady), "steady_cpu": min(steady_cpu), "ort_cpu": min(ort_cpu),
                  "diff": float(np.abs(got - want).max())}))
"""


def run(model: str, device: str, repeat: int, jit: bool = True) -> dict:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
        env = {**os.environ, "UOPIR_CACHE_DIR": cache}
        p = subprocess.run([sys.executable, "-c", CHILD, model, device, str(repeat), "1" if jit else "0"],
                           capture_output=True, text=True, env=env, timeout=900)
    if p.returncode:
        raise RuntimeError(f"{model} on {device} failed:\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", default="python,c")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--models", default="small_cnn,transformer_block,lstm,gru,rnn")
    ap.add_argument("--no-jit", action="store_true", help="rebuild the graph on every call (from_onnx(jit=False))")
    a = ap.parse_args()
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print("onnx_models skipped: onnx / onnxruntime are not installed")
        return 0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"onnx_models: load average {load:.1f} on {os.cpu_count()} cores (a shared machine: read the ratios)")
    t0 = time.perf_counter()
    for model in a.models.split(","):
        for dev in a.devices.split(","):
            r = run(model, dev, a.repeat, not a.no_jit)
            print(f"onnx_models model={model} device={dev} jit={int(not a.no_jit)} first={r['first']:.3f} "
                  f"first_cpu={r['first_cpu']:.3f} "
                  f"steady={r['steady']:.6f} ort_first={r['ort_first']:.4f} ort_steady={r['ort_steady']:.6f} "
                  f"ratio_first={r['first'] / r['ort_first']:.0f} ratio_steady={r['steady'] / r['ort_steady']:.1f} "
                  f"steady_cpu={r['steady_cpu']:.6f} ort_cpu={r['ort_cpu']:.6f} "
                  f"ratio_steady_cpu={r['steady_cpu'] / max(r['ort_cpu'], 1e-9):.1f} max_abs_diff={r['diff']:.2e}",
                  flush=True)
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    print(f"onnx_models: {time.perf_counter() - t0:.0f} s, cpu {cpu:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
