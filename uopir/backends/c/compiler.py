"""The C compiler driver: C source -> shared object bytes, with the system compiler, through the disk cache.

Which compiler: `$CC` when set, else `clang` when installed, else `cc`. Flags: `-O2 -march=native` for speed
(`-O1` for kernels that do little work: QUICK_FLAGS), and
the ones that keep results exact: `-ffp-contract=off` (no fused multiply-add: `core.mulacc` rounds twice, as the
semantics say), `-fwrapv` (signed integer overflow wraps), no `-ffast-math`. `-fno-math-errno` only lets sqrt
compile to one instruction (errno is never read). `$UOPIR_CFLAGS` adds flags (after ours, so they can override).
With GCC, `-fno-tree-slp-vectorize` too (GCC_WORKAROUND_FLAGS): GCC 12's SLP vectorizer miscompiles kernels that
build vectors out of bool lanes on AVX-512 hosts (rows of a masked running max came out 0; the test in
test_c_backend.py holds the kernel). Our kernels carry their own vector types from kernel-expand, so the
matmul and elementwise figures in bench/c_backend.py are the same without it.

A tiered first launch (uopir.backends.c.tiered) compiles in a detached process instead (`compile_detached`): the
compiler writes a temporary file in the cache folder, which `python cache.py seal` (uopir.backends.cache) then writes
as a checked entry (header and digest, a temporary file renamed onto the entry) when the compile succeeds, so a
process that exits before the compile ends neither waits for it nor leaves a torn or unchecked entry, and the next
process finds the binary.

With clang, `compile` runs two processes: `clang -c` for the object, then the linker command clang itself would run
(read once from its `-###` plan: `_link_plan`), not clang again. Why: clang 14 spends ~20 ms starting (libLLVM and
libclang-cpp are relocated per process) and its driver ~20 ms more on the link of a one-step `clang -shared`, so a
small kernel's compile takes ~57 ms that way and ~35 ms in two steps (GCC's one step is ~21 ms); the test suite
compiles thousands of small kernels. Same compiler, flags, crt files and libraries as the one step.

The cache key is the compiler's identity (its path and `--version` line, and the host's cpu flags, since
`-march=native` binaries are not portable), the flags and the source (uopir.backends.cache).
"""
from __future__ import annotations

import hashlib
import os
import queue
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from pathlib import Path

from uopir.backends.cache import cache_enabled, cache_evict, cache_get, cache_key, cache_path, read_entry, seal_command
from uopir.backends.interface import CompileError as BaseCompileError
from uopir.backends.interface import Compiler
from uopir.ir import env
from uopir.ir.once import once

__all__ = ["CCompiler", "CompileError", "DetachedCompile", "wait_background", "find_cc", "is_gcc", "BASE_FLAGS",
           "QUICK_FLAGS", "GCC_WORKAROUND_FLAGS"]

BASE_FLAGS: tuple[str, ...] = ("-O2", "-march=native", "-ffp-contract=off", "-fwrapv", "-fno-math-errno",
                               "-fPIC", "-shared", "-std=gnu11", "-w")
# the flags for a kernel whose launch does little work (uopir.backends.c.backend.QUICK_WORK): -O1 compiles the
# kernels of a small CNN in about 60% of -O2's time, and their code, vectorized by kernel-expand already, runs
# as fast (GCC's -O2 adds its own vectorizer, scheduling and PRE, which matter only for long loops)
QUICK_FLAGS: tuple[str, ...] = ("-O1", *BASE_FLAGS[1:])
GCC_WORKAROUND_FLAGS: tuple[str, ...] = ("-fno-tree-slp-vectorize",)


@once
def _compile_pool() -> ThreadPoolExecutor:
    """The process's compile threads: one pool, also when several threads compile their first kernels at once."""
    return ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="uopir-cc")


# the detached compile: `sh -c SCRIPT sh CC ARGS...` runs the compiler, seals its output as the cache entry (SEAL:
# uopir.backends.cache's `seal_command`, a temporary file renamed onto the entry) and removes its temporary files
# (SRC OUT), whatever happens to the process that started it
_DETACHED_SCRIPT = '"$@" && {seal}; rc=$?; rm -f {src} {out}; exit $rc'
_RUNNING: set[subprocess.Popen[bytes]] = set()  # detached compiles not yet reaped (kept referenced until then)
_QUEUE: queue.SimpleQueue[DetachedCompile] = queue.SimpleQueue()
_LAUNCHER: threading.Thread | None = None
_LAUNCHER_LOCK = threading.Lock()
_QUEUED = [0]  # jobs enqueued and not started yet (in the queue or in the launcher's hand), under _LAUNCHER_LOCK


def _launcher() -> None:
    """Starts queued detached compiles, at most one per core at a time (a daemon thread: never waited for at exit,
    when a compile still queued is dropped: it has written nothing)."""
    limit = max(1, os.cpu_count() or 1)
    while True:
        job = _QUEUE.get()
        while True:
            for p in list(_RUNNING):
                if p.poll() is not None:
                    _RUNNING.discard(p)
            if len(_RUNNING) < limit:
                break
            time.sleep(0.002)
        job.start()
        with _LAUNCHER_LOCK:
            _QUEUED[0] -= 1


