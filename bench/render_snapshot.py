"""Render snapshot: a digest per (device program, emitter), to show that a renderer refactor changes no generated code.

Collects every distinct device.program of the differential suite (unit_tests/differential_cases.py) lowered for a
cpu target (`c`: the host's vectors; `cpu`: scalar code) and for the generic `gpu` target, plus the cold-start
bench's 512x512 matmul and small CNN forward (bench/cold_start.py) lowered for `c`, and renders each with every
emitter that runs without a device: C (restrict and aliasing variants), LLVM IR (noalias and not), the MLIR export
(xDSL), OpenCL C and CUDA C. A rendering that is a located error records the error's text instead, so a changed
message shows too. Writes one JSON object, `{"<target>/<case>#<n> <emitter>": "<sha256 of the text>", ...}`, plus a
`program` digest per program (its printed IR: a changed lowering is told apart from a changed renderer).

    python3 bench/render_snapshot.py OUT.json [--quick]          # PYTHONPATH picks the checkout to snapshot
    python3 bench/render_snapshot.py --diff BEFORE.json AFTER.json

`--quick` takes every fourth differential case (a smoke run); the check of a refactor is the full run on both
checkouts and an empty `--diff`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Callable


def _root() -> str:
    """The checkout whose uopir is imported (PYTHONPATH picks it): its unit_tests/ and examples/ are used too."""
    import uopir

    return os.path.dirname(os.path.dirname(os.path.abspath(uopir.__file__)))

TARGETS = {"c": ("c", "c-alias", "llvm", "llvm-alias", "mlir"), "cpu": ("c", "llvm", "mlir"),
           "gpu": ("opencl", "cuda")}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def emitters() -> dict[str, Callable[[object], str]]:
    """Emitter name -> a function rendering one device.program to text."""
    from uopir.backends.c.renderer import CRenderer
    from uopir.backends.cuda.language import CUDA
    from uopir.backends.gpu.renderer import GpuRenderer
    from uopir.backends.llvm.renderer import LLVMRenderer
    from uopir.backends.opencl.language import OPENCL

    out: dict[str, Callable[[object], str]] = {
        "c": CRenderer().render, "c-alias": CRenderer(restrict=False).render,
        "llvm": LLVMRenderer().render, "llvm-alias": LLVMRenderer(noalias=False).render,
        "opencl": GpuRenderer(OPENCL).render, "cuda": GpuRenderer(CUDA).render,
    }
    try:
        from uopir.backends.mlir.export import export_text

        out["mlir"] = export_text  # type: ignore[assignment]
    except ImportError:  # no xDSL here: the snapshot says so (a diff then shows the emitter missing)
        pass
    return out


def bench_programs(target: str) -> list[tuple[str, object]]:
    """The device programs of bench/cold_start.py's matmul512 and cnn, lowered for `target`."""
    import numpy as np

    from uopir import Tensor
    from uopir.dialects import device as D
    from uopir.ir.regions import regions_of
    from uopir.ir.uop import UOp
    from uopir.passes.manager import PassManager

    sys.path.insert(0, os.path.join(_root(), "examples"))
    import cnn

    rng = np.random.default_rng(0)
    a = Tensor(rng.standard_normal((512, 512), dtype=np.float32), device="python")
    b = Tensor(rng.standard_normal((512, 512), dtype=np.float32), device="python")
    p = {k: Tensor(v, device="python") for k, v in cnn.init_params().items()}
    x = Tensor(np.random.default_rng(1).standard_normal((8, 1, 28, 28), dtype=np.float32), device="python")
    pm = PassManager.parse(f"default{{target={target}}}")
    out: list[tuple[str, object]] = []
    for name, t in (("matmul512", a @ b), ("cnn", cnn.forward(x, p))):
        lowered = pm.run(UOp.sink(t.uop))
        for u in lowered.toposort():
            out.extend((name, r) for r in regions_of(u) if r.op is D.PROGRAM)
    return out


def snapshot(quick: bool) -> dict[str, str]:
    sys.path.insert(0, os.path.join(_root(), "unit_tests"))
    import differential_cases as dc

    from uopir.ir.diagnostics import IRError

    render = emitters()
    cases = dc.CASES[::4] if quick else dc.CASES
    out: dict[str, str] = {}
    for target, names in TARGETS.items():
        progs = dc.device_programs(target, cases)
        if target == "c":
            progs += bench_programs(target)
        seen: dict[str, int] = {}
        for case, prog in progs:
            n = seen[case] = seen.get(case, -1) + 1
            key = f"{target}/{case}#{n}"
            out[f"{key} program"] = _digest(str(prog))
            for e in names:
                if e not in render:
                    out[f"{key} {e}"] = "missing"
                    continue
                try:
                    text = render[e](prog)
                except IRError as err:
                    text = "error: " + str(err)
                out[f"{key} {e}"] = _digest(text)
    return out


def diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    lines = [f"only before: {k}" for k in sorted(before.keys() - after.keys())]
    lines += [f"only after: {k}" for k in sorted(after.keys() - before.keys())]
    lines += [f"changed: {k}" for k in sorted(before.keys() & after.keys()) if before[k] != after[k]]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="the JSON file to write")
    ap.add_argument("--quick", action="store_true", help="every fourth differential case only")
    ap.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two snapshots")
    args = ap.parse_args()
    if args.diff:
        with open(args.diff[0]) as f0, open(args.diff[1]) as f1:
            lines = diff(json.load(f0), json.load(f1))
        print("\n".join(lines) if lines else "identical")
        return 1 if lines else 0
    if not args.out:
        ap.error("give the JSON file to write (or --diff BEFORE AFTER)")
    snap = snapshot(args.quick)
    with open(args.out, "w") as f:
        json.dump(snap, f, indent=0, sort_keys=True)
    renders = sum(1 for k in snap if not k.endswith(" program"))
    print(f"render_snapshot: {len(snap) - renders} programs, {renders} renderings -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
