"""Beam search on issue 26's core ops (bench/core_ops.py's workloads) on the c device: per op, the heuristic's
figure, the searched figure, the search time, and the figure and compile time with a warm tuning cache.

Each op runs in two child processes of this script, sharing one fresh tuning cache file:
  search: UOPIR_BEAM=N, the cache empty: the first call lowers, searches and compiles every kernel (`search_s`),
          then the steady state of the searched kernels (`searched`);
  warm:   the heuristic (UOPIR_BEAM unset) and UOPIR_BEAM=N with the cache now warm, each first call timed
          (`heuristic_first_s`, `warm_first_s`: lowering and compile, no search), then both timed in interleaved
          rounds (`heuristic`, `warm`) with the peers of bench/core_ops.py in the same rounds: numpy in the child,
          torch and tinygrad in their `--peers` interpreter (each a core_ops peer server), so that the ratio of the
          warm figure to the best peer's comes from one run and does not depend on when the machine was busy.
Prints machine-readable lines (nothing is asserted):
    search workload=<name> unit=<gflops|gbps> heuristic=<rate> searched=<rate> warm=<rate> warm_over_heuristic=<r>
        search_s=<s> heuristic_first_s=<s> warm_first_s=<s> kernels_tuned=<n> numpy=<rate> [torch=<rate>]
        [tinygrad=<rate>] best_peer=<impl>:<rate> warm_over_peer=<r>
    search skipped peer=<impl> reason=<...>          (a peer not importable from --peers, or no --peers given)
    search choice beam <kernel>: [<heuristic opts>] <time> -> [<chosen opts>] <time> (...)   (with UOPIR_DEBUG=1)
    search loadavg=<the 1, 5 and 15 minute load averages at the end>
Run: python3 bench/search.py [--quick] [--width N] [--rounds N] [--ops matmul1024,softmax,...] (default: every op)
[--peers /tmp/peers/bin/python]. The search's own settings come from the environment (UOPIR_BEAM_BUDGET,
UOPIR_BEAM_RAY: see docs/internals.md).
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import core_ops  # noqa: E402  (bench/core_ops.py: the workloads, their inputs and the timing)

USAGE = "usage: search.py [--quick] [--width N] [--rounds N] [--ops NAME,...] [--peers PYTHON]"


def _first_and_jit(w: core_ops.Workload) -> tuple[float, object]:
    """The TinyJit call of `w` on c after its untimed warm-up, and how long the first call took (lower+compile)."""
    run, _ = core_ops._uopir("c")(w, core_ops.inputs(w))
    t = time.perf_counter()
    run()
    first = time.perf_counter() - t
    core_ops.warm(run)
    return first, run


def child(phase: str, name: str, quick: bool, width: int, rounds: int, peers_python: str | None) -> None:
    """One phase of one op (see the module docstring); prints one JSON line."""
    sys.path.insert(0, os.path.join(HERE, ".."))
    import _timing  # noqa: F401  (steady state measures the C binaries, not the tiered in-process build)

    w = next(x for x in core_ops.workloads(quick) if x.name == name)
    out: dict[str, float] = {}
    if phase == "search":
        os.environ["UOPIR_BEAM"] = str(width)
        out["search_s"], run = _first_and_jit(w)
        out["searched"] = core_ops.rate(w, min(core_ops.measure(run) for _ in range(rounds)))
    else:
        os.environ.pop("UOPIR_BEAM", None)
        out["heuristic_first_s"], heur = _first_and_jit(w)
        os.environ["UOPIR_BEAM"] = str(width)
        out["warm_first_s"], warm = _first_and_jit(w)
        calls = {"heuristic": heur, "warm": warm, "numpy": core_ops._numpy(w, core_ops.inputs(w))}
        core_ops.warm(calls["numpy"])
        peers = []
        for impl in core_ops.PEERS if peers_python else ():
            p = core_ops.Peer(peers_python, impl, [w])
            if p.error:
                print(f"search skipped peer={impl} reason={p.error}", file=sys.stderr, flush=True)
                p.close()
            else:
                peers.append(p)
        best = {k: float("inf") for k in [*calls, *(p.impl for p in peers)]}
        for _ in range(rounds):  # every impl once per round, interleaved
            for k, call in calls.items():
                best[k] = min(best[k], core_ops.measure(call))
            for p in peers:
                t = p.time(w)
                best[p.impl] = min(best[p.impl], t if t is not None else float("inf"))
        for p in peers:
            p.close()
        out.update({k: core_ops.rate(w, t) for k, t in best.items() if t < float("inf")})
    print("search_json " + json.dumps(out), flush=True)


def _run_child(args: list[str], env: dict[str, str]) -> dict[str, float] | str:
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args], env=env, capture_output=True,
                       text=True)
    for x in p.stderr.splitlines():  # UOPIR_DEBUG=1: each search's choice (uopir.search.beam); peers skipped
        if x.startswith("beam ") and "->" in x:
            print(f"search choice {x}", flush=True)
        elif x.startswith("search skipped peer="):
            print(x, flush=True)
    line = next((x for x in p.stdout.splitlines() if x.startswith("search_json ")), None)
    if p.returncode != 0 or line is None:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return f"exit {p.returncode}: {tail}"
    return json.loads(line.split(" ", 1)[1])


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2], argv[3] == "1", int(argv[4]), int(argv[5]), argv[6] if argv[6] != "-" else None)
        return
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return
    known, i = {"--quick": 0, "--width": 1, "--rounds": 1, "--ops": 1, "--peers": 1}, 0
    while i < len(argv):
        if argv[i] not in known or i + known[argv[i]] >= len(argv):
            sys.exit(f"search: {'missing value for' if argv[i] in known else 'unknown argument'} {argv[i]!r} ({USAGE})")
        i += 1 + known[argv[i]]
    quick = "--quick" in argv
    opt = {k: argv[argv.index(k) + 1] for k in ("--width", "--rounds", "--ops", "--peers") if k in argv}
    peers_python = opt.get("--peers")
    if peers_python is None:
        print("search skipped peer=torch,tinygrad reason=no --peers interpreter given", flush=True)
    try:
        width, rounds = int(opt.get("--width", "2")), int(opt.get("--rounds", "3" if quick else "5"))
        if width < 1 or rounds < 1:
            raise ValueError
    except ValueError:
        sys.exit(f"search: --width and --rounds take a positive number ({USAGE})")
    ws = core_ops.workloads(quick)
    names = [x.name for x in ws]
    ops = opt["--ops"].split(",") if "--ops" in opt else names
    bad = [o for o in ops if o not in names]
    if bad:
        sys.exit(f"search: unknown op {bad[0]!r} for --ops (known: {', '.join(names)})")
    for name in ops:
        w = next(x for x in ws if x.name == name)
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "tuning.sqlite")
            env = {**os.environ, "UOPIR_TUNING_CACHE": db}
            env.pop("UOPIR_BEAM", None)
            common = [name, "1" if quick else "0", str(width), str(rounds), peers_python or "-"]
            got: dict[str, float] = {}
            for phase in ("search", "warm"):
                r = _run_child([phase, *common], env)
                if isinstance(r, str):
                    print(f"search skipped workload={name} phase={phase} reason={r}", flush=True)
                    break
                got.update(r)
            else:
                tuned = sqlite3.connect(db).execute("SELECT COUNT(*) FROM tuning").fetchone()[0]
                peer_rates = {k: got[k] for k in ("numpy", *core_ops.PEERS) if k in got}
                top = max(peer_rates, key=lambda k: peer_rates[k])
                print(f"search workload={name} unit={w.unit} heuristic={got['heuristic']:.2f} "
                      f"searched={got['searched']:.2f} warm={got['warm']:.2f} "
                      f"warm_over_heuristic={got['warm'] / got['heuristic']:.2f} search_s={got['search_s']:.1f} "
                      f"heuristic_first_s={got['heuristic_first_s']:.2f} warm_first_s={got['warm_first_s']:.2f} "
                      f"kernels_tuned={tuned} " + " ".join(f"{k}={v:.2f}" for k, v in peer_rates.items()) +
                      f" best_peer={top}:{peer_rates[top]:.2f} warm_over_peer={got['warm'] / peer_rates[top]:.2f}",
                      flush=True)
    if os.path.exists("/proc/loadavg"):
        with open("/proc/loadavg") as f:
            print(f"search loadavg={'/'.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main(sys.argv[1:])
