"""The cache-fault fuzz target: a damaged compile cache entry must cost a recompile, never a crash or a wrong answer.

A case fills a private cache folder by running small kernels in a subprocess (on the devices this machine has: `c`
with the tiered first launch, `c` without it, `llvm`), damages random entries in a random way (FAULTS: truncated at
a random offset, bytes flipped, two entries swapped, emptied, a folder in place of the file, unreadable, random
bytes, another kernel's binary without or inside a correct header, the size estimate garbled), then runs the same
kernels again in a fresh subprocess (a SIGBUS or SIGSEGV is its exit code there, not the fuzzer's death): it must
exit 0 with every result right, warn at most once per damaged entry, naming it, and leave every damaged entry whole
again; a third run must be silent. unit_tests/test_compile_cache.py runs each fault that depends neither on chance
nor on the user once on each device, with the same pieces (`run_kernels`, `FAULTS`).

`cache_case(rng)` has the contract of fuzz.py's `tensor_case`: (the case, replayable as text; "", why it failed or
None).
"""
from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from uopir.backends.cache import CACHE_DIR_ENV, DISABLE_ENV, ENTRY_SUFFIX, MAX_MB_ENV, USAGE_FILE, seal, unseal

# a device program: out[i] = x[i] * 3 + K over 64 int32s, named NAME (the C function and the LLVM symbol)
PROGRAM = """\
%0 = core.const 64 : index
%1 = device.loop %0 {id = 0} : index
%2 = kernel.param {idx = 1} : ptr<i32, global>
%3 = kernel.index %2, %1 : ptr<i32, global>
%4 = kernel.load %3 : i32
%5 = core.const 3 : i32
%6 = core.mul %4, %5 : i32
%7 = core.const K : i32
%8 = core.add %6, %7 : i32
%9 = kernel.param {idx = 0} : ptr<i32, global>
%10 = kernel.index %9, %1 : ptr<i32, global>
%11 = kernel.store %10, %8
%12 = device.endloop %1, %11
device.program %1, %4, %8, %11, %12 {name = "NAME"}
"""

# runs [[device, k], ...] (argv[1], JSON) and prints one JSON line per kernel: its device, k, whether the result is
# right and its cache entry. A tiered kernel waits for its C binary, so that the entry is written when this exits.
SCRIPT = """\
import json, sys
import numpy as np
from uopir.backends.cache import cache_key, cache_path
from uopir.backends.c.backend import CBackend, quick
from uopir.backends.llvm.backend import LLVMBackend
from uopir.ir.parser import parse_ir

PROGRAM = sys.argv[2]
made = {"c-tiered": lambda: CBackend(tiered=True), "c": lambda: CBackend(tiered=False), "llvm": LLVMBackend}
backends = {}
x = np.arange(-32, 32, dtype=np.int32)
for dev, k in json.loads(sys.argv[1]):
    be = backends.get(dev) or backends.setdefault(dev, made[dev]())
    name = f"cache_{dev.replace('-', '_')}_{'m' if k < 0 else ''}{abs(k)}"
    prog = parse_ir(PROGRAM.replace("K", str(k)).replace("NAME", name))
    p = be.compile(prog)
    out = np.zeros(64, np.int32)
    be.runtime.launch(p, [out, x])
    if dev == "c-tiered":
        be.runtime.finish(p)
    cc = be.compiler if dev == "llvm" or not quick(prog) else be.quick_compiler
    entry = cache_path(cc.name, cache_key(cc.name, cc.flags, be.renderer.render(prog)))
    print(json.dumps([dev, k, bool(np.array_equal(out, x * 3 + k)), str(entry)]), flush=True)
"""

WARNING = "uopir: warning: compile cache entry "


def devices() -> list[str]:
    """The devices whose cache this machine can exercise."""
    from uopir.backends.c.compiler import find_cc

    out = []
    if find_cc() is not None:
        out.append("c")
        if importlib.util.find_spec("llvmlite") is not None:
            out.append("c-tiered")
    if importlib.util.find_spec("llvmlite") is not None:
        out.append("llvm")
    return out


