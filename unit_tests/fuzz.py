#!/usr/bin/env python3
"""A standing fuzz target: run it for minutes while developing, CI runs a short derandomized slice of it.

Six targets, each with a per-case timeout; every failing input is written to the output folder with what was
wrong, so it can be replayed (`uop-opt FILE -p PIPELINE`, or the printed Python for a Tensor program):

  text      mutated .uop inputs (the lit files and printed random graphs, with tokens and characters deleted,
            duplicated, swapped or replaced) through `uop-opt` with a random registered pipeline: the exit code is
            0 or 1, never a traceback or an internal error, and a successful output parses back to the same text.
  pipeline  random valid graphs through every registered pass and named pipeline: the output verifies, prints
            and parses back to the same graph, and wherever the reference interpreter can evaluate the input, it
            evaluates the output to bit-identical values (and the same written buffers).
  tensor    random Tensor programs (elementwise, broadcasting, reductions, movement) against numpy.
  names     hostile program and variable names (unit_tests/fuzz_names.py) through a random emitter: the source still
            compiles or parses with the real tool, the program still computes the right values, and the raw name
            appears nowhere unescaped.
  cache     random faults in the on-disk compile cache (unit_tests/fuzz_cache.py: truncation, flipped bytes, swapped
            or forged entries, a folder in an entry's place, a garbled size index), then fresh processes: each exits
            0 with the right values, warns once per damaged entry, and leaves a healthy cache.
  lowered   random tensor programs through the optimized device pipelines without kernel-simplify
            (unit_tests/fuzz_lowered.py), compiled by the C backend and run: the values the interpreter gives for
            the same lowered programs (it runs hardware ids data-parallel; a cpu runs them as a loop). Not in CI.

    python unit_tests/fuzz.py --seconds 300                  # all targets, a fresh seed
    python unit_tests/fuzz.py --target tensor --seed 7 --iterations 500 --out fuzz-failures
    make fuzz FUZZ_SECONDS=600
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # graphgen lives beside this file

from fuzz_cache import cache_case  # noqa: E402 - the cache-fault target, beside this file
from fuzz_names import names_case  # noqa: E402 - the hostile-name target, beside this file

import uopir  # noqa: E402,F401 - registers the dialects
from uopir.ir.diagnostics import IRError  # noqa: E402
from uopir.ir.dtype import dtypes  # noqa: E402
from uopir.ir.parser import parse_ir  # noqa: E402
from uopir.ir.printer import print_ir  # noqa: E402
from uopir.ir.uop import UOp  # noqa: E402

TARGETS = ("text", "pipeline", "tensor", "names", "cache", "lowered")
_DIRECTIVE = re.compile(r"^\s*//\s*(RUN|CHECK|[A-Z]+(-NEXT|-SAME|-NOT|-DAG|-LABEL|-EMPTY)?):")


class CaseTimeout(Exception):
    """One fuzz case ran past its time limit (a hang or a super-linear pass)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise CaseTimeout in the main thread after `seconds` (no limit where SIGALRM does not exist)."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"case ran past {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Failure:
    target: str
    case: int
    why: str
    input: str
    pipeline: str = ""


@dataclass
class Report:
    cases: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    def summary(self) -> str:
        runs = ", ".join(f"{t}: {n}" for t, n in self.cases.items())
        return f"fuzz: {sum(self.cases.values())} cases ({runs}), {len(self.failures)} failures"


# ---- pipelines -------------------------------------------------------------------------------------------------------
def user_pipelines() -> list[str]:
    """Every registered pass and named pipeline a user can run (not those of the test-pass module), with default
    options."""
    from uopir.passes import registry

    registry.load_passes()
    names = [n for n, p in registry.PASSES.items() if not _is_test_code(p.fn)]
    names += [n for n, p in registry.PIPELINES.items() if not _is_test_code(p.expand)]
    return sorted(set(names))


def _is_test_code(fn: Callable) -> bool:
    return getattr(fn, "__module__", "") == "uopir.passes.testing"


def random_pipeline(rng: random.Random, names: list[str]) -> str:
    steps = [rng.choice(names) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.2:
        steps.append(f"any({rng.choice(names)})")
    return ",".join(steps)


# ---- target: text ----------------------------------------------------------------------------------------------------
def lit_inputs() -> list[str]:
    out = []
    for p in sorted((ROOT / "lit_tests").rglob("*.uop")):
        if "Output" in p.parts:
            continue
        text = p.read_text(encoding="utf-8")
        out.append("\n".join(ln for ln in text.split("\n") if not _DIRECTIVE.match(ln)))
    return out


_PIECE = re.compile(r"\s+|%[\w.$-]+|[A-Za-z_][\w.]*|-?\d[\w.+-]*|\"(?:[^\"\\\n]|\\.)*\"|\S")
_NOISE = ["%", "{", "}", "(", ")", ",", ":", "=", "<", ">", "x", "0", "-1", "1e999", "nan", "\"", "//", "({", "})",
          "tensor<", "core.add", "kernel.range", "@", "\u00e9", "\x00", "\t", "\n", "9" * 50, "0x" + "f" * 40]


def mutate(rng: random.Random, text: str) -> str:
    """One to four edits, on tokens (keeping the whitespace between them, so most lines stay lines) or on
    characters."""
    pieces = _PIECE.findall(text) if rng.random() < 0.7 else None
    words = [i for i, p in enumerate(pieces) if not p.isspace()] if pieces else []
    for _ in range(1 if rng.random() < 0.6 else rng.randint(2, 4)):
        if words:  # token-level edits keep most of the structure, so the parser goes deep
            i = rng.choice(words)
            kind = rng.randrange(4)
            if kind == 0:
                pieces[i] = ""
            elif kind == 1:
                pieces[i] = pieces[i] + " " + pieces[rng.choice(words)]
            elif kind == 2:
                j = rng.choice(words)
                pieces[i], pieces[j] = pieces[j], pieces[i]
            else:
                pieces[i] = rng.choice(_NOISE)
        elif text:
            i = rng.randrange(len(text))
            kind = rng.randrange(3)
            if kind == 0:
                text = text[:i] + text[i + 1:]
            elif kind == 1:
                text = text[:i] + rng.choice(_NOISE) + text[i:]
            else:
                text = text[:i] + text[i:][::-1][:rng.randint(0, 5)] + text[i:]
    return "".join(pieces) if pieces is not None else text


def run_uop_opt(argv: list[str], stdin_text: str) -> tuple[int, str, str]:
    """uop-opt in this process (fast), with stdin given as text."""
    from uopir.tools.uop_opt import main

    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin_text)
    try:
        rc = main(argv, out, err)
    finally:
        sys.stdin = old_stdin
    return rc, out.getvalue(), err.getvalue()


def text_case(rng: random.Random, corpus: list[str], pipelines: list[str]) -> tuple[str, str, str | None]:
    """(input, pipeline, why it failed or None)."""
    src = mutate(rng, rng.choice(corpus))
    pipeline = random_pipeline(rng, pipelines)
    rc, out, err = run_uop_opt(["-", "-p", pipeline], src)
    if rc not in (0, 1):
        return src, pipeline, f"exit code {rc}: {err.strip()[:2000]}"
    if "internal error" in err or "Traceback" in err:
        return src, pipeline, f"internal error: {err.strip()[:2000]}"
    if rc == 1 and not err.strip():
        return src, pipeline, "exit code 1 with no message"
    if rc == 0:
        try:
            again = print_ir(parse_ir(out, "<output>"))
        except IRError as e:
            return src, pipeline, f"the output does not parse back: {e.format()}"
        if again != out:
            return src, pipeline, "the output does not print back to the same text"
    return src, pipeline, None


# ---- target: pipeline ------------------------------------------------------------------------------------------------
def sample_buffer(rng: np.random.Generator, u: UOp) -> np.ndarray:
    from uopir.dialects.semantics import np_dtype

    d = u.dtype
    shape = tuple(u.shape)
    n = int(np.prod(shape)) if shape else 1
    if d.is_bool:
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if d.is_float:
        pool = np.array([0.0, -0.0, 1.0, -1.5, np.nan, np.inf, -np.inf, 1e-3], np.float64)
        vals = np.where(rng.random(n) < 0.4, rng.choice(pool, n), rng.standard_normal(n) * 50)
        with np.errstate(all="ignore"):
            return vals.astype(np_dtype(d)).reshape(shape)
    info = np.iinfo(np_dtype(d))
    return rng.integers(info.min, info.max, n, endpoint=True, dtype=np_dtype(d)).reshape(shape)


def evaluate_copy(root: UOp, buffers: dict[int, np.ndarray]) -> tuple[Any, dict[int, np.ndarray]]:
    from uopir.backends.python import evaluate

    bufs = {k: v.copy() for k, v in buffers.items()}
    return evaluate(root, bufs), bufs


def pipeline_case(rng: random.Random, pipelines: list[str]) -> tuple[str, str, str | None]:
    from graphgen import random_graph

    from uopir.dialects import tensor as T
    from uopir.dialects.semantics import values_equal
    from uopir.ir.verify import verify
    from uopir.passes.manager import PassManager

    g = random_graph(rng.getrandbits(32), rng.randint(2, 30))
    text = print_ir(g)
    pipeline = rng.choice(pipelines) if rng.random() < 0.7 else random_pipeline(rng, pipelines)
    try:
        out = PassManager.parse(pipeline).run(g)
    except IRError:
        return text, pipeline, None  # a pass may refuse an input with a diagnostic
    except Exception as e:  # noqa: BLE001 - a crash is the finding
        return text, pipeline, f"{type(e).__name__}: {e}"
    try:
        verify(out)
    except IRError as e:
        return text, pipeline, f"the output does not verify: {e.format()}"
    printed = print_ir(out)
    if parse_ir(printed, "<output>") is not out:
        return text, pipeline, "the output does not round-trip through text"
    nrng = np.random.default_rng(rng.getrandbits(32))
    buffers = {u.arg[0]: sample_buffer(nrng, u) for u in g.toposort() if u.op is T.BUFFER}
    try:
        before, b1 = evaluate_copy(g, buffers)
    except Exception:  # noqa: BLE001 - not every random graph is executable (kernel/device ops, unbound vars)
        return text, pipeline, None
    from uopir.dialects.semantics import np_dtype

    fresh = {u.arg[0]: np.zeros(u.arg[2], np_dtype(u.dtype)) for u in out.toposort()
             if u.op is T.BUFFER and u.arg[0] not in buffers}  # buffers a schedule allocates (tensor-to-kernel)
    try:
        after, b2 = evaluate_copy(out, {**fresh, **buffers})
    except Exception as e:  # noqa: BLE001
        return text, pipeline, f"the input evaluates but the output does not: {type(e).__name__}: {e}"
    if not values_equal(before, after):
        return text, pipeline, f"the pass changed a value: {before!r} -> {after!r}"
    for k in buffers:
        if not values_equal(b1[k], b2[k]):
            return text, pipeline, f"the pass changed what buffer {k} holds"
    return text, pipeline, None


# ---- target: tensor --------------------------------------------------------------------------------------------------
@dataclass
class Prog:
    """A random Tensor program kept as Python text (for the failure file) with its numpy twin."""

    lines: list[str]
    t: Any  # the Tensor
    n: np.ndarray


def _unary(rng: random.Random, p: Prog, is_float: bool) -> None:
    if is_float:
        name, tf, nf = rng.choice([
            ("neg", lambda t: -t, lambda a: -a),
            ("abs", lambda t: t.abs(), np.abs),
            ("relu", lambda t: t.relu(), lambda a: np.maximum(a, np.float32(0))),
            ("exp", lambda t: (t * 0.25).exp(), lambda a: np.exp(a * np.float32(0.25))),
            ("log", lambda t: (t.abs() + 1).log(), lambda a: np.log(np.abs(a) + np.float32(1))),
            ("sqrt", lambda t: t.abs().sqrt(), lambda a: np.sqrt(np.abs(a))),
            ("sigmoid", lambda t: t.sigmoid(), lambda a: (1 / (1 + np.exp(-a.astype(np.float64)))).astype(a.dtype)),
            ("square", lambda t: t * t, lambda a: a * a),
        ])
    else:
        name, tf, nf = rng.choice([
            ("neg", lambda t: -t, lambda a: -a),
            ("double", lambda t: t + t, lambda a: a + a),
            ("square", lambda t: t * t, lambda a: a * a),
        ])
    p.lines.append(f"x = unary_{name}(x)")
    p.t, p.n = tf(p.t), nf(p.n)


def _binary(rng: random.Random, p: Prog, is_float: bool, make: Callable[[tuple[int, ...]], tuple[Any, np.ndarray]]
            ) -> None:
    shape = list(p.n.shape)
    # a broadcastable partner: some dims set to 1, maybe fewer leading dims
    other = [1 if rng.random() < 0.3 else s for s in shape]
    other = other[rng.randint(0, len(other)):] if other and rng.random() < 0.3 else other
    ot, on = make(tuple(other))
    ops = [("add", lambda a, b: a + b, lambda a, b: a + b), ("sub", lambda a, b: a - b, lambda a, b: a - b),
           ("mul", lambda a, b: a * b, lambda a, b: a * b),
           ("maximum", lambda a, b: a.maximum(b), np.maximum), ("minimum", lambda a, b: a.minimum(b), np.minimum),
           ("where", lambda a, b: (a < b).where(a, b), lambda a, b: np.where(a < b, a, b))]
    name, tf, nf = rng.choice(ops)
    p.lines.append(f"x = {name}(x, y{tuple(other)})")
    p.t, p.n = tf(p.t, ot), nf(p.n, on)


def _reduce(rng: random.Random, p: Prog) -> None:
    if p.n.ndim == 0:
        return
    axis = rng.randrange(p.n.ndim)
    keep = rng.random() < 0.5
    name = rng.choice(["sum", "max", "min"])
    if p.n.shape[axis] == 0 and name != "sum":
        return
    p.lines.append(f"x = x.{name}(axis={axis}, keepdim={keep})")
    p.t = getattr(p.t, name)(axis=axis, keepdim=keep)
    p.n = getattr(p.n, name)(axis=axis, keepdims=keep)


def _movement(rng: random.Random, p: Prog) -> None:
    a, nd = p.n, p.n.ndim
    kind = rng.randrange(5)
    if kind == 0 and nd:
        perm = list(range(nd))
        rng.shuffle(perm)
        p.lines.append(f"x = x.permute{tuple(perm)}")
        p.t, p.n = p.t.permute(*perm), np.transpose(a, perm)
    elif kind == 1 and nd:
        ax = rng.randrange(nd)
        p.lines.append(f"x = x.flip({ax})")
        p.t, p.n = p.t.flip(ax), np.flip(a, ax)
    elif kind == 2:
        shape = (a.size,) if rng.random() < 0.5 or a.size == 0 else (1, a.size, 1)
        p.lines.append(f"x = x.reshape{shape}")
        p.t, p.n = p.t.reshape(shape), a.reshape(shape)
    elif kind == 3 and nd:
        pads = [(rng.randint(0, 2), rng.randint(0, 2)) for _ in range(nd)]
        p.lines.append(f"x = x.pad({pads})")
        p.t, p.n = p.t.pad(pads), np.pad(a, pads)
    elif kind == 4 and nd:
        sl = []
        for s in a.shape:
            lo = rng.randint(0, s)
            sl.append((lo, rng.randint(lo, s)))
        p.lines.append(f"x = x.shrink({sl})")
        p.t, p.n = p.t.shrink(sl), a[tuple(slice(lo, hi) for lo, hi in sl)]


def tensor_program(rng: random.Random, device: str | None = None, dtype: str | None = None) -> tuple[Prog, bool]:
    """A random Tensor program (on `device`) and whether it computes in floats. Without `dtype` it computes in float32
    or int32 and its numpy twin is exact; with one (any uopir dtype name but bool) the inputs are converted to it and
    the twin stays float32/int32 (for callers that compare with the reference interpreter instead)."""
    from uopir import Tensor

    d = None if dtype is None else dtypes.from_name(dtype)
    is_float = rng.random() < 0.7 if d is None else d.is_float
    npd = np.float32 if is_float else np.int32
    nrng = np.random.default_rng(rng.getrandbits(32))

    def make(shape: tuple[int, ...]) -> tuple[Any, np.ndarray]:
        if is_float:
            arr = (nrng.standard_normal(shape) * 2).astype(npd)
        else:
            arr = nrng.integers(0 if d is not None and d.kind == "uint" else -100, 100, shape).astype(npd)
        return Tensor(arr, dtype=d, device=device), arr

    shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(0, 3)))
    t, n = make(shape)
    p = Prog([f"x = Tensor(random {dtype or np.dtype(npd).name} of shape {shape})"], t, n)
    for _ in range(rng.randint(1, 8)):
        kind = rng.randrange(4)
        if kind == 0:
            _unary(rng, p, is_float)
        elif kind == 1:
            _binary(rng, p, is_float, make)
        elif kind == 2:
            _reduce(rng, p)
        else:
            _movement(rng, p)
    return p, is_float


