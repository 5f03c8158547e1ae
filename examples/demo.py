"""The main job (`make demo`): two models taken through every stage, compiled to C, run and checked against numpy.

1. a small MLP written with the lazy Tensor frontend (nothing runs while it is built): its tensor-dialect IR,
   printed as .uop text, and the proof that the text round-trips exactly;
2. the lowering pipeline `default{target=c}` run by the pass manager (tensor -> kernel -> device), with per-pass
   timing;
3. for the MLP and for the small CNN of examples/cnn.py (2 convolutions + a linear layer): the stages each kernel
   went through (tensor ops -> kernel.def -> device.program -> C function), one kernel shown at each level;
4. both run on the best backend here (c when a C compiler exists, else the reference interpreter), one line per
   kernel run (UOPIR_DEBUG=2: time, GFLOP/s, GB/s), and compared with numpy;
5. the visualizer page of the MLP's compilation (every pass, every rewrite step, the C it emitted), recorded while
   step 3 compiled it: build/demo/mlp-viz.html (and the trace, build/demo/mlp-viz.json, for `uop-viz`).
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import sys
import time

import numpy as np

try:
    import uopir  # noqa: F401 - checks that the package is importable
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import cnn  # noqa: E402 - examples/cnn.py

from uopir import PassManager, Tensor, parse_ir, print_ir, verify  # noqa: E402
from uopir.backends import available, get_backend  # noqa: E402
from uopir.ir.trace import tracing  # noqa: E402
from uopir.viz import write_page  # noqa: E402

VIZ_DIR = pathlib.Path(__file__).resolve().parents[1] / "build" / "demo"


def banner(text: str) -> None:
    print(f"\n==== {text} " + "=" * max(0, 100 - len(text)))


def mlp(device: str) -> tuple[Tensor, np.ndarray]:
    """relu(x @ w1 + b1) @ w2 + b2 -> softmax, and numpy's result."""
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((4, 8)).astype(np.float32)
    p = {"w1": rng.uniform(-0.5, 0.5, (8, 16)), "b1": rng.uniform(-0.1, 0.1, 16), "w2": rng.uniform(-0.5, 0.5, (16, 3)),
         "b2": np.zeros(3)}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    t = {k: Tensor(v, device=device) for k, v in p.items()}
    probs = Tensor(x_np, device=device).linear(t["w1"], t["b1"]).relu().linear(t["w2"], t["b2"]).softmax()
    logits = np.maximum(x_np @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return probs, e / e.sum(axis=-1, keepdims=True)


def small_cnn(device: str) -> tuple[Tensor, np.ndarray]:
    """examples/cnn.py's forward pass on a batch of 8 1x28x28 images, and numpy's result."""
    params = cnn.init_params()
    x_np = np.random.default_rng(1).standard_normal((cnn.BATCH, 1, 28, 28)).astype(np.float32)
    out = cnn.forward(Tensor(x_np, device=device), {k: Tensor(v, device=device) for k, v in params.items()})
    return out, cnn.forward_numpy(x_np, params)


def stages(name: str, out: Tensor, show: bool) -> None:
    """Each kernel of `out` at every level: its size as a kernel.def, as a device.program and as C."""
    items = out.schedule()
    progs = out.programs()  # compiled (or taken from the caches), not run
    n_ops = len(out.uop.toposort())
    print(f"{name}: {n_ops} tensor-level ops -> {len(items)} kernels")
    for item, prog in zip(items, progs, strict=True):
        lines = (prog.source or "").count("\n")
        print(f"  {item.name:<16} kernel.def {len(item.ast.toposort()):4d} ops -> device.program "
              f"{len(prog.program.src):4d} ops" + (f" -> C {lines:4d} lines" if prog.source else ""))
    if show:
        item, prog = items[0], progs[0]
        print(f"\n// kernel level (Tensor.schedule()[0].ast), {item.name}:")
        print(print_ir(item.ast), end="")
        print(f"\n// device level (Tensor.programs()[0].program, after device-linearize), {prog.name}:")
        print(print_ir(prog.program), end="")
        if prog.source:
            print(f"\n// C (Tensor.programs()[0].source), {prog.name}:")
            print(prog.source, end="")


def run(name: str, out: Tensor, want: np.ndarray, tol: float) -> bool:
    sys.stdout.flush()  # the debug lines go to stderr: keep them after what this printed
    os.environ["UOPIR_DEBUG"] = "2"  # one line per kernel run (stderr): time, GFLOP/s, GB/s and the counted work
    try:
        t0 = time.perf_counter()
        got = out.numpy()
        ms = (time.perf_counter() - t0) * 1e3
    finally:
        del os.environ["UOPIR_DEBUG"]
    err = float(np.max(np.abs(got - want)))
    ok = err < tol
    print(f"{name}: {list(got.shape)} in {ms:.1f} ms, max |uopir - numpy| = {err:.2e} ({'OK' if ok else 'WRONG'})")
    return ok


def main() -> int:
    device = "c" if "c" in available() else "python"
    probs, probs_ref = mlp(device)

    banner("1. tensor-dialect IR of the MLP relu(x @ w1 + b1) @ w2 + b2 -> softmax (built lazily, nothing ran)")
    text = print_ir(probs.uop)
    print(text, end="")
    verify(probs.uop)
    same = parse_ir(text) is probs.uop and parse_ir(print_ir(probs.uop, generic=True)) is probs.uop
    print(f"// pretty and generic text round trip to the identical graph: {same}")

    banner(f"2. uop-opt -p 'default{{target={device}}}' --timing (tensor -> kernel -> device, verified per pass)")
    pm = PassManager.parse(f"default{{target={device}}}")
    timing = io.StringIO()
    pm.run(probs.uop, timing=True, out=timing)
    print(f"pipeline: {pm.text()}")
    print(timing.getvalue(), end="")

    net, net_ref = small_cnn(device)
    banner(f"3. the stages of every kernel: tensor -> kernel.def -> device.program -> C (device {device!r})")
    with tracing("make demo: the MLP relu(x @ w1 + b1) @ w2 + b2 -> softmax") as recorder:
        stages("MLP", probs, show=True)  # compiles the MLP's kernels: what the visualizer page shows
    print()
    stages("CNN (2 conv + linear)", net, show=False)

    banner(f"4. run on {device!r} (pipeline {get_backend(device).pipeline!r}) and compare with numpy")
    print(f"devices that run programs here: {', '.join(available())}")
    ok = run("MLP softmax", probs, probs_ref, 1e-5)
    ok = run("CNN logits", net, net_ref, 1e-4) and ok
    ok = ok and same

    banner("5. the visualizer page of the MLP's compilation (docs/visualizer.md)")
    trace = recorder.to_dict()
    VIZ_DIR.mkdir(parents=True, exist_ok=True)
    (VIZ_DIR / "mlp-viz.json").write_text(json.dumps(trace), encoding="utf-8")
    page = write_page(trace, VIZ_DIR / "mlp-viz.html")
    steps = sum(len(p["steps"]) for p in trace["passes"])
    print(f"{len(trace['passes'])} passes, {steps} rewrite steps, {len(trace['sources'])} kernel sources recorded")
    print(f"page:  {page}  (open it in a browser; no server needed)")
    print(f"trace: {VIZ_DIR / 'mlp-viz.json'}  (uop-viz serves it: uop-viz {VIZ_DIR / 'mlp-viz.json'})")
    print("\ndemo " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
