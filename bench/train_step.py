"""One training step (forward, backward, AdamW update) of examples/train_digits.py's MLP and CNN: the first step in a
fresh process (building, scheduling and compiling everything: `first`), the first jitted replay, and the steady
state (the median of later jitted steps), beside tinygrad running the same models when it is installed.

    python3 bench/train_step.py [--device c] [--steps 20] [--batch 64]

Prints one line per model and implementation:
    train_step model=<mlp|cnn> impl=<uopir-DEVICE|tinygrad> first=<s> replay=<s> steady_ms=<ms> steps=<n>
Each figure comes from a fresh subprocess (no compile cache is reused between models; the disk cache of earlier
runs is, as in normal use: pass `--cold` to give each run an empty one).
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


def _run(code: str, env: dict[str, str]) -> tuple[str, str, str] | None:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        print(f"  (failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode})")
        return None
    first, replay, steady = r.stdout.strip().splitlines()[-1].split()
    return first, replay, steady


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="c")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--cold", action="store_true", help="an empty compile cache for each uopir run")
    args = ap.parse_args()
    try:
        import tinygrad  # noqa: F401
        have_tinygrad = True
    except ImportError:
        have_tinygrad = False
    for model in ("mlp", "cnn"):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, UOPIR_DEVICE=args.device)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if args.cold:
                env["UOPIR_CACHE_DIR"] = cache
            fmt = dict(model=model, steps=args.steps, batch=args.batch, examples=os.path.join(ROOT, "examples"))
            got = _run(UOPIR.format(**fmt), env)
            if got:
                print(f"train_step model={model} impl=uopir-{args.device} first={got[0]} replay={got[1]} "
                      f"steady_ms={got[2]} steps={args.steps}", flush=True)
            if have_tinygrad:
                got = _run(TINYGRAD.format(**fmt), dict(os.environ))
                if got:
                    print(f"train_step model={model} impl=tinygrad first={got[0]} replay={got[1]} "
                          f"steady_ms={got[2]} steps={args.steps}", flush=True)
            else:
                print(f"train_step model={model} impl=tinygrad skipped=not-installed", flush=True)


if __name__ == "__main__":
    main()
