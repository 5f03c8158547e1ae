"""The main job (`make demo`): one program taken through every stage that exists today, then run and checked.

1. a small MLP written with the lazy Tensor frontend (nothing runs while it is built);
2. its tensor-dialect IR, printed as .uop text, and the proof that the text round-trips exactly;
3. the lowering pipeline `default{target=c}` run by the pass manager (tensor -> kernel -> device), with per-pass
   timing, and one kernel at the kernel and at the device level;
4. the program run on the best backend that exists (c when a C compiler exists, else the reference
   interpreter; schedule kernel by kernel)
   and compared with numpy.
"""
from __future__ import annotations

import io
import pathlib
import sys
import time

import numpy as np

try:
    import uopir  # noqa: F401 - checks that the package is importable
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from uopir import PassManager, Tensor, parse_ir, print_ir, verify
from uopir.backends import available, get_backend


def banner(text: str) -> None:
    print(f"\n==== {text} " + "=" * max(0, 100 - len(text)))


def main() -> int:
    Tensor.manual_seed(0)
    x_np = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    w1 = Tensor.kaiming_uniform(8, 16)
    b1 = Tensor.uniform(16, low=-0.1, high=0.1)
    w2 = Tensor.kaiming_uniform(16, 3)
    b2 = Tensor.zeros(3)
    x = Tensor(x_np)

    t0 = time.perf_counter()
    probs = x.linear(w1, b1).relu().linear(w2, b2).softmax()
    build_ms = (time.perf_counter() - t0) * 1e3

    banner("1. tensor-dialect IR of relu(x @ w1 + b1) @ w2 + b2 -> softmax (built lazily, nothing ran)")
    text = print_ir(probs.uop)
    print(text, end="")
    n_ops = len(probs.uop.toposort())
    print(f"// {n_ops} ops, built in {build_ms:.2f} ms")

    banner("2. the text round-trips: parse_ir(print_ir(g)) is g, in both the pretty and the generic form")
    verify(probs.uop)
    same = parse_ir(text) is probs.uop and parse_ir(print_ir(probs.uop, generic=True)) is probs.uop
    print(f"pretty and generic round trip to the identical graph: {same}")

    banner("3. uop-opt -p 'default{target=c}' --timing (tensor -> kernel -> device; verifying after every pass)")
    pm = PassManager.parse("default{target=c}")
    timing = io.StringIO()
    lowered = pm.run(probs.uop, timing=True, out=timing)
    print(f"pipeline: {pm.text()}")
    print(timing.getvalue(), end="")
    calls = [u for u in lowered.toposort() if u.op.name == "tensor.call"]
    print(f"// {n_ops} tensor-level ops -> {len(calls)} kernels")
    items = probs.schedule()
    print(f"\n// the first kernel at the kernel level (Tensor.schedule()[0].ast), {items[0].name}:")
    print(print_ir(items[0].ast), end="")
    print(f"\n// the same kernel at the device level (after device-linearize), {calls[0].arg[1]}:")
    print(print_ir(calls[0].arg[0]), end="")

    banner("4. realize on the best backend that exists here and compare with numpy")
    print(f"devices that run programs here: {', '.join(available())} (LLVM, OpenCL, CUDA come with the next issue)")
    backend = get_backend(probs.device)  # the best device here (c when a C compiler exists), via the backend interface
    t0 = time.perf_counter()
    got = probs.numpy()  # realize: the device's pipeline, then its schedule kernel by kernel
    run_ms = (time.perf_counter() - t0) * 1e3
    print(f"ran on {backend.device!r} (pipeline {backend.pipeline!r}), {len(items)} kernels, {run_ms:.1f} ms")
    w1n, b1n, w2n, b2n = (t.numpy() for t in (w1, b1, w2, b2))
    logits = np.maximum(x_np @ w1n + b1n, 0) @ w2n + b2n
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    want = e / e.sum(axis=-1, keepdims=True)
    err = float(np.max(np.abs(got - want)))
    print("result (softmax probabilities):")
    print(np.array2string(got, precision=5, suppress_small=True))
    print(f"max |uopir - numpy| = {err:.2e}")
    ok = same and err < 1e-5
    print("\ndemo " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