def _enqueue(job: DetachedCompile) -> None:
    global _LAUNCHER
    with _LAUNCHER_LOCK:
        if _LAUNCHER is None:
            _LAUNCHER = threading.Thread(target=_launcher, name="uopir-cc-launcher", daemon=True)
            _LAUNCHER.start()
        _QUEUED[0] += 1
    _QUEUE.put(job)


def wait_background() -> None:
    """Wait until every detached compile this process queued has finished (its entry sealed in the cache). A process
    normally exits without waiting (a compile still queued is dropped); a tool or bench whose next process must find
    every binary built calls this first."""
    while True:
        with _LAUNCHER_LOCK:
            queued = _QUEUED[0]
        running = list(_RUNNING)
        if not queued and not running:
            return
        for proc in running:
            proc.wait()
            _RUNNING.discard(proc)
        if queued:
            time.sleep(0.002)


class DetachedCompile:
    """A compile in its own process (session), writing its binary into the disk cache: queued, and started by a
    launcher thread when fewer compiles than cores run. `done()` polls it; `result()` starts it at once if it is
    still queued, waits for it and reads the binary through the cache's check (on a failure, or when the entry
    cannot be read or fails its check, the compile runs again in this process, so a compiler error is raised with
    its diagnostics). The process is never waited for at exit: it finishes on its own and the next process finds
    its binary in the cache (a compile still queued then has written nothing and is dropped)."""

    def __init__(self, compiler: CCompiler, source: str, path: Path, key: str):
        self.compiler, self.source, self.path, self.key = compiler, source, path, key
        self.proc: subprocess.Popen[bytes] | None = None
        self._failed = False  # the process could not be started: result() compiles in process
        self._binary: bytes | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Write the source next to the entry and start the compiler's process (once)."""
        with self._lock:
            if self.proc is not None or self._failed:
                return
            assert self.compiler.cmd is not None
            src_path = None
            try:
                fd, src_path = tempfile.mkstemp(prefix=".tmp-", suffix=".c", dir=self.path.parent)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(self.source)
                out = src_path[:-2] + ".so"
                sealer = seal_command(out, self.path, self.key)
                if sealer is None:
                    raise OSError("no Python executable to seal the entry with")
                script = _DETACHED_SCRIPT.format(seal=shlex.join(sealer), src=shlex.quote(src_path),
                                                 out=shlex.quote(out))
                args = ["/bin/sh", "-c", script, "sh", *self.compiler.cmd, "-x", "c", src_path, *self.compiler.flags,
                        "-o", out, "-lm"]
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL, start_new_session=True)
                _RUNNING.add(self.proc)
            except OSError:
                self._failed = True
                if src_path is not None:
                    try:
                        os.unlink(src_path)
                    except OSError:
                        pass

    def done(self) -> bool:
        if self._binary is not None or self._failed:
            return True
        proc = self.proc
        return proc is not None and proc.poll() is not None

    def result(self) -> bytes:
        if self._binary is None:
            self.start()
            binary = None
            if self.proc is not None:
                rc = self.proc.wait()
                _RUNNING.discard(self.proc)
                if rc == 0:
                    binary = read_entry(self.path)  # checked (a damaged entry is deleted, and compiled below)
            self._binary = binary if binary is not None else self.compiler.compile_cached(self.source)
        return self._binary


class CompileError(BaseCompileError):
    """The C compiler rejected a rendered kernel (a bug in the renderer): the message holds its diagnostics."""