def tensor_case(rng: random.Random) -> tuple[str, str, str | None]:
    p, is_float = tensor_program(rng)
    text = "\n".join(p.lines)
    try:
        got = p.t.numpy()
    except Exception as e:  # noqa: BLE001
        return text, "", f"{type(e).__name__}: {e}"
    want = np.asarray(p.n)
    if got.shape != want.shape:
        return text, "", f"shape {got.shape}, numpy gives {want.shape}"
    if is_float:
        if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-4, atol=1e-4, equal_nan=True):
            return text, "", f"values differ from numpy: max abs error {np.nanmax(np.abs(got - want))}"
    elif not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
        return text, "", "integer values differ from numpy"
    return text, "", None


# ---- driver ----------------------------------------------------------------------------------------------------------
def run(targets: tuple[str, ...] = TARGETS, seed: int = 0, iterations: int | None = None, seconds: float | None = None,
        timeout: float = 20.0, out_dir: Path | None = None, log: Callable[[str], None] | None = None) -> Report:
    """Run the targets round-robin until `iterations` cases each or `seconds` in all, whichever comes first."""
    rng = random.Random(seed)
    report = Report({t: 0 for t in targets})
    pipelines = user_pipelines()
    corpus = lit_inputs()
    if "text" in targets:
        from graphgen import random_graph

        corpus += [print_ir(random_graph(rng.getrandbits(32), rng.randint(3, 20)), generic=rng.random() < 0.3)
                   for _ in range(40)]
    start = time.monotonic()
    i = 0
    while True:
        if seconds is not None and time.monotonic() - start >= seconds:
            break
        if iterations is not None and all(report.cases[t] >= iterations for t in targets):
            break
        target = targets[i % len(targets)]
        i += 1
        if iterations is not None and report.cases[target] >= iterations:
            continue
        case_rng = random.Random(rng.getrandbits(64))
        inp, pipeline = "", ""
        try:
            with time_limit(timeout):
                if target == "text":
                    inp, pipeline, why = text_case(case_rng, corpus, pipelines)
                elif target == "pipeline":
                    inp, pipeline, why = pipeline_case(case_rng, pipelines)
                elif target == "tensor":
                    inp, pipeline, why = tensor_case(case_rng)
                elif target == "names":
                    inp, pipeline, why = names_case(case_rng)
                elif target == "lowered":
                    from fuzz_lowered import lowered_case  # imports the device-lowering tests: only when it runs
                    inp, pipeline, why = lowered_case(case_rng)
                else:
                    inp, pipeline, why = cache_case(case_rng)
        except CaseTimeout as e:
            why = str(e)
        except Exception as e:  # noqa: BLE001 - the fuzzer itself must keep going
            why = f"fuzzer error: {type(e).__name__}: {e}\n{traceback.format_exc()}"
        report.cases[target] += 1
        if why is not None:
            f = Failure(target, report.cases[target], why, inp, pipeline)
            report.failures.append(f)
            if out_dir is not None:
                save_failure(out_dir, seed, f)
            if log:
                log(f"FAIL {target} #{f.case}: {why.splitlines()[0] if why else ''}")
    return report


