"""One training step (forward, backward, AdamW update) of examples/train_digits.py's MLP and CNN: the first step in a
fresh process (building, scheduling and compiling everything: `first`), the first jitted replay, and the steady
state (the median of later jitted steps), beside tinygrad running the same models when it is installed.

    python3 bench/train_step.py [--device c] [--steps 20] [--batch 64]

Prints one line per model and implementation:
    train_step model=<mlp|cnn> impl=<uopir-DEVICE|tinygrad> first=<s> replay=<s> steady_ms=<ms> steps=<n>
Each figure comes from a fresh subprocess (no compile cache is reused between models; the disk cache of earlier
runs is, as in normal use: pass `--cold` to give each run an empty one).

Then a breakdown of one small CNN (conv2d 1->8 3x3 -> relu -> max_pool2d 2 -> linear 1352->10, 28x28 inputs,
`--batch` images, plain SGD), forward alone and a whole training step, in CPU time of the process and its children
(the machine may be shared; wall time would count the other users). Each phase starts with an empty compile cache:
    breakdown model=convpool impl=<label> device=<d> batch=<b> phase=<fwd|step> kernels=<n> lower_cpu_s=<s>
              first_cpu_s=<s> steady_cpu_ms=<ms> flops=<n> [ratio_to_fwd=<r> flops_ratio_to_fwd=<r>]
    kernel model=convpool impl=<label> phase=<fwd|step> n=<i> name=<kernel> flops=<n> run_cpu_us=<us>
lower_cpu_s is the backend's pipeline alone on the step's graph, first_cpu_s the first call (lowering, compiles,
run), steady_cpu_ms the median of later calls (schedule cache hits), flops the work that the kernels of the same
schedule count on the python device (uopir.backends.estimates: deterministic, device-independent), ratio_to_fwd the
step's steady time (and flops) over the forward's. run_cpu_us: one more call's launch of the kernel (UOPIR_DEBUG=2), in
CPU time of the launching thread.
`--compare REF` runs the same breakdown on the uopir of git revision REF (exported to a temporary directory) first,
for before/after figures; `--only-breakdown` skips the train_digits lines. Measured 2026-12-03 (device c, batch 16,
2 shared cores), `--compare 5678e43`: step steady 141.6 -> 15.3 CPU ms, 30.7x -> 3.6x the forward (flops 25.7x ->
2.6x), lowering 1.84 -> 0.65 s; the max-pool gradient kernel had 59 M flops (83 ms), the forward 2.5 M in all.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

UOPIR = """
import statistics, sys, time
t0 = time.perf_counter()
import numpy as np
sys.path.insert(0, {examples!r})
from train_digits import CNN, MLP, load
from uopir import Tensor, TinyJit, nn
from uopir.nn.state import get_parameters
Tensor.manual_seed(0)
x_tr, y_tr, _, _ = load(0)
model = MLP() if {model!r} == "mlp" else CNN()
opt = nn.optim.AdamW(get_parameters(model), lr=1e-3, weight_decay=1e-4)
Tensor.training = True

def step(x, y):
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    Tensor.realize_all(loss, *opt.schedule_step())
    return loss

jit = TinyJit(step)
times = []
for i in range({steps} + 2):
    lo = (i * {batch}) % (len(x_tr) - {batch})
    x, y = Tensor(x_tr[lo:lo + {batch}]), Tensor(y_tr[lo:lo + {batch}])
    t = time.perf_counter()
    jit(x, y).item()
    times.append(time.perf_counter() - t)
print(f"{{time.perf_counter() - t0 - sum(times[1:]):.3f}} {{times[2]:.4f}} {{statistics.median(times[3:]) * 1e3:.2f}}")
"""

TINYGRAD = """
import statistics, sys, time
t0 = time.perf_counter()
import numpy as np
from sklearn.datasets import load_digits
from tinygrad import Tensor, TinyJit, nn
from tinygrad.nn.state import get_parameters
Tensor.manual_seed(0)
d = load_digits()
x_tr, y_tr = (d.data / 16.0).astype(np.float32), d.target.astype(np.int32)

class MLP:
    def __init__(self): self.l1, self.l2 = nn.Linear(64, 128), nn.Linear(128, 10)
    def __call__(self, x): return self.l2(self.l1(x).relu())

