"""Issue 26's core ops, uopir beside its peers and the machine's own limits, all from one run: the measuring stick.

Workloads (f32): matmul 1024^2 and 2048^2, conv2d 3x3 N=16 64->64 56x56 pad 1, softmax and layernorm over the rows of
4096x1024, the sum of 16M, tanh-gelu of 16M (`--quick`: small shapes of the same kinds). Impls: uopir on c and llvm
(a TinyJit replay: steady state, no scheduling or compiling), numpy in this process, and torch (CPU, its default
threads) and tinygrad (its CPU device) when importable from the interpreter given by `--peers` (each runs as a
persistent subprocess of that interpreter serving this same file, so that every round interleaves all impls). The
machine's limits come from bench/machine_limits.c (built with the system compiler at -O3 -march=native, one thread
per core): fma (12 independent 16-float FMA chains per core), read (a vector sum), copy, triad. The memory figures
depend on the size: this machine's 32 MB L3 holds half of the sum's 64 MB input between calls (a read of 32 MB ran
~100 GB/s, 64 MB ~64, 128 MB ~45 at load 5), so each memory-bound workload is held to the probe run at its own input
size (`machine_at`, inputs of 4M floats and more), the `machine` line being the large-array (DRAM) figures.

Prints machine-readable lines (nothing is asserted):
    core_ops machine cores=<n> fma_gflops=.. read_gbps=.. copy_gbps=.. triad_gbps=..     (best over the rounds)
    core_ops machine_at workload=<name> floats=<n> read_gbps=.. copy_gbps=..   (the probe on arrays of its input size)
    core_ops workload=<name> impl=<impl> <gflops|gbps>=<rate> seconds=<best call> [max_rel_err=<vs numpy>]
    core_ops ratio workload=<name> unit=<gflops|gbps> uopir=<impl>:<rate> best_peer=<impl>:<rate>
        uopir_over_peer=<ratio> limit=<fma|read|copy>:<rate> uopir_over_limit=<ratio> peer_over_limit=<ratio>
    core_ops skipped impl=<impl> reason=<...>            (a peer not importable, a device not available)
    core_ops loadavg=<the 1, 5 and 15 minute load averages at the end>
GFLOP/s count 2 flops per multiply-add; GB/s count the least traffic the op needs (each input read once, the output
written once: softmax/layernorm/gelu 8 bytes per element, sum 4). Each figure is the best of `--rounds` interleaved
rounds (each the best of a few calls after an untimed one, SETTLE_S after the impl before it, whose thread pool may
still spin) after a warm-up. Run: python3 bench/core_ops.py [--quick] [--rounds N] [--peers /tmp/peers/bin/python]
[--only conv3x3,sum] (those workloads alone). This file imports only the standard library and numpy at the top, so
that the peer interpreter can run it as `--serve <impl> <workloads>`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
UOPIR_DEVICES = ("c", "llvm")
PEERS = ("torch", "tinygrad")
INNER = 3  # calls per measurement: a measurement is the fastest of them
# the least input (floats) for which the probe runs at the workload's size: below it, a run lasts about as long as a
# thread start or a time slice on a loaded machine (1M floats read "1 GB/s" at load 11), and --quick keeps the
# large-array figures
SIZED_MIN = 1 << 22


@dataclass(frozen=True)
class Workload:
    """One core op at one shape: `work` is flops (unit gflops) or bytes (unit gbps); `limit` names the machine figure
    the op is bounded by."""

    name: str
    kind: str
    shape: tuple[int, ...]
    unit: str
    work: float
    limit: str


def workloads(quick: bool = False) -> list[Workload]:
    """The issue's table (or small shapes of the same kinds)."""
    mm = (256, 512) if quick else (1024, 2048)
    n_, ci, co, hw = (2, 16, 16, 28) if quick else (16, 64, 64, 56)
    rows, cols = (512, 256) if quick else (4096, 1024)
    flat = 1 << (20 if quick else 24)
    return [
        *(Workload(f"matmul{n}", "matmul", (n,), "gflops", 2.0 * n**3, "fma") for n in mm),
        Workload("conv3x3", "conv", (n_, ci, co, hw), "gflops", 2.0 * n_ * co * hw * hw * ci * 9, "fma"),
        Workload("softmax", "softmax", (rows, cols), "gbps", 8.0 * rows * cols, "copy"),
        Workload("layernorm", "layernorm", (rows, cols), "gbps", 8.0 * rows * cols, "copy"),
        Workload("sum", "sum", (flat,), "gbps", 4.0 * flat, "read"),
        Workload("gelu", "gelu", (flat,), "gbps", 8.0 * flat, "copy"),
    ]