def save_failure(out_dir: Path, seed: int, f: Failure) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    ext = ".uop" if f.target in ("text", "pipeline", "names") else ".py.txt"
    path = out_dir / f"{f.target}-seed{seed}-case{f.case}{ext}"
    header = json.dumps({"target": f.target, "seed": seed, "case": f.case, "pipeline": f.pipeline})
    why = "\n".join("// " + ln for ln in f.why.splitlines())
    path.write_text(f"// fuzz failure {header}\n{why}\n{f.input}\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="all", help=f"comma-separated targets: {', '.join(TARGETS)}, or all")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: a fresh one, printed)")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this many seconds (default 60)")
    ap.add_argument("--iterations", type=int, default=None, help="stop after this many cases per target")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds allowed per case (default 20)")
    ap.add_argument("--out", default="fuzz-failures", help="folder for failing inputs (default fuzz-failures)")
    a = ap.parse_args(argv)
    targets = TARGETS if a.target == "all" else tuple(t.strip() for t in a.target.split(","))
    bad = [t for t in targets if t not in TARGETS]
    if bad:
        ap.error(f"unknown target {bad[0]!r} (targets: {', '.join(TARGETS)})")
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    seconds = a.seconds if a.seconds is not None or a.iterations is not None else 60.0
    print(f"fuzz: seed {seed}, targets {', '.join(targets)}", flush=True)
    report = run(targets, seed, a.iterations, seconds, a.timeout, Path(a.out), log=lambda s: print(s, flush=True))
    print(report.summary())
    if report.failures:
        print(f"failing inputs written to {a.out}/")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