class CNN:
    def __init__(self):
        self.c1, self.c2 = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.c3, self.l1 = nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.Linear(32 * 2 * 2, 10)
    def __call__(self, x):
        x = self.c3(self.c2(self.c1(x.reshape(-1, 1, 8, 8)).relu()).relu()).relu()
        return self.l1(x.flatten(1).dropout(0.3))

model = MLP() if {model!r} == "mlp" else CNN()
opt = nn.optim.AdamW(get_parameters(model), lr=1e-3, weight_decay=1e-4)
Tensor.training = True

@TinyJit
def step(x, y):
    opt.zero_grad()
    loss = model(x).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss.realize()

times = []
for i in range({steps} + 2):
    lo = (i * {batch}) % (len(x_tr) - {batch})
    x, y = Tensor(x_tr[lo:lo + {batch}]), Tensor(y_tr[lo:lo + {batch}])
    t = time.perf_counter()
    step(x, y).item()
    times.append(time.perf_counter() - t)
print(f"{{time.perf_counter() - t0 - sum(times[1:]):.3f}} {{times[2]:.4f}} {{statistics.median(times[3:]) * 1e3:.2f}}")
"""


def _run(code: str, env: dict[str, str], leg: str) -> tuple[str, str, str] | None:
    """One leg's child run (`leg` names it in a failure line: which implementation and model failed)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        print(f"train_step {leg} failed=({why})", flush=True)
        return None
    first, replay, steady = r.stdout.strip().splitlines()[-1].split()
    return first, replay, steady


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="c")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--cold", action="store_true", help="an empty compile cache for each uopir run")
    ap.add_argument("--compare", metavar="REF", help="also the convpool breakdown of git revision REF (before/after)")
    ap.add_argument("--only-breakdown", action="store_true", help="skip the MLP/CNN steps of train_digits")
    args = ap.parse_args()
    try:
        import tinygrad  # noqa: F401
        have_tinygrad = True
    except ImportError:
        have_tinygrad = False
    for model in () if args.only_breakdown else ("mlp", "cnn"):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, UOPIR_DEVICE=args.device)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if args.cold:
                env["UOPIR_CACHE_DIR"] = cache
            fmt = dict(model=model, steps=args.steps, batch=args.batch, examples=os.path.join(ROOT, "examples"))
            got = _run(UOPIR.format(**fmt), env, f"model={model} impl=uopir-{args.device}")
            if got:
                print(f"train_step model={model} impl=uopir-{args.device} first={got[0]} replay={got[1]} "
                      f"steady_ms={got[2]} steps={args.steps}", flush=True)
            if have_tinygrad:
                got = _run(TINYGRAD.format(**fmt), dict(os.environ), f"model={model} impl=tinygrad")
                if got:
                    print(f"train_step model={model} impl=tinygrad first={got[0]} replay={got[1]} "
                          f"steady_ms={got[2]} steps={args.steps}", flush=True)
            else:
                print(f"train_step model={model} impl=tinygrad skipped=not-installed", flush=True)
    if args.compare:
        with tempfile.TemporaryDirectory() as old:
            got = subprocess.run(f"git -C {ROOT} archive {args.compare} uopir | tar -x -C {old}", shell=True,
                                 capture_output=True, text=True)
            if got.returncode != 0:
                print(f"breakdown impl={args.compare} skipped=git-archive-failed ({got.stderr.strip()})")
            else:
                _breakdown(args, args.compare, old)
    _breakdown(args, "this", None)