def find_cc() -> list[str] | None:
    """The compiler command: $CC (split like a shell word list) if set, else clang, else cc; None when none runs."""
    cmd = env.CC.get()
    if cmd:
        return cmd if shutil.which(cmd[0]) else None
    for name in ("clang", "cc"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


@cache
def _version_text(cmd: tuple[str, ...]) -> str:
    """What `cmd --version` prints ("" when it does not run)."""
    try:
        return subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


@cache
def _identity(cmd: tuple[str, ...]) -> str:
    """The compiler's path and version line, plus a digest of the host's cpu flags (for -march=native)."""
    out = _version_text(cmd)
    version = out.splitlines()[0].strip() if out else "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
    except OSError:
        cpu = ""
    host = hashlib.sha256(cpu.encode()).hexdigest()[:12]
    return f"{' '.join(cmd)} | {version} | host {host}"


def is_gcc(cmd: list[str] | tuple[str, ...]) -> bool:
    """Whether the compiler is GCC (its version line names gcc and not clang; `cc` is usually GCC on Linux)."""
    text = _version_text(tuple(cmd)).lower()
    return "clang" not in text and ("gcc" in text or "free software foundation" in text)


_OBJ, _OUT = "uopir-link-input.o", "uopir-link-output.so"  # stand-ins in the link plan, replaced per compile


@cache
def _link_plan(cmd: tuple[str, ...], flags: tuple[str, ...]) -> tuple[str, ...] | None:
    """The linker command that `cmd FLAGS OBJ -o OUT -lm` runs (clang's `-###` lists its jobs without running them),
    with _OBJ and _OUT standing for the object and the shared object; None when it cannot be read as one job that
    names each once (the compile then runs in one step)."""
    try:
        with tempfile.TemporaryDirectory(prefix="uopir-plan-") as tmp:
            obj, out = os.path.join(tmp, _OBJ), os.path.join(tmp, _OUT)
            open(obj, "wb").close()
            r = subprocess.run([*cmd, *flags, "-x", "none", obj, "-o", out, "-lm", "-###"], capture_output=True,
                               text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    jobs = [ln for ln in r.stderr.splitlines() if ln.startswith(" \"")]
    if r.returncode != 0 or len(jobs) != 1:
        return None
    try:
        args = shlex.split(jobs[0])
    except ValueError:
        return None
    if args.count(obj) != 1 or args.count(out) != 1 or any(tmp in a for a in args if a not in (obj, out)):
        return None
    return tuple(_OBJ if a == obj else _OUT if a == out else a for a in args)


class CCompiler(Compiler):
    """Compiles one C translation unit to a shared object with the system compiler."""

    def __init__(self, cmd: list[str] | None = None, flags: tuple[str, ...] | None = None):
        self.cmd = list(cmd) if cmd is not None else find_cc()
        extra = env.CFLAGS.get()
        workaround = GCC_WORKAROUND_FLAGS if self.cmd is not None and is_gcc(self.cmd) else ()
        self.flags = (BASE_FLAGS if flags is None else tuple(flags)) + workaround + extra

    @property
    def available(self) -> bool:
        return self.cmd is not None

    @property
    def name(self) -> str:  # type: ignore[override]
        """The cache namespace: one folder per compiler identity (a digest: paths and versions are long)."""
        if self.cmd is None:
            return "c-none"
        return "c-" + hashlib.sha256(_identity(tuple(self.cmd)).encode()).hexdigest()[:16]

    def compile_async(self, source: str) -> bytes | Future[bytes]:
        """The binary now when the disk cache has it, else a Future of its compile on a worker thread (the compiler
        is a subprocess: kernels of one schedule compile in parallel, one per core)."""
        hit = cache_get(self.name, cache_key(self.name, self.flags, source))
        if hit is not None:
            return hit
        return _compile_pool().submit(self.compile_cached, source)

    def cached(self, source: str) -> bytes | None:
        """The binary of `source` from the disk cache, or None."""
        return cache_get(self.name, cache_key(self.name, self.flags, source))

    def compile_detached(self, source: str) -> DetachedCompile | Future[bytes]:
        """Start compiling `source` in a detached process that puts the binary in the disk cache (DetachedCompile);
        with the cache off, or when its folder cannot be written, a Future of a compile on a worker thread."""
        if self.cmd is not None and cache_enabled():
            key = cache_key(self.name, self.flags, source)
            dst = cache_path(self.name, key)
            try:
                dst.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                return _compile_pool().submit(self.compile_cached, source)
            job = DetachedCompile(self, source, dst, key)
            _enqueue(job)
            return job
        return _compile_pool().submit(self.compile_cached, source)

    def recompile(self, source: str, why: str) -> bytes:
        """The binary of `source` compiled again, its cache entry (which failed to load: `why`) deleted first."""
        cache_evict(self.name, cache_key(self.name, self.flags, source), why)
        return self.compile_cached(source)

    def compile(self, source: str) -> bytes:
        if self.cmd is None:
            raise CompileError("no C compiler found: set $CC or install cc or clang")
        with tempfile.TemporaryDirectory(prefix="uopir-cc-") as tmp:
            out = Path(tmp) / "kernel.so"
            link = None if is_gcc(self.cmd) else _link_plan(tuple(self.cmd), self.flags)
            if link is None:
                self._run([*self.cmd, "-x", "c", "-", *self.flags, "-o", str(out), "-lm"], source.encode())
            else:
                obj = str(Path(tmp) / "kernel.o")
                self._run([*self.cmd, "-x", "c", "-", *self.flags, "-c", "-o", obj], source.encode())
                self._run([obj if a == _OBJ else str(out) if a == _OUT else a for a in link], b"")
            if not out.exists():
                raise CompileError(f"the C compiler wrote no shared object: {shlex.join(self.cmd)}")
            return out.read_bytes()

    def _run(self, args: list[str], stdin: bytes) -> None:
        """Run one step of the compile; CompileError with its command and diagnostics when it fails."""
        try:
            r = subprocess.run(args, input=stdin, capture_output=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"could not run the C compiler {args[0]!r}: {e}") from e
        if r.returncode != 0:
            msg = r.stderr.decode(errors="replace").strip()
            raise CompileError(f"the C compiler failed (exit {r.returncode}): {shlex.join(args)}\n{msg}")