@dataclass
class Run:
    """One subprocess run of `SCRIPT`: its exit code, stderr, and per kernel whether it was right and its entry."""

    returncode: int
    stderr: str
    results: dict[tuple[str, int], tuple[bool, Path]]

    @property
    def warnings(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.startswith(WARNING)]

    def problems(self, kernels: Sequence[tuple[str, int]]) -> list[str]:
        """What is wrong with this run: a failed exit, a missing or wrong result, a traceback."""
        out = []
        if self.returncode != 0:
            out.append(f"exit {self.returncode}: {self.stderr[-2000:]}")
        out += [f"{dev} k={k}: {'wrong result' if (dev, k) in self.results else 'no result'}"
                for dev, k in kernels if not self.results.get((dev, k), (False,))[0]]
        if "Traceback" in self.stderr:
            out.append(f"a traceback: {self.stderr[-2000:]}")
        return out


def run_kernels(cache: Path, kernels: Sequence[tuple[str, int]], timeout: float = 120.0) -> Run:
    """Run `kernels` ((device, k) pairs) in a fresh process with the cache folder `cache`."""
    env = {**os.environ, CACHE_DIR_ENV: str(cache), DISABLE_ENV: "0"}
    env.pop(MAX_MB_ENV, None)
    try:
        p = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps([list(c) for c in kernels]), PROGRAM], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return Run(-1, f"timed out after {timeout:g} s: {e.stderr!r}", {})
    results = {}
    for line in p.stdout.splitlines():
        dev, k, ok, entry = json.loads(line)
        results[(dev, k)] = (ok, Path(entry))
    return Run(p.returncode, p.stderr, results)


def entry_ok(path: Path) -> bool:
    """Whether `path` is a whole entry (its header, key and digest check out)."""
    try:
        unseal(path.name.removesuffix(ENTRY_SUFFIX), path.read_bytes())
        return True
    except Exception:  # noqa: BLE001 - any failure: not whole
        return False


def _payload(path: Path) -> bytes:
    return unseal(path.name.removesuffix(ENTRY_SUFFIX), path.read_bytes())


# ---- faults: each damages `path` (an entry); `other` is another kernel's entry on the same device; it returns the
# entries it damaged (a swap damages both)
Fault = Callable[[Path, Path, random.Random], list[Path]]