def inputs(w: Workload) -> list[np.ndarray]:
    """The workload's f32 inputs (the same seed in every process, so every impl sees the same values)."""
    rng = np.random.default_rng(0)
    if w.kind == "matmul":
        n = w.shape[0]
        shapes: list[tuple[int, ...]] = [(n, n), (n, n)]
    elif w.kind == "conv":
        n_, ci, co, hw = w.shape
        shapes = [(n_, ci, hw, hw), (co, ci, 3, 3)]
    else:
        shapes = [w.shape]
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


# ---- the impls: each returns a zero-argument call that runs the op once, to completion ----------------------------
def _numpy(w: Workload, xs: list[np.ndarray]) -> Callable[[], object]:
    if w.kind == "matmul":
        a, b = xs
        return lambda: a @ b
    if w.kind == "conv":
        x, k = xs
        win = np.lib.stride_tricks.sliding_window_view  # im2col as a view, then one BLAS contraction

        def conv() -> np.ndarray:
            xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
            return np.ascontiguousarray(np.tensordot(win(xp, (3, 3), axis=(2, 3)), k, ([1, 4, 5], [1, 2, 3]))
                                        .transpose(0, 3, 1, 2))
        return conv
    (x,) = xs
    if w.kind == "softmax":
        def softmax() -> np.ndarray:
            e = np.exp(x - x.max(-1, keepdims=True))
            e /= e.sum(-1, keepdims=True)
            return e
        return softmax
    if w.kind == "layernorm":
        def layernorm() -> np.ndarray:
            y = x - x.mean(-1, keepdims=True)
            return y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-5)
        return layernorm
    if w.kind == "sum":
        return lambda: x.sum()
    c = np.float32(np.sqrt(2 / np.pi))

    def gelu() -> np.ndarray:
        t = x * x
        t *= np.float32(0.044715) * x
        t += x
        t *= c
        np.tanh(t, out=t)
        t += 1
        t *= x
        t *= np.float32(0.5)
        return t
    return gelu


def _tensor_op(w: Workload) -> Callable[..., object]:
    """The op on uopir's or tinygrad's Tensor (the same API for these)."""
    return {"matmul": lambda a, b: a @ b, "conv": lambda x, k: x.conv2d(k, padding=1),
            "softmax": lambda x: x.softmax(-1), "layernorm": lambda x: x.layernorm(-1), "sum": lambda x: x.sum(),
            "gelu": lambda x: x.gelu()}[w.kind]


def _uopir(device: str) -> Callable[[Workload, list[np.ndarray]], tuple[Callable[[], object], Callable[[], object]]]:
    def make(w: Workload, xs: list[np.ndarray]) -> tuple[Callable[[], object], Callable[[], object]]:
        from uopir import TinyJit
        from uopir.frontend.tensor import Tensor

        ts = [Tensor(x, device=device).realize() for x in xs]
        op = _tensor_op(w)
        jit = TinyJit(lambda *a: op(*a).realize())
        call = lambda: jit(*ts)  # noqa: E731
        return call, lambda: call().numpy()
    return make


