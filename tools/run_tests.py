#!/usr/bin/env python3
"""Run pytest (unit_tests/) and lit (lit_tests/) and close with ONE line: `N passed, N failed, N skipped`.

Two pytest legs: the whole unit suite with the frontend on the reference device (UOPIR_DEVICE=python), and the
frontend suite (FRONTEND_TESTS: the tests that run Tensor programs on the default device) again on the C backend
(UOPIR_DEVICE=c) when a C compiler is installed, so every frontend test checks both the interpreter and compiled
code. The compiled backends' own tests (BACKEND_TESTS) leave the first leg for a third. The three legs start
together (pytest uses one core a process) and the first two are spread over the cores by pytest-xdist (whole files
per worker; UOPIR_TEST_WORKERS sets how many), so the cores stay busy until the last file ends. The c and backend legs
are buffered: their output is printed after the first leg's. UOPIR_TEST_SERIAL=1 runs the legs one after the other
in one process each. Their counts add up (a test in both the first and the c leg counts twice). lit starts when the
backend leg ends, in its place, and prints its output last (lit_tests/lit.cfg.py runs its tools through one fork
server); where LLVM's FileCheck is installed every check runs with it as well as with the Python filecheck
(FILECHECK_ALSO), so the lit files stay valid for the tool MLIR users run.

Before the tests, the Debian packages some tests need (tools/debian_packages.py: the MLIR tools, chromium, graphviz)
are installed with apt-get when they are missing and the script runs as root; otherwise one line says which tests
will skip. When they are all there this is a few PATH lookups.

Why a script: the two runners report in different formats and exit codes; CI reads only the last line and the
exit status. Counting rules:
  * pytest: passed = passed tests; failed = failed + errors; skipped = skips (and xfails, which the suite has none
    of: pytest's report counts them as skips).
    Exit code 5 ("no tests collected") counts as 0 passed and is reported, not treated as a crash.
  * lit: passed = Passed + Expectedly Failed; failed = Failed + Unresolved + Unexpectedly Passed + Timed Out;
    skipped = Unsupported + Skipped (a feature the machine lacks). Excluded counts as none of them.
The exit status is non-zero when anything failed, when a runner itself errored (crash, usage error, a count it
could not read), or when nothing at all passed.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from pathlib import Path

import debian_packages  # tools/debian_packages.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


FRONTEND_TESTS = ("test_tensor_*.py", "test_frontend_ir.py", "test_realize_schedule.py", "test_deep_graphs.py",
                  "test_symbolic.py")


# the compiled backends' own tests (python device, like leg 1): they run after the c leg, beside the first leg
BACKEND_TESTS = ("test_differential.py", "test_opencl_*.py", "test_llvm_backend.py", "test_cuda_backend.py",
                 "test_capabilities.py", "test_c_backend.py", "test_mlir_backend.py", "test_backend_programs.py",
                 "test_backend_semantics.py")


def backend_tests() -> list[str]:
    """The unit test files of the compiled backends (relative to the repository root)."""
    files = sorted({p for pat in BACKEND_TESTS for p in (ROOT / "unit_tests").glob(pat)})
    return [str(p.relative_to(ROOT)) for p in files]


def frontend_tests() -> list[str]:
    """The unit test files of the frontend suite (relative to the repository root)."""
    files = sorted({p for pat in FRONTEND_TESTS for p in (ROOT / "unit_tests").glob(pat)})
    return [str(p.relative_to(ROOT)) for p in files]


def c_compiler_available() -> bool | None:
    """Whether the C backend can run here (a subprocess: this script imports nothing of uopir); None when the probe
    itself crashed (its output is printed): that is a failure of the run, not a machine without a C compiler."""
    code = "from uopir.backends import available; print('c' in available())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"run_tests: the probe for the C backend failed (exit {out.returncode}):\n{out.stdout}{out.stderr}")
        return None
    return out.stdout.strip() == "True"


class PytestLeg:
    """One pytest run in a subprocess, started at once. Its output goes to the terminal, or (`buffered`, a leg that
    runs beside another) to a file printed when the leg is finished, so the two never interleave."""

    def __init__(self, paths: tuple[str, ...] = ("unit_tests",), env: dict[str, str] | None = None,
                 buffered: bool = False, extra: tuple[str, ...] = ()):
        self.tmp = tempfile.TemporaryDirectory()
        self.xml = Path(self.tmp.name) / "pytest.xml"
        self.log = open(Path(self.tmp.name) / "output.txt", "w+") if buffered else None
        cmd = [sys.executable, "-m", "pytest", *paths, "-q", f"--junitxml={self.xml}", *extra]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT if self.log else None)

    def finish(self) -> Counts:
        """Wait for the leg; (passed, failed, skipped, runner_ok)."""
        rc = self.proc.wait()
        try:
            if self.log is not None:
                self.log.seek(0)
                sys.stdout.write(self.log.read())
                sys.stdout.flush()
                self.log.close()
            return _pytest_counts(rc, self.xml)
        finally:
            self.tmp.cleanup()


Counts = tuple[int, int, int, bool]  # passed, failed, skipped, whether the runner itself worked
NONE: Counts = (0, 0, 0, True)


def _pytest_counts(rc: int, xml: Path) -> Counts:
    if rc == 5:
        print("run_tests: WARNING: pytest collected no tests (exit 5); counting 0 passed")
        return NONE
    if not xml.exists():
        print(f"run_tests: pytest exited {rc} without a report")
        return 0, 0, 0, False
    tests = failures = errors = skipped = 0
    for suite in ET.parse(xml).getroot().iter("testsuite"):
        tests += int(suite.get("tests", 0))
        failures += int(suite.get("failures", 0))
        errors += int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    passed, failed = tests - failures - errors - skipped, failures + errors
    ok = rc in (0, 1) and not (rc == 1 and failed == 0)  # rc 2/3/4: interrupted, internal or usage error
    return passed, failed, skipped, ok


_LIT_PASS = ("Passed", "Expectedly Failed")
_LIT_FAIL = ("Failed", "Unresolved", "Unexpectedly Passed", "Timed Out")
_LIT_SKIP = ("Unsupported", "Skipped")
_LIT_LINE = re.compile(r"^\s*(Passed|Expectedly Failed|Failed|Unresolved|Unexpectedly Passed|Timed Out|Unsupported|"
                       r"Skipped|Excluded)\s*(?:Tests)?\s*(?:\(\d+\))?\s*:\s*(\d+)")


class LitRun:
    """The lit suite in a subprocess, started at once; its output goes to the terminal as it comes, or (`buffered`:
    it runs beside the pytest legs) to a file printed by `finish`."""

    def __init__(self, extra: list[str], buffered: bool = False, note: str = ""):
        self.note = note  # printed with the output
        self.proc: subprocess.Popen[str] | None = None
        self.early: Counts | None = None
        self.log = tempfile.TemporaryFile("w+") if buffered else None
        lit_dir = ROOT / "lit_tests"
        if not lit_dir.is_dir():
            print("run_tests: no lit_tests/ directory; lit counts 0")
            self.early = NONE
            return
        lit = BIN / "lit" if (BIN / "lit").exists() else shutil.which("lit")
        if lit is None:
            print("run_tests: lit is not installed (pip install -e '.[test]')")
            self.early = (0, 0, 0, False)
            return
        env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        # the sample plugin's own suite (examples/plugin: it loads the plugin with --load-plugin) runs with uopir's
        suites = [str(lit_dir), *(str(p) for p in [ROOT / "examples" / "plugin" / "lit_tests"] if p.is_dir())]
        self.proc = subprocess.Popen([str(lit), "-sv", *suites, *extra], cwd=ROOT, env=env,
                                     stdout=self.log if self.log is not None else subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)

    def finish(self) -> Counts:
        """Wait for lit, print its output (buffered) and read its counts."""
        if self.early is not None or self.proc is None:
            return self.early or NONE
        if self.note:
            print(self.note)
        if self.log is not None:
            self.proc.wait()
            self.log.seek(0)
            lines: Iterable[str] = self.log
        else:
            assert self.proc.stdout is not None
            lines = self.proc.stdout
        counts: dict[str, int] = {}
        no_tests = False
        for line in lines:
            sys.stdout.write(line)
            sys.stdout.flush()
            if m := _LIT_LINE.match(line):
                counts[m.group(1)] = counts.get(m.group(1), 0) + int(m.group(2))
            if "did not discover any tests" in line:
                no_tests = True
        rc = self.proc.wait()
        if self.log is not None:
            self.log.close()
        passed = sum(counts.get(k, 0) for k in _LIT_PASS)
        failed = sum(counts.get(k, 0) for k in _LIT_FAIL)
        skipped = sum(counts.get(k, 0) for k in _LIT_SKIP)
        if no_tests and not counts:
            print("run_tests: WARNING: lit discovered no tests; counting 0 passed")
            return NONE
        ok = bool(counts) and (rc == 0 or failed > 0)
        if not ok:
            print(f"run_tests: lit exited {rc} and its counts could not be read")
        return passed, failed, skipped, ok


def run_lit(extra: list[str]) -> Counts:
    return LitRun(extra).finish()


def lit_args() -> tuple[list[str], str]:
    """lit's extra arguments: where LLVM's FileCheck is installed every check runs with it as well as with the
    Python filecheck (the lit files must stay valid for the FileCheck MLIR users run; one lit run: a second one with
    LLVM's alone cost every uop-opt/uop-run command again), and the line that says so."""
    if (llvm := llvm_filecheck()) is not None:
        return (["--param", f"FILECHECK_ALSO={llvm}"],
                f"run_tests: lit checks with the Python filecheck and LLVM's FileCheck ({llvm})")
    return [], ("run_tests: LLVM's FileCheck is not installed (Debian: llvm-19-tools): lit runs with the Python "
                "filecheck only")


def llvm_filecheck(which: Callable[[str], str | None] = shutil.which, llvm_root: str = "/usr/lib") -> str | None:
    """LLVM's FileCheck when it is installed (Debian's llvm-NN-tools: FileCheck-NN on PATH, or llvm-NN/bin), else
    None; the newest version wins. The Python `filecheck` of the test extra is not it (a lowercase name)."""
    for name in ("FileCheck", *(f"FileCheck-{v}" for v in range(30, 13, -1))):
        if (path := which(name)) is not None and Path(path).resolve().name != "filecheck":
            return path
    found = [(int(m.group(1)), str(p)) for p in Path(llvm_root).glob("llvm-*/bin/FileCheck")
             if (m := re.fullmatch(r"llvm-(\d+)", p.parent.parent.name)) and os.access(p, os.X_OK)]
    return max(found)[1] if found else None


def xdist_workers() -> int:
    """How many pytest-xdist workers the python leg gets: one per core this process may use, 0 (no xdist) on one
    core, when pytest-xdist is not installed, or when UOPIR_TEST_WORKERS says so (a number, 0 for none)."""
    want = os.environ.get("UOPIR_TEST_WORKERS", "").strip()
    if want:
        if not want.isdigit():
            raise SystemExit(f"run_tests: UOPIR_TEST_WORKERS={want!r}: expected a number of workers (0: no xdist)")
        n = int(want)
    else:
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if n < 2:
        return 0
    probe = subprocess.run([sys.executable, "-c", "import xdist"], capture_output=True)
    if probe.returncode != 0:
        print("run_tests: pytest-xdist is not installed (pip install -e '.[test]'): the python leg runs in one process")
        return 0
    return n


def run_pytest_legs(when_backend_ends: Callable[[], None] | None = None) -> list[Counts]:
    """Leg 1: everything but BACKEND_TESTS, the frontend on the reference device (unless UOPIR_DEVICE asks
    otherwise), spread over the cores by pytest-xdist (whole files per worker: the tests of one file may share a
    fixture, as they always could); leg 2: the frontend suite on c, spread the same way; leg 3: BACKEND_TESTS. All
    three start at once (the cores stay busy to the end: the workers take the next file when one ends), unless
    UOPIR_TEST_SERIAL=1. `when_backend_ends` is called when leg 3, the shortest, has ended (lit starts then, in its
    place), only when the legs run side by side. Returns the counts of (leg 1 + leg 3, leg 2)."""
    if not (ROOT / "unit_tests").is_dir():
        print("run_tests: no unit_tests/ directory; pytest counts 0")
        return []
    os.environ.setdefault("UOPIR_DEVICE", "python")
    has_c = c_compiler_available()
    serial = os.environ.get("UOPIR_TEST_SERIAL", "") not in ("", "0")
    n = 0 if serial else xdist_workers()
    spread = ("-n", str(n), "--dist", "loadfile") if n else ()
    if not has_c:
        if has_c is False:
            print("run_tests: no C compiler: the frontend suite runs on python only")
        return [PytestLeg(extra=spread).finish(), (0, 0, 0, has_c is False)]
    backend = backend_tests()
    skip_backend = tuple(a for f in backend for a in ("--ignore", f))

    def c_leg() -> PytestLeg:
        # spread over the cores too: it is the longest leg (every frontend test compiles its kernels), and in one
        # process it ran on alone at the end while the other core had nothing left to do
        return PytestLeg(tuple(frontend_tests()), dict(os.environ, UOPIR_DEVICE="c"), buffered=not serial,
                         extra=("-p", "no:cacheprovider", *spread))

    def backend_leg() -> PytestLeg:
        return PytestLeg(tuple(backend), dict(os.environ), buffered=not serial, extra=("-p", "no:cacheprovider"))

    if serial:
        first = PytestLeg(extra=skip_backend).finish()
        print("run_tests: the compiled backends' tests")
        third = backend_leg().finish() if backend else NONE
        print("run_tests: the frontend suite on device c")
        return [_add(first, third), c_leg().finish()]
    python_leg, second_leg = PytestLeg(extra=(*skip_backend, *spread)), c_leg()
    third_leg = backend_leg() if backend else None
    if when_backend_ends is not None:
        if third_leg is not None:
            third_leg.proc.wait()
        when_backend_ends()
    first = python_leg.finish()
    print("run_tests: the frontend suite on device c (run beside the python leg)")
    second = second_leg.finish()
    print("run_tests: the compiled backends' tests (run beside the python leg)")
    third = third_leg.finish() if third_leg is not None else NONE
    return [_add(first, third), second]


def _add(a: Counts, b: Counts) -> Counts:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] and b[3]


