"""Cold start: the first realize in a fresh process (lowering, compile, run) of a 512x512 f32 matmul and of a small CNN
forward (examples/cnn.py: 2 convolutions + a linear layer, batch 8, 1x28x28), beside numpy and tinygrad.

Each figure is one fresh subprocess (the best of `--repeat` of them; the machine may be shared). Two figures per run:
the first realize alone (the program's last statement, after the imports and after building the inputs: what
tinygrad's quoted cold figure times, and what issue 10's target is about) and the whole process (from before the
first import to the result in a numpy array). cpu: the process's and its reaped compilers' CPU seconds, a figure that
a loaded machine inflates less than the wall time:
    cold_start program=<matmul512|cnn> impl=uopir-c cache=<empty|warm> first_realize=<s> first_realize_cpu=<s>
        seconds=<s> import=<s> cpu=<s> ratio_first_realize_cpu_over_target=<r> (target <t> s)
    cold_start program=<...> impl=uopir-c-untiered cache=empty ...   (UOPIR_C_TIERED=0: every kernel waits for cc)
    cold_start program=<...> impl=numpy first_op=<s> first_op_cpu=<s> seconds=<s> import=<s> cpu=<s>
    cold_start program=<...> impl=tinygrad first_realize=<s> ... seconds=<s>  (CPU device; skipped when not installed)
    cold_start program=<...> ratio_uopir_empty_over_tinygrad=<r>   (first realize; the issue's target: at most 0.5)
The target is half of tinygrad's cold figure quoted by issue 10 (0.5 s matmul, 2.4 s CNN): 0.25 s and 1.2 s.
`cache=empty` gives the process a fresh compile cache folder (every kernel is compiled); `cache=warm` runs after a
process that compiled the same kernels (they load from the disk cache). On the c device a kernel not in the cache
runs compiled in process by LLVM (tier 0) while cc builds its binary in a detached process (uopir.backends.c.tiered):
`cpu` then counts the process and the compiles it waited for, not a compile still running when the result is there
(the breakdown's bg_cc_cpu shows those); `impl=uopir-c-untiered` is the same run with UOPIR_C_TIERED=0.
Python's bytecode files exist (written by an untimed first run), as they do after an install: a process that may not
write them (PYTHONDONTWRITEBYTECODE=1) recompiles every module, which costs more than the whole cold run. tinygrad
gets a fresh cache folder each run (its cold figure compiles too). Then a breakdown of cold uopir runs by stage, with
an empty and with a warm compile cache (the best of `--repeat` by first-realize CPU; each stage in wall/CPU seconds):
    cold_start breakdown program=<...> cache=<empty|warm|empty-untiered> (wall/cpu seconds) import=<w>/<c>
        setup=<w>/<c> first_realize=<w>/<c> lower=<w>/<c> compile=<w>/<c> tier0=<w>/<c> cc_wait=<w>/<c>
        run=<w>/<c> cc_cpu=<c> bg_cc_cpu=<c> tier0_kernels=<n> total=<w>/<c, with cc_cpu>
(import: numpy and uopir; setup: the inputs; first_realize = lower + compile + run: lower: the pass pipeline alone;
compile: rendering each kernel and starting its C compile (the C backend does it inside the lowering, kernel by
kernel), tier0 (compiling kernels in process with LLVM at their first launch, with any wait for llvmlite's import,
which a thread starts during the lowering) and cc_wait (launches waiting for a C compile still running); run: the
rest (buffers, the kernels, the copy out); cc_cpu: the compiler processes reaped before the result; bg_cc_cpu: those
still running then, waited for after the timing; tier0_kernels: kernels that ran on tier 0), and a profile of one
cold uopir run: where the time goes (import, passes, compile; relative: the profiler slows Python down).

    python3 bench/cold_start.py [--repeat N] [--no-profile] [--root CHECKOUT] [--only-uopir] [--peers PYTHON]

`--root` runs the uopir of another checkout (its folder as the children's working directory: `import uopir` finds
it first), to compare two versions with the same script; `--only-uopir` skips numpy, tinygrad and the profile;
`--peers PYTHON` runs tinygrad with that interpreter (a venv of its own, as bench/core_ops.py takes it).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
UNTIERED = {"UOPIR_C_TIERED": "0"}

# every child prints "seconds import_seconds cpu first_seconds first_cpu" on its last line: the whole process (from
# before `import numpy`) and its last statement alone (the first realize; for numpy the operation), after the imports
# and the inputs; cpu = the process's CPU + the compilers it reaped
CHILD = """
import time, resource
def _cpu():
    ru = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(r.ru_utime + r.ru_stime for r in ru)