def _torch(w: Workload, xs: list[np.ndarray]) -> Callable[[], object]:
    import torch
    import torch.nn.functional as F

    torch.set_grad_enabled(False)
    ts = [torch.from_numpy(x) for x in xs]
    if w.kind == "matmul":
        return lambda: torch.mm(*ts)
    if w.kind == "conv":
        return lambda: F.conv2d(ts[0], ts[1], padding=1)
    (x,) = ts
    return {"softmax": lambda: torch.softmax(x, -1), "layernorm": lambda: F.layer_norm(x, x.shape[-1:]),
            "sum": lambda: x.sum(), "gelu": lambda: F.gelu(x, approximate="tanh")}[w.kind]


def _tinygrad(w: Workload, xs: list[np.ndarray]) -> Callable[[], object]:
    from tinygrad import Device, Tensor, TinyJit

    dev = Device[Device.DEFAULT]
    ts = [Tensor(x).realize() for x in xs]
    op = _tensor_op(w)
    jit = TinyJit(lambda *a: op(*a).realize())

    def call() -> object:
        out = jit(*ts)
        dev.synchronize()
        return out
    return call


SETTLE_S = 0.3  # seconds between two impls' measurements: longer than a thread pool's busy-wait after its call


def measure(call: Callable[[], object], inner: int = INNER) -> float:
    """The fastest of `inner` timed calls (seconds), after a pause: the impl measured before may have left its
    thread pool spinning (OpenBLAS's and OpenMP's workers busy-wait for a while after a parallel call), which takes a
    core from this one; a two-thread kernel then runs on one (uopir's conv3x3 read 0.63 of torch measured right after
    numpy's, 0.95+ on its own)."""
    time.sleep(SETTLE_S)
    call()  # untimed: the caches, TLB and pool this impl's calls find warm after another impl's
    best = float("inf")
    for _ in range(inner):
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    return best


def warm(call: Callable[[], object]) -> None:
    """Three untimed calls: a TinyJit runs, captures, then replays; caches and thread pools settle."""
    for _ in range(3):
        call()


# ---- peers: a persistent subprocess per peer impl, serving one measurement per stdin line --------------------------
def serve(impl: str, specs: str) -> None:
    """The peer side: set up every workload on `impl`, print `ready`, then answer each `<workload>` line with
    `t=<seconds>` (or `err=<reason>`)."""
    ws = {w.name: w for w in (Workload(**{**d, "shape": tuple(d["shape"])}) for d in json.loads(specs))}
    try:
        make = {"torch": _torch, "tinygrad": _tinygrad}[impl]
        calls = {}
        for name, w in ws.items():
            calls[name] = make(w, inputs(w))
            warm(calls[name])
    except Exception as e:  # noqa: BLE001  (a peer that cannot run is reported, not fatal)
        print(f"err={type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300], flush=True)
        return
    print("ready", flush=True)
    for line in sys.stdin:
        name = line.strip()
        try:
            print(f"t={measure(calls[name])!r}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"err={type(e).__name__}"[:300], flush=True)


class Peer:
    """A peer impl running in the `--peers` interpreter; `time(workload)` asks it for one measurement."""

    def __init__(self, python: str, impl: str, ws: list[Workload]) -> None:
        env = {**os.environ, "DEV": os.environ.get("DEV", "CPU")}  # tinygrad's CPU device
        self.impl = impl
        self.proc: subprocess.Popen[str] | None = None
        self.error: str | None = None
        python = os.path.abspath(python) if os.sep in python else python  # the server runs in bench/
        try:
            self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--serve", impl,
                                          json.dumps([asdict(w) for w in ws])], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                         cwd=HERE)
        except OSError as e:
            self.error = f"cannot run {python}: {e.strerror}"
            return
        first = self.proc.stdout.readline().strip()
        self.error = None if first == "ready" else (first.removeprefix("err=") or "no answer")

    def time(self, w: Workload) -> float | None:
        self.proc.stdin.write(w.name + "\n")
        self.proc.stdin.flush()
        ans = self.proc.stdout.readline().strip()
        return float(ans[2:]) if ans.startswith("t=") else None

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