BREAKDOWN = """
import os, resource, statistics, sys, time
if {tree!r}:
    sys.path.insert(0, {tree!r})  # before the installed uopir
import numpy as np
from uopir import Tensor
from uopir.backends.estimates import estimate
from uopir.backends.realize import cache_key, compiled
from uopir.frontend.device import get_backend
from uopir.ir.uop import UOp
assert os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["uopir"].__file__))) == {root!r}, "wrong uopir"
B, phase, dev = {batch}, {phase!r}, {device!r}
rng = np.random.default_rng(0)
w1 = Tensor((rng.standard_normal((8, 1, 3, 3)) / 3).astype(np.float32), requires_grad=True)
b1 = Tensor(np.zeros(8, np.float32), requires_grad=True)
w2 = Tensor((rng.standard_normal((1352, 10)) / 37).astype(np.float32), requires_grad=True)
b2 = Tensor(np.zeros(10, np.float32), requires_grad=True)
params = [w1, b1, w2, b2]

def cpu():
    a, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + c.ru_utime + c.ru_stime

def graph():
    x = Tensor(rng.standard_normal((B, 1, 28, 28)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, B).astype(np.int32))
    h = x.conv2d(w1, b1).relu().max_pool2d(2).reshape(B, -1)
    loss = (h @ w2 + b2).sparse_categorical_crossentropy(y)
    if phase == "fwd":
        return [loss]
    for p in params:
        p.grad = None
    loss.backward()
    return [loss] + [p.assign(p.detach() - 0.01 * p.grad) for p in params]

outs = graph()
root = UOp.sink(*(t.uop for t in outs))
backend = get_backend(dev)
t = cpu()
backend.lower(cache_key(root)[0])
lower = cpu() - t
progs = compiled(get_backend("python"), root)
flops = [estimate(p.program).flops for p in progs]
t = cpu()
Tensor.realize_all(*outs)
first = cpu() - t
times = []
for _ in range({steps}):
    outs = graph()
    t = cpu()
    Tensor.realize_all(*outs)
    times.append(cpu() - t)
# one more call that prints its launches (UOPIR_DEBUG=2), each timed in this thread's CPU time
import types
import uopir.backends.realize as R
R.time = types.SimpleNamespace(perf_counter=time.thread_time)
os.environ["UOPIR_DEBUG"] = "2"
Tensor.realize_all(*graph())
print("RESULT", len(progs), f"{{lower:.3f}}", f"{{first:.3f}}", f"{{statistics.median(times) * 1e3:.2f}}", sum(flops))
for p, f in zip(progs, flops):
    print("KERNEL", p.name, f)
"""


def _breakdown(args: argparse.Namespace, label: str, tree: str | None) -> None:
    """The convpool breakdown (see the module docstring) for the uopir under `tree` (None: this checkout)."""
    fwd: tuple[float, int] | None = None
    for phase in ("fwd", "step"):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, UOPIR_DEVICE=args.device, UOPIR_CACHE_DIR=cache)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env.pop("UOPIR_DEBUG", None)
            code = BREAKDOWN.format(tree=tree, root=tree or os.path.abspath(ROOT), batch=args.batch, phase=phase,
                                    device=args.device, steps=args.steps)
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        lines = r.stdout.splitlines()
        res = next((ln.split()[1:] for ln in lines if ln.startswith("RESULT ")), None)
        if r.returncode != 0 or res is None:
            err = r.stderr.strip().splitlines()
            print(f"breakdown model=convpool impl={label} phase={phase} failed=({err[-1] if err else r.returncode})")
            return
        n, lower, first, steady, flops = res
        ratio = "" if fwd is None else \
            f" ratio_to_fwd={float(steady) / fwd[0]:.2f} flops_ratio_to_fwd={int(flops) / fwd[1]:.2f}"
        print(f"breakdown model=convpool impl={label} device={args.device} batch={args.batch} phase={phase} "
              f"kernels={n} lower_cpu_s={lower} first_cpu_s={first} steady_cpu_ms={steady} flops={flops}{ratio}",
              flush=True)
        if fwd is None:
            fwd = (float(steady), int(flops))
        # the last call's launches (UOPIR_DEBUG=2 lines on stderr: `*** <device> <n> <name> arg <k> tm <us>us ...`)
        runs = [ln.split() for ln in r.stderr.splitlines() if ln.startswith("*** ") and " tm " in ln][-int(n):]
        us = {f[3]: f[f.index("tm") + 1].removesuffix("us") for f in runs}
        kflops = [ln.split()[1:] for ln in lines if ln.startswith("KERNEL ")]
        for i, (name, kf) in enumerate(kflops, 1):
            print(f"kernel model=convpool impl={label} phase={phase} n={i} name={name} flops={kf} "
                  f"run_cpu_us={us.get(name, '?')}")


if __name__ == "__main__":
    main()