t0 = time.perf_counter()
import numpy as np
{imports}
t1 = time.perf_counter()
{setup}
ts, cs = time.perf_counter(), _cpu()
{first}
t2 = time.perf_counter()
c2 = _cpu()
print(t2 - t0, t1 - t0, c2, t2 - ts, c2 - cs)
"""
UOPIR_IMPORTS = "from uopir import Tensor"
MATMUL_UOPIR = ("""
rng = np.random.default_rng(0)
a = Tensor(rng.standard_normal((512, 512), dtype=np.float32), device="c")
b = Tensor(rng.standard_normal((512, 512), dtype=np.float32), device="c")
""", "out = (a @ b).numpy()")
CNN_UOPIR = ("""
import sys; sys.path.insert(0, "examples")
import cnn
p = {k: Tensor(v, device="c") for k, v in cnn.init_params().items()}
x = Tensor(np.random.default_rng(1).standard_normal((8, 1, 28, 28), dtype=np.float32), device="c")
""", "out = cnn.forward(x, p).numpy()")
MATMUL_NUMPY = ("""
rng = np.random.default_rng(0)
a, b = (rng.standard_normal((512, 512), dtype=np.float32) for _ in range(2))
""", "out = a @ b")
CNN_NUMPY = ("""
import sys; sys.path.insert(0, "examples")
import cnn
x = np.random.default_rng(1).standard_normal((8, 1, 28, 28), dtype=np.float32)
params = cnn.init_params()
""", "out = cnn.forward_numpy(x, params)")
TINYGRAD_IMPORTS = "from tinygrad import Tensor"
MATMUL_TINYGRAD = ("""
rng = np.random.default_rng(0)
a = Tensor(rng.standard_normal((512, 512), dtype=np.float32))
b = Tensor(rng.standard_normal((512, 512), dtype=np.float32))
""", "out = (a @ b).numpy()")
CNN_TINYGRAD = ("""
import sys; sys.path.insert(0, "examples")
import cnn
p = {k: Tensor(v) for k, v in cnn.init_params().items()}
x = Tensor(np.random.default_rng(1).standard_normal((8, 1, 28, 28), dtype=np.float32))
def forward(x, p):
    h = x.conv2d(p["w1"], p["b1"], stride=2).relu()
    h = h.conv2d(p["w2"], p["b2"], stride=2).relu()
    return h.flatten(1).linear(p["w3"], p["b3"])