# ---- the machine's limits ------------------------------------------------------------------------------------------
def build_probe(folder: str) -> str | None:
    """bench/machine_limits.c built with the system compiler (None when there is none)."""
    from shutil import which

    cc = os.environ.get("CC") or which("cc") or which("gcc") or which("clang")
    if cc is None:
        return None
    exe = os.path.join(folder, "machine_limits")
    res = subprocess.run([cc, "-O3", "-march=native", "-pthread", "-o", exe, os.path.join(HERE, "machine_limits.c")],
                         capture_output=True, text=True)
    return exe if res.returncode == 0 else None


def probe(exe: str, cores: int, floats: int) -> dict[str, float]:
    """One run of the probe (the best of 5 repeats of each figure): {fma_gflops, read_gbps, copy_gbps, triad_gbps}."""
    out = subprocess.run([exe, str(cores), str(floats), "5"], capture_output=True, text=True, timeout=300).stdout
    kv = dict(p.split("=", 1) for p in out.split())
    return {k: float(v) for k, v in kv.items() if k.endswith(("_gflops", "_gbps"))}


# ---- figures -------------------------------------------------------------------------------------------------------
def rate(w: Workload, seconds: float) -> float:
    """GFLOP/s or GB/s of one call of w taking `seconds`."""
    return w.work / seconds / 1e9


