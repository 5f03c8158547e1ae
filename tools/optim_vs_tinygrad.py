"""Step uopir.nn.optim's optimizers and uopir.nn.lr_scheduler's schedules beside tinygrad's own, on the same initial
weights and gradients, and print the largest difference of each (a check run by hand, not part of `make test`).

    python tools/optim_vs_tinygrad.py --peers /tmp/peers/bin/python [--tinygrad-src CHECKOUT]

The peer interpreter (one with tinygrad installed) runs this file with --peer-out: it reads the shared inputs from an
.npz file and writes tinygrad's weights after each case. The schedules are compared too when --tinygrad-src names a
tinygrad source checkout (its extra/lr_scheduler.py is not in the installed package).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SHAPES = [(3, 4), (6, 2), (5,)]
STEPS = 4
# name -> (uopir class, kwargs); tinygrad's class of the same name takes the same kwargs
CASES: dict[str, tuple[str, dict]] = {
    "SGD-nesterov": ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    "AdamW": ("AdamW", {"lr": 0.05, "weight_decay": 0.1}),
    "LAMB": ("LAMB", {"lr": 0.05, "weight_decay": 0.1}),
    "LAMB-adam": ("LAMB", {"lr": 0.05, "weight_decay": 0.1, "adam": True}),
    "LARS": ("LARS", {"lr": 0.5}),
    "LARS-popular": ("LARS", {"lr": 0.5, "classic": False, "nesterov": True, "weight_decay": 0.01}),
    "Muon": ("Muon", {"lr": 0.1}),
    "Muon-plain": ("Muon", {"lr": 0.1, "nesterov": False, "weight_decay": 0.0}),
}


# name -> (schedule class, positional args after the optimizer, steps); ReduceLROnPlateau is stepped with METRICS
SCHEDULES: dict[str, tuple[str, tuple, int]] = {
    "MultiStepLR": ("MultiStepLR", ([2, 4], 0.5), 6),
    "CosineAnnealingLR": ("CosineAnnealingLR", (4, 0.01), 6),
    "OneCycleLR": ("OneCycleLR", (1.0, 10.0, 100.0, 10, 0.3), 10),
    "ReduceLROnPlateau": ("ReduceLROnPlateau", ("min", 0.5, 1, 0.1), 7),
}
METRICS = [10.0, 9.0, 9.5, 8.0, 7.5, 7.1, 7.0]


def _lrs(Tensor, optim, sched_mod, cls: str, args: tuple, steps: int) -> np.ndarray:  # noqa: N803
    opt = optim.SGD([Tensor(np.ones(2, np.float32))], lr=0.1)
    s = getattr(sched_mod, cls)(opt, *args)
    out = [float(opt.lr.numpy().reshape(-1)[0])]
    for k in range(steps):
        s.step(METRICS[k]) if cls == "ReduceLROnPlateau" else s.step()
        out.append(float(opt.lr.numpy().reshape(-1)[0]))
    return np.array(out)


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {f"w{i}": 2 * rng.standard_normal(s).astype(np.float32) for i, s in enumerate(SHAPES)}
    out.update({f"g{t}_{i}": rng.standard_normal(s).astype(np.float32) for t in range(STEPS)
                for i, s in enumerate(SHAPES)})
    return out


def _run(Tensor, optim, data: dict[str, np.ndarray], cls: str, kw: dict) -> list[np.ndarray]:  # noqa: N803
    ps = [Tensor(data[f"w{i}"].copy()) for i in range(len(SHAPES))]
    opt = getattr(optim, cls)(ps, **kw)
    for t in range(STEPS):
        for i, p in enumerate(ps):
            p.grad = Tensor(data[f"g{t}_{i}"])
        opt.step()
    return [p.numpy() for p in ps]


def _peer(inp: str, out: str, src: str | None) -> None:
    from tinygrad import Tensor
    from tinygrad.helpers import Context
    from tinygrad.nn import optim
    data = dict(np.load(inp))
    res: dict[str, np.ndarray] = {}
    with Context(TRAINING=1):
        for name, (cls, kw) in CASES.items():
            for i, w in enumerate(_run(Tensor, optim, data, cls, kw)):
                res[f"{name}/{i}"] = w
        if src:
            sys.path.insert(0, src)
            from extra import lr_scheduler
            for name, (cls, sargs, steps) in SCHEDULES.items():
                res[f"lr/{name}"] = _lrs(Tensor, optim, lr_scheduler, cls, sargs, steps)
    np.savez(out, **res)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", help="python interpreter with tinygrad installed")
    ap.add_argument("--tinygrad-src", help="a tinygrad source checkout, to compare the schedules (extra/)")
    ap.add_argument("--peer-in", help=argparse.SUPPRESS)
    ap.add_argument("--peer-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer_out:
        _peer(args.peer_in, args.peer_out, args.tinygrad_src)
        return 0
    if not args.peers:
        ap.error("--peers PYTHON is required (an interpreter with tinygrad installed)")
    if not Path(args.peers).is_file():
        ap.error(f"--peers: no interpreter at {args.peers}")
    if args.tinygrad_src and not (Path(args.tinygrad_src) / "extra" / "lr_scheduler.py").is_file():
        ap.error(f"--tinygrad-src: no extra/lr_scheduler.py under {args.tinygrad_src}")
    from uopir import Tensor
    from uopir.nn import optim
    data = _inputs()
    with tempfile.TemporaryDirectory() as d:
        inp, out = f"{d}/in.npz", f"{d}/out.npz"
        np.savez(inp, **data)
        cmd = [args.peers, __file__, "--peer-in", inp, "--peer-out", out]
        if args.tinygrad_src:
            cmd += ["--tinygrad-src", str(Path(args.tinygrad_src).resolve())]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(f"optim_vs_tinygrad: the peer failed (exit {r.returncode}):\n{r.stderr[-2000:]}", file=sys.stderr)
            return 1
        theirs = dict(np.load(out))
    Tensor.training = True
    worst = 0.0
    for name, (cls, kw) in CASES.items():
        ours = _run(Tensor, optim, data, cls, kw)
        diff = max(float(np.abs(a - theirs[f"{name}/{i}"]).max()) for i, a in enumerate(ours))
        moved = max(float(np.abs(a - data[f"w{i}"]).max()) for i, a in enumerate(ours))
        print(f"{name:14s} max |uopir - tinygrad| = {diff:.2e}   (largest weight change {moved:.3f})")
        worst = max(worst, diff)
    if args.tinygrad_src:
        from uopir.nn import lr_scheduler
        for name, (cls, sargs, steps) in SCHEDULES.items():
            ours_lr = _lrs(Tensor, optim, lr_scheduler, cls, sargs, steps)
            diff = float(np.abs(ours_lr - theirs[f"lr/{name}"]).max())
            print(f"{name:18s} max |lr uopir - lr tinygrad| = {diff:.2e} over {steps} steps (lr {ours_lr.min():.4g}.."
                  f"{ours_lr.max():.4g})")
            worst = max(worst, diff)
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