""", "out = forward(x, p).numpy()")
PROGRAMS = {"matmul512": (MATMUL_UOPIR, MATMUL_NUMPY, MATMUL_TINYGRAD), "cnn": (CNN_UOPIR, CNN_NUMPY, CNN_TINYGRAD)}


def child(imports: str, prog: tuple[str, str]) -> str:
    """The timed child program of `prog` (setup, first statement)."""
    return CHILD.format(imports=imports, setup=prog[0], first=prog[1])


QUOTED_TINYGRAD = {"matmul512": 0.5, "cnn": 2.4}  # issue 10: tinygrad 0.14 (CPU, clang) on a 2-core AVX-512 machine
# one cold run timed stage by stage (no profiler: its overhead would be most of the figure). Stages, in wall and CPU
# seconds, each exclusive of the stages nested in it: import (numpy and uopir), setup (the inputs), then the first
# realize: lower (the pipeline), compile (CBackend.compile: render + start the C compile, inside the lowering;
# tier0: LLVM in process at a kernel's first launch; cc_wait: launches waiting for a compile still running), run
# (the rest: buffers, the kernels, the copy out); cc_cpu is the compiler processes' CPU
BREAKDOWN = """
import resource, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def cc_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
w0, c0 = time.perf_counter(), cpu()
import numpy as np
from uopir import Tensor
w1, c1 = time.perf_counter(), cpu()
from uopir.backends.interface import Backend
from uopir.backends.c.runtime import CKernel
from uopir.backends.c import backend as c_backend, compiler as c_compiler
spent = {{k: [0.0, 0.0] for k in ("lower", "render", "tier0", "cc_wait")}}
stack = []  # [wall, cpu] spent by the stages nested in each open stage
tier0_runs = []
def timed(name, fn):
    def wrapper(*a, **k):
        w, c = time.perf_counter(), cpu()
        stack.append([0.0, 0.0])
        try:
            r = fn(*a, **k)
            if name == "tier0":
                tier0_runs.append(r is not None)
            return r
        finally:
            nw, nc = stack.pop()
            dw, dc = time.perf_counter() - w, cpu() - c
            spent[name][0] += dw - nw
            spent[name][1] += dc - nc
            if stack:
                stack[-1][0] += dw
                stack[-1][1] += dc
    return wrapper
Backend.lower = timed("lower", Backend.lower)
c_backend.CBackend.compile = timed("render", c_backend.CBackend.compile)
CKernel._load = timed("cc_wait", CKernel._load)
if hasattr(c_backend, "tier0_address"):
    c_backend.tier0_address = timed("tier0", c_backend.tier0_address)
{setup}
ws, cs = time.perf_counter(), cpu()
{first}
w2, c2 = time.perf_counter(), cpu()
cc_at_result = cc_cpu()
for p in list(getattr(c_compiler, "_RUNNING", ())):  # background compiles still running: their CPU, after the timing
    p.wait()
(lw, lc), (rw, rc), (tw, tc), (ww, wc) = (spent[k] for k in ("lower", "render", "tier0", "cc_wait"))
run_w, run_c = (w2 - ws) - lw - rw - ww - tw, (c2 - cs) - lc - rc - wc - tc
print(f"import={{w1 - w0:.3f}}/{{c1 - c0:.3f}} setup={{ws - w1:.3f}}/{{cs - c1:.3f}} "
      f"first_realize={{w2 - ws:.3f}}/{{c2 - cs:.3f}} lower={{lw:.3f}}/{{lc:.3f}} "
      f"compile={{rw + tw + ww:.3f}}/{{rc + tc + wc:.3f}} tier0={{tw:.3f}}/{{tc:.3f}} cc_wait={{ww:.3f}}/{{wc:.3f}} "
      f"run={{run_w:.3f}}/{{run_c:.3f}} cc_cpu={{cc_at_result:.3f}} bg_cc_cpu={{cc_cpu() - cc_at_result:.3f}} "
      f"tier0_kernels={{sum(tier0_runs)}} total={{w2 - w0:.3f}}/{{c2 - c0 + cc_at_result:.3f}}")
"""
PROFILE = """
import cProfile, pstats, sys, time
import numpy as np
pr = cProfile.Profile()
pr.enable()
from uopir import Tensor
{setup}
{first}
pr.disable()
st = pstats.Stats(pr)
total = st.total_tt
def cum(pred):
    return max((v[3] for k, v in st.stats.items() if pred(k)), default=0.0)
import_s = cum(lambda k: k[2] == "<module>" and k[0].endswith("uopir/__init__.py"))
lower_s = cum(lambda k: k[2] == "lower" and k[0].endswith("backends/interface.py"))
load_passes_s = sum(v[3] for k, v in st.stats.items() if k[2] == "_import" and k[0].endswith("passes/registry.py"))
render_s = cum(lambda k: k[2] == "render" and k[0].endswith("c/renderer.py"))
gen_s = sum(v[3] for k, v in st.stats.items() if k[2] == "_compile_op")
wait_s = cum(lambda k: k[2] == "_load" and k[0].endswith("c/runtime.py"))
print(f"total={{total:.3f}} import_uopir={{import_s:.3f}} lower(passes)={{lower_s:.3f}} "
      f"of_which_loading_passes={{load_passes_s:.3f}} pattern_codegen={{gen_s:.3f}} render_c={{render_s:.3f}} "
      f"waiting_for_cc={{wait_s:.3f}}")