def keep_bytecode() -> None:
    """The tests start a few hundred Python processes (uop-opt in every lit RUN line, subprocess tests): with
    $PYTHONDONTWRITEBYTECODE set (as some CI images do), each would compile every uopir module from source again
    (about 0.2 s a process). The runs below write bytecode, under the virtual environment (PYTHONPYCACHEPREFIX), so
    the source tree still gets no __pycache__ folders."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        os.environ.setdefault("PYTHONPYCACHEPREFIX", str(Path(sys.prefix) / "pycache"))


def main() -> int:
    keep_bytecode()
    debian_packages.ensure()  # the system tools some tests need (mlir-opt, ...): installed as root when missing
    lit: LitRun | None = None

    def start_lit() -> None:  # lit takes the cores of the backend leg when that ends (the first leg to end)
        nonlocal lit
        args, note = lit_args()
        lit = LitRun(args, buffered=True, note=note + " (run beside the pytest legs, once the backend leg ended)")

    counts = run_pytest_legs(start_lit)
    p_pass, p_fail, p_skip, p_ok = counts[0] if counts else NONE
    c_pass, c_fail, c_skip, c_ok = counts[1] if len(counts) > 1 else NONE
    if lit is None:  # serial, or no C compiler: lit runs after the pytest legs
        args, note = lit_args()
        lit = LitRun(args, note=note)
    l_pass, l_fail, l_skip, l_ok = lit.finish()
    passed, failed, skipped = p_pass + c_pass + l_pass, p_fail + c_fail + l_fail, p_skip + c_skip + l_skip
    print(f"run_tests: pytest {p_pass} passed, {p_fail} failed, {p_skip} skipped; frontend on c {c_pass} passed, "
          f"{c_fail} failed, {c_skip} skipped; lit {l_pass} passed, {l_fail} failed, {l_skip} skipped")
    ok = p_ok and c_ok and l_ok
    bad = failed > 0 or not ok or passed == 0
    if not ok:
        print("run_tests: a test runner errored (see above)")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