def truncate_half(path: Path, other: Path, rng: random.Random) -> list[Path]:
    os.truncate(path, path.stat().st_size // 2)
    return [path]


def truncate_random(path: Path, other: Path, rng: random.Random) -> list[Path]:
    os.truncate(path, rng.randrange(path.stat().st_size))
    return [path]


def empty(path: Path, other: Path, rng: random.Random) -> list[Path]:
    path.write_bytes(b"")
    return [path]


def random_bytes(path: Path, other: Path, rng: random.Random) -> list[Path]:
    path.write_bytes(rng.randbytes(path.stat().st_size))
    return [path]


def flip_middle(path: Path, other: Path, rng: random.Random) -> list[Path]:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    return [path]


def flip_random(path: Path, other: Path, rng: random.Random) -> list[Path]:
    data = bytearray(path.read_bytes())
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= rng.randint(1, 255)
    path.write_bytes(bytes(data))
    return [path]


def other_entry(path: Path, other: Path, rng: random.Random) -> list[Path]:
    """Another kernel's whole entry (header and all) copied over this one: its header names another key."""
    shutil.copyfile(other, path)
    return [path]


def swap(path: Path, other: Path, rng: random.Random) -> list[Path]:
    tmp = path.with_name(path.name + ".swap")
    os.replace(path, tmp)
    os.replace(other, path)
    os.replace(tmp, other)
    return [path, other]


def raw_binary(path: Path, other: Path, rng: random.Random) -> list[Path]:
    """Another kernel's binary (a valid shared object or object file) with no header."""
    path.write_bytes(_payload(other))
    return [path]


def forged(path: Path, other: Path, rng: random.Random) -> list[Path]:
    """Another kernel's binary inside a correct header for this key: it passes the check and fails to load (it
    does not define this kernel)."""
    path.write_bytes(seal(path.name.removesuffix(ENTRY_SUFFIX), _payload(other)))
    return [path]


def folder(path: Path, other: Path, rng: random.Random) -> list[Path]:
    path.unlink()
    path.mkdir()
    (path / "inside").write_bytes(b"x")
    return [path]


def unreadable(path: Path, other: Path, rng: random.Random) -> list[Path]:
    """No read permission (a process running as root reads it anyway: then it is no fault)."""
    path.chmod(0)
    return [path]


FAULTS: dict[str, Fault] = {
    "truncate-half": truncate_half, "truncate-random": truncate_random, "empty": empty, "random-bytes": random_bytes,
    "flip-middle": flip_middle, "flip-random": flip_random, "other-entry": other_entry, "swap": swap,
    "raw-binary": raw_binary, "forged": forged, "folder": folder, "unreadable": unreadable,
}


def garble_usage(cache: Path, rng: random.Random) -> None:
    """The cache's size estimate (its only index) made garbage, or a folder."""
    usage = cache / USAGE_FILE
    if rng.random() < 0.2:
        usage.unlink(missing_ok=True)
        usage.mkdir()
        return
    usage.write_bytes(rng.choice([b"", b"not a number\n", b"-5\n", b"9" * 40, rng.randbytes(16)]))


def after_fault_problems(run: Run, kernels: Sequence[tuple[str, int]], damaged: set[Path]) -> list[str]:
    """What is wrong with the run after the faults: `Run.problems`, a warning that names no damaged entry or one
    entry twice, a damaged entry not whole again."""
    out = run.problems(kernels)
    named = [w[len(WARNING):].split(" ", 1)[0] for w in run.warnings]
    out += [f"a warning for an entry that was not damaged: {w}" for w in named if Path(w) not in damaged]
    out += [f"{w} warned about {named.count(w)} times" for w in sorted(set(named)) if named.count(w) > 1]
    out += [f"{p} is not a whole entry after the run" for p in sorted(damaged) if not entry_ok(p)]
    return out


def cache_case(rng: random.Random) -> tuple[str, str, str | None]:
    """Fill a private cache, damage random entries in random ways, run again: the right answers and exit 0."""
    devs = devices()
    if not devs:
        return "no device with a compile cache here", "", None
    kernels = [(dev, rng.randint(-1000, 1000)) for dev in rng.sample(devs, rng.randint(1, len(devs)))
               for _ in range(2)]
    kernels = list(dict.fromkeys(kernels))
    log = [f"kernels {json.dumps(kernels)}"]
    cache = Path(tempfile.mkdtemp(prefix="uopir-fuzz-cache-"))
    try:
        first = run_kernels(cache, kernels)
        bad = first.problems(kernels)
        if bad:
            return "\n".join(log), "", "the first run (empty cache): " + "; ".join(bad)
        entries = {kn: first.results[kn][1] for kn in kernels}
        damaged: set[Path] = set()
        for _ in range(rng.randint(1, 3)):
            dev, k = rng.choice(kernels)
            path = entries[(dev, k)]
            others = [entries[kn] for kn in kernels if kn[0] == dev and entries[kn] != path and entries[kn].is_file()
                      and entry_ok(entries[kn])]
            name = rng.choice(sorted(FAULTS))
            if not path.is_file() or not entry_ok(path) or (not others and name in ("other-entry", "swap",
                                                                                     "raw-binary", "forged")):
                continue
            hit = FAULTS[name](path, rng.choice(others) if others else path, rng)
            damaged.update(hit)
            log.append(f"{name} on {' and '.join(str(p.relative_to(cache)) for p in hit)}")
        if rng.random() < 0.3:
            garble_usage(cache, rng)
            log.append(f"garbled {USAGE_FILE}")
        second = run_kernels(cache, kernels)
        bad = after_fault_problems(second, kernels, damaged)
        if bad:
            return "\n".join(log), "", "the run after the faults: " + "; ".join(bad)
        third = run_kernels(cache, kernels)
        bad = third.problems(kernels) + [f"a warning in the third run: {w}" for w in third.warnings]
        return "\n".join(log), "", ("the third run: " + "; ".join(bad)) if bad else None
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """`python unit_tests/fuzz_cache.py [CASES] [SEED]`: run cache cases alone (fuzz.py runs them among the rest)."""
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 5
    rng = random.Random(int(args[1]) if len(args) > 1 else None)
    failed = 0
    for i in range(n):
        case, _, why = cache_case(random.Random(rng.getrandbits(64)))
        if why is not None:
            failed += 1
            print(f"FAIL case {i}: {why}\n{case}", flush=True)
    print(f"{n} cache cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