"""


# appended to a timed child after its figures: wait for the detached C compiles still running (their binaries then
# are in the cache, so the next process is a warm one)
# every queued background compile too (a checkout older than wait_background: the running ones only)
WAIT_BACKGROUND = """
from uopir.backends.c import compiler as _cc
if hasattr(_cc, "wait_background"):
    _cc.wait_background()
else:
    for _p in list(getattr(_cc, "_RUNNING", ())):
        _p.wait()
"""


Result = tuple[float, float, float, float, float]  # seconds, import, cpu, first (wall), first cpu


PEERS = sys.executable  # the interpreter that runs tinygrad (--peers: a venv of its own)


def run(code: str, env: dict[str, str], python: str | None = None) -> Result | str:
    out = subprocess.run([python or sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900,
                         cwd=ROOT)
    if out.returncode != 0:
        return f"failed({out.stderr.strip().splitlines()[-1][-160:] if out.stderr.strip() else out.returncode})"
    secs, imp, cpu, first, first_cpu = out.stdout.strip().splitlines()[-1].split()
    return float(secs), float(imp), float(cpu), float(first), float(first_cpu)


def best(results: list[Result | str]) -> Result | str:
    """The run with the least first-statement CPU (the figure the target is about; the least disturbed run)."""
    ok = [r for r in results if not isinstance(r, str)]
    return min(ok, key=lambda r: (r[4], r[3])) if ok else results[0]


def fmt(r: Result | str, first: str = "first_realize") -> str:
    if isinstance(r, str):
        return f"seconds={r}"
    return f"{first}={r[3]:.3f} {first}_cpu={r[4]:.3f} seconds={r[0]:.3f} import={r[1]:.3f} cpu={r[2]:.3f}"


def quoted_ratio(name: str, e: Result) -> str:
    q = QUOTED_TINYGRAD[name]
    return (f"cold_start program={name} ratio_uopir_empty_over_quoted_tinygrad={e[3] / q:.2f} (first realize, wall; "
            f"cpu {e[4] / q:.2f}; quoted {q} s; target <= 0.5)")


def has_tinygrad() -> bool:
    return subprocess.run([PEERS, "-c", "import tinygrad"], capture_output=True).returncode == 0


def main() -> int:
    global ROOT, PEERS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per figure (the best is printed)")
    ap.add_argument("--no-profile", action="store_true", help="skip the profile of a cold uopir run")
    ap.add_argument("--root", default=ROOT, help="the checkout whose uopir runs (default: this one)")
    ap.add_argument("--only-uopir", action="store_true", help="uopir's figures and breakdown only")
    ap.add_argument("--peers", default=sys.executable, help="the Python that runs tinygrad (default: this one)")
    args = ap.parse_args()
    ROOT, PEERS = os.path.abspath(args.root), args.peers
    c_ok = subprocess.run([sys.executable, "-c", "from uopir.backends import available; "
                           "raise SystemExit(0 if 'c' in available() else 1)"], cwd=ROOT).returncode == 0
    if not c_ok:
        print("cold_start skipped: no C compiler (device c unavailable)")
        return 0
    tiny = has_tinygrad() and not args.only_uopir
    # as after `pip install` or any earlier run, the modules' bytecode (.pyc) exists: allow writing it and write it
    # once (an environment with PYTHONDONTWRITEBYTECODE=1 recompiles every module of every process: not a cold start
    # a user sees)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for ours, _, tg in PROGRAMS.values():
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
            run(child(UOPIR_IMPORTS, ours), {**os.environ, "UOPIR_CACHE_DIR": cache})
            if tiny:
                run(child(TINYGRAD_IMPORTS, tg), {**os.environ, "XDG_CACHE_HOME": cache, "DEV": "CPU"}, PEERS)
    for name, (ours, npy, tg) in PROGRAMS.items():
        target = QUOTED_TINYGRAD[name] / 2
        empty, untiered, warm = [], [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
                env = {**os.environ, "UOPIR_CACHE_DIR": cache}
                # the figure is printed before the wait: the next process finds every binary built (warm)
                empty.append(run(child(UOPIR_IMPORTS, ours) + WAIT_BACKGROUND, env))
                warm.append(run(child(UOPIR_IMPORTS, ours), env))
            with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
                untiered.append(run(child(UOPIR_IMPORTS, ours), {**os.environ, "UOPIR_CACHE_DIR": cache, **UNTIERED}))
        e, w, u = best(empty), best(warm), best(untiered)
        for impl, r in (("uopir-c cache=empty", e), ("uopir-c-untiered cache=empty", u), ("uopir-c cache=warm", w)):
            ratio = "" if isinstance(r, str) else (f" ratio_first_realize_cpu_over_target={r[4] / target:.2f} "
                                                   f"(target {target} s)")
            print(f"cold_start program={name} impl={impl} {fmt(r)}{ratio}")
        if args.only_uopir:
            continue
        n = best([run(child("", npy), dict(os.environ)) for _ in range(args.repeat)])
        print(f"cold_start program={name} impl=numpy {fmt(n, 'first_op')}")
        if not tiny:
            print(f"cold_start program={name} impl=tinygrad skipped (not installed: make bench installs .[bench])")
            if not isinstance(e, str):
                print(quoted_ratio(name, e))
            continue
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
                env = {**os.environ, "XDG_CACHE_HOME": cache, "CACHELEVEL": "0", "DEV": "CPU"}
                runs.append(run(child(TINYGRAD_IMPORTS, tg), env, PEERS))
        t = best(runs)
        print(f"cold_start program={name} impl=tinygrad {fmt(t)}")
        if isinstance(e, str):
            continue
        if not isinstance(t, str):
            print(f"cold_start program={name} ratio_uopir_empty_over_tinygrad={e[3] / t[3]:.2f} "
                  f"(first realize, wall; cpu {e[4] / t[4]:.2f}; target <= 0.5)")
        else:  # tinygrad's CPU device needs clang: compare with the figure the issue quotes
            print(quoted_ratio(name, e))
    for name, (ours, _, _) in PROGRAMS.items():
        for cache_state in ("empty", "empty-untiered", "warm"):
            with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
                env = {**os.environ, "UOPIR_CACHE_DIR": cache, **(UNTIERED if cache_state == "empty-untiered" else {})}
                if cache_state == "warm":
                    run(child(UOPIR_IMPORTS, ours) + WAIT_BACKGROUND, env)
                lines = []
                for _ in range(args.repeat):
                    if cache_state != "warm":
                        for f in os.listdir(cache):
                            subprocess.run(["rm", "-rf", os.path.join(cache, f)], check=False)
                    out = subprocess.run([sys.executable, "-c", BREAKDOWN.format(setup=ours[0], first=ours[1])],
                                         capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
                    lines.append(out.stdout.strip().splitlines()[-1] if out.returncode == 0
                                 else f"failed {out.stderr[-200:]}")
                ok = [ln for ln in lines if not ln.startswith("failed")]
                line = min(ok, key=lambda ln: float(ln.split("first_realize=", 1)[1].split()[0].split("/")[1])) \
                    if ok else lines[0]
                print(f"cold_start breakdown program={name} cache={cache_state} (wall/cpu seconds) {line}")
    if not args.no_profile and not args.only_uopir:
        for name, (ours, _, _) in PROGRAMS.items():
            with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
                env = {**os.environ, "UOPIR_CACHE_DIR": cache}
                code = PROFILE.format(setup=ours[0], first=ours[1])
                out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900,
                                     cwd=ROOT)
                line = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else f"failed {out.stderr[-200:]}"
                print(f"cold_start profile program={name} cache=empty {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