def ratio_line(w: Workload, rates: dict[str, float], limits: dict[str, float]) -> str:
    """The summary line of a workload: uopir's best device against the best peer and against the machine's limit.
    `rates` maps impl -> rate (uopir's devices are UOPIR_DEVICES); `limits` maps the probe's keys -> rate."""
    def best(impls: tuple[str, ...] | list[str]) -> tuple[str, float] | None:
        have = [(rates[i], i) for i in impls if rates.get(i)]
        return (max(have)[1], max(have)[0]) if have else None

    def frac(a: float | None, b: float | None) -> str:
        return f"{a / b:.3f}" if a and b else "n/a"

    ours = best(UOPIR_DEVICES)
    peer = best([i for i in rates if i not in UOPIR_DEVICES])
    lim = limits.get(f"{w.limit}_{w.unit}")
    ours_r, peer_r = (ours[1] if ours else None), (peer[1] if peer else None)
    return (f"core_ops ratio workload={w.name} unit={w.unit} "
            f"uopir={f'{ours[0]}:{ours[1]:.2f}' if ours else 'n/a'} "
            f"best_peer={f'{peer[0]}:{peer[1]:.2f}' if peer else 'n/a'} uopir_over_peer={frac(ours_r, peer_r)} "
            f"limit={w.limit}:{f'{lim:.2f}' if lim else 'n/a'} uopir_over_limit={frac(ours_r, lim)} "
            f"peer_over_limit={frac(peer_r, lim)}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--serve"]:
        serve(argv[1], argv[2])
        return
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return
    known, i = {"--quick": 0, "--rounds": 1, "--peers": 1, "--only": 1}, 0
    while i < len(argv):  # a mistyped option is an error, not a silent full run
        if argv[i] not in known or i + known[argv[i]] >= len(argv):
            sys.exit(f"core_ops: {'missing value for' if argv[i] in known else 'unknown argument'} {argv[i]!r} "
                     "(usage: core_ops.py [--quick] [--rounds N] [--peers PYTHON] [--only W1,W2])")
        i += 1 + known[argv[i]]
    quick = "--quick" in argv
    try:
        rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else (2 if quick else 5)
    except ValueError:
        sys.exit(f"core_ops: --rounds takes a number, got {argv[argv.index('--rounds') + 1]!r}")
    peers_python = argv[argv.index("--peers") + 1] if "--peers" in argv else None
    sys.path.insert(0, os.path.join(HERE, ".."))
    sys.path.insert(0, HERE)
    import _timing  # noqa: F401  (steady state measures the C binaries, not the tiered in-process build)

    from uopir.backends import available

    ws = workloads(quick)
    if "--only" in argv:  # some workloads by name (a bench of one op; the machine's limits are still probed)
        only = argv[argv.index("--only") + 1].split(",")
        unknown = [w for w in only if w not in {x.name for x in ws}]
        if unknown:
            sys.exit(f"core_ops: unknown workload {unknown[0]!r} for --only (known: {', '.join(x.name for x in ws)})")
        ws = [w for w in ws if w.name in only]
    cores = os.cpu_count() or 1
    devices = [d for d in UOPIR_DEVICES if d in available()]
    for d in UOPIR_DEVICES:
        if d not in devices:
            print(f"core_ops skipped impl={d} reason=device not available", flush=True)

    # set up: (workload, impl) -> a local call, or a peer process; a check of uopir's results against numpy
    local: dict[tuple[str, str], Callable[[], object]] = {}
    errs: dict[tuple[str, str], float] = {}
    for w in ws:
        xs = inputs(w)
        local[(w.name, "numpy")] = call = _numpy(w, xs)
        want = np.asarray(call(), np.float64)
        for d in devices:
            run, read = _uopir(d)(w, xs)
            warm(run)
            local[(w.name, d)] = run
            errs[(w.name, d)] = float(np.abs(read() - want).max() / max(np.abs(want).max(), 1e-30))
    peers: list[Peer] = []
    for impl in PEERS if peers_python else ():
        p = Peer(peers_python, impl, ws)
        if p.error:
            print(f"core_ops skipped impl={impl} reason={p.error}", flush=True)
            p.close()
        else:
            peers.append(p)
    if not peers_python:
        print("core_ops skipped impl=torch,tinygrad reason=no --peers interpreter given", flush=True)

    # rounds: every impl of every workload once per round, then the probe; keep the best of each
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_probe(tmp)
        if exe is None:
            print("core_ops skipped impl=machine_limits reason=no C compiler built bench/machine_limits.c")
        limits: dict[str, float] = {}
        sized: dict[str, dict[str, float]] = {}  # a memory-bound workload's name -> the probe at its input size
        secs: dict[tuple[str, str], float] = {}
        for _ in range(rounds):
            for w in ws:
                timed = {impl: measure(c) for (name, impl), c in local.items() if name == w.name}
                timed.update({p.impl: p.time(w) for p in peers})
                for impl, t in timed.items():
                    if t is not None:
                        secs[(w.name, impl)] = min(t, secs.get((w.name, impl), float("inf")))
            if exe:
                for k, v in probe(exe, cores, 1 << (22 if quick else 25)).items():
                    limits[k] = max(v, limits.get(k, 0.0))
                for w in ws:
                    if w.unit == "gbps" and np.prod(w.shape) >= SIZED_MIN:
                        at = sized.setdefault(w.name, {})
                        for k, v in probe(exe, cores, int(np.prod(w.shape))).items():
                            at[k] = max(v, at.get(k, 0.0))
    for p in peers:
        p.close()

    if limits:
        print(f"core_ops machine cores={cores} " + " ".join(f"{k}={v:.2f}" for k, v in limits.items()), flush=True)
    for name, at in sized.items():
        n = int(np.prod(next(w for w in ws if w.name == name).shape))
        print(f"core_ops machine_at workload={name} floats={n} "
              + " ".join(f"{k}={v:.2f}" for k, v in at.items() if k.endswith("_gbps")), flush=True)
    for w in ws:
        rates: dict[str, float] = {}
        for (name, impl), t in secs.items():
            if name != w.name:
                continue
            rates[impl] = rate(w, t)
            err = f" max_rel_err={errs[(name, impl)]:.1e}" if (name, impl) in errs else ""
            print(f"core_ops workload={w.name} impl={impl} {w.unit}={rates[impl]:.2f} seconds={t:.6f}{err}",
                  flush=True)
        print(ratio_line(w, rates, {**limits, **sized.get(w.name, {})}), flush=True)
    if os.path.exists("/proc/loadavg"):
        with open("/proc/loadavg") as f:
            print(f"core_ops loadavg={'/'.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main(sys.argv[1:])
