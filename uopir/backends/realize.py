"""Realizing a tensor graph on a backend: its pipeline lowers the graph to a schedule of kernel calls, which runs
kernel by kernel through the backend interface (Backend.compile, Runtime.launch, Allocator), for every backend.

    graph --abstract the inputs--> key --schedule cache, else Backend.lower--> tensor.calls of kernel.defs
          --plan: buffer slots, compiled kernels--> launch each kernel on its buffers --> the result's Buffer

Schedule cache. A program built again on new data (each step of a training loop, each call of a model) has the same
structure on other buffers. The key is the graph with every `tensor.buffer` replaced by a placeholder numbered in
the order the graph first reaches it (same dtype, device and shape; tagged so it never equals a real buffer op) and
every `tensor.bind` by its variable (the bound value goes to the launch as a variable value). Keys are hash-consed
UOps, so two programs share an entry exactly when they are the same graph up to the renaming of their inputs: the
cache compares whole graphs, never a digest. A hit skips the lowering and the compiles and only binds the new
buffers to the plan's slots. The pipeline runs on the key itself, so a cached plan holds no data of the run that
built it. Per backend, least recently used first out after `CACHE_SIZE` programs ($UOPIR_SCHEDULE_CACHE_SIZE), and
compiled kernels likewise after `PROGRAM_CACHE_SIZE` ($UOPIR_PROGRAM_CACHE_SIZE) besides those a live plan holds: an
evicted kernel's memory, native code included, is freed once no plan or TinyJit holds it. `UOPIR_SCHEDULE_CACHE=0`
turns the schedule cache off.

Debug output (`UOPIR_DEBUG=n`, as tinygrad's DEBUG, on stderr): at 2 and above one line per launched kernel
(device, running count, name, buffers, time of the run alone, GFLOP/s and GB/s from the work `estimates.estimate`
counts in the compiled program at the launch's sizes, and those counts); a compiling backend prints each kernel's
source at 4 (`// C source of kernel NAME`) and its device program at 6 (`// device program of kernel NAME`); at 5
and above each kernel's IR (`// kernel IR of kernel NAME`: the kernel.def as kernel-to-device receives it, or as
the interpreter runs it), once per lowering. `compiled(backend, root)` gives the compiled programs themselves.

Capture (the frontend's JIT): inside `with capture() as launches:` every realize of this thread appends a `Launch`
(backend, plan, the input buffers bound to its slots, variable values, result buffer); `run_plan` runs such a plan
again on other buffers, with no key, lowering or compile.

Symbolic variables lower to `kernel.var`: the key holds each variable, `cache_key` collects the bound values and
every launch gets them by name, so one schedule serves every value. The realizing backend runs every
kernel of a schedule, including those of values on other devices (every device's buffers live in host memory today).
"""
from __future__ import annotations

import functools
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from uopir.backends.buffers import BUFFERS
from uopir.backends.estimates import Estimates, estimate
from uopir.dialects import core, device, kernel, tensor
from uopir.dialects.core import const_value
from uopir.dialects.kernel import stored_params
from uopir.dialects.semantics import bf16_round, const_array
from uopir.ir import env, trace
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import DType, dtypes
from uopir.ir.printer import print_ir
from uopir.ir.uop import UOp
from uopir.passes.instruments import PassEvent, PassInstrumentation

if TYPE_CHECKING:
    from uopir.backends.interface import Allocator, Backend, Buffer, Program

__all__ = ["realize", "compiled", "cache_key", "plan", "debug_level", "debug_print", "print_compiled", "launch_line",
           "print_kernel_ir", "kernel_ir_printer", "schedule_cache_enabled",
           "clear_schedule_cache", "STATS", "RealizeStats", "CACHE_SIZE", "PROGRAM_CACHE_SIZE", "DEBUG_ENV",
           "SCHEDULE_CACHE_ENV", "SCHEDULE_CACHE_SIZE_ENV", "PROGRAM_CACHE_SIZE_ENV", "schedule_cache_size",
           "program_cache_size", "cached_counts", "Launch", "capture", "run_plan", "const_result"]

DEBUG_ENV = env.DEBUG.name
SCHEDULE_CACHE_ENV = env.SCHEDULE_CACHE.name
# The bounds of the in-memory caches, per backend. A compiled kernel costs about 10-50 KB (its IR, source and binary,
# and native memory: an LLVM engine's share or a dlopen'ed library), so full caches stay under about 20 MB; an entry
# past a bound is dropped least recently used first, and its native memory is freed once nothing else holds it.
CACHE_SIZE = 256  # plans (executable schedules) kept per backend; $UOPIR_SCHEDULE_CACHE_SIZE overrides
PROGRAM_CACHE_SIZE = 256  # compiled kernels kept per backend besides those of live plans; $UOPIR_PROGRAM_CACHE_SIZE
SCHEDULE_CACHE_SIZE_ENV = env.SCHEDULE_CACHE_SIZE.name
PROGRAM_CACHE_SIZE_ENV = env.PROGRAM_CACHE_SIZE.name
INPUT_TAG = "realize.input"  # the tag of the placeholder buffers in a schedule-cache key

def debug_level() -> int:
    """$UOPIR_DEBUG (or tinygrad's DEBUG) as a level; EnvError naming the variable for a value that is not one."""
    return env.DEBUG.get()


def debug_print(text: str) -> None:
    """One UOPIR_DEBUG message, on stderr (a program's own output stays alone on stdout)."""
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def print_compiled(program: UOp, name: str, source: str, language: str, comment: str = "//") -> None:
    """What a backend's compile shows: at UOPIR_DEBUG >= 6 the kernel's device program, at >= 4 its source; each
    under a header naming what it is and the kernel."""
    level = debug_level()
    if level >= 6:
        debug_print(f"{comment} device program of kernel {name}\n{print_ir(program)}")
    if level >= 4:
        debug_print(f"{comment} {language} of kernel {name}\n{source}")


def print_kernel_ir(kdef: UOp, name: str) -> None:
    """UOPIR_DEBUG=5's dump of one kernel.def, under its header."""
    debug_print(f"// kernel IR of kernel {name}\n{print_ir(kdef)}")


class _KernelIRPrinter(PassInstrumentation):
    """UOPIR_DEBUG >= 5 where the pipeline lowers kernels to device programs: each kernel.def as kernel-to-device
    receives it (the kernel IR after the kernel passes; what compile sees is already a device.program)."""

    def run_before_pass(self, event: PassEvent, ir: UOp) -> None:
        if event.pass_name != "kernel-to-device":
            return
        if ir.op is kernel.DEF:
            print_kernel_ir(ir, ir.arg if isinstance(ir.arg, str) else "?")
            return
        for u in ir.toposort():
            if u.op is tensor.CALL and isinstance(u.arg, tuple) and u.arg[0].op is kernel.DEF:
                print_kernel_ir(u.arg[0], u.arg[1])


def schedule_cache_enabled() -> bool:
    return env.SCHEDULE_CACHE.get()


def _limit(var: env.EnvVar[int], default: int) -> int:
    return var.get() if var.is_set() else default  # the module's bound (tests lower it) unless the variable is set


def schedule_cache_size() -> int:
    """How many plans the schedule cache keeps per backend: $UOPIR_SCHEDULE_CACHE_SIZE, else CACHE_SIZE."""
    return _limit(env.SCHEDULE_CACHE_SIZE, CACHE_SIZE)


def program_cache_size() -> int:
    """How many compiled kernels each backend keeps besides those of live plans: $UOPIR_PROGRAM_CACHE_SIZE, else
    PROGRAM_CACHE_SIZE."""
    return _limit(env.PROGRAM_CACHE_SIZE, PROGRAM_CACHE_SIZE)


@dataclass
class RealizeStats:
    """Counters since the process started (tests and benchmarks read their differences)."""

    lowerings: int = 0  # schedules built by running the pipeline
    compiles: int = 0  # kernels compiled (Backend.compile called: not in the compiled-kernel cache)
    cache_hits: int = 0  # schedules taken from the cache
    kernels: int = 0  # kernels launched
    interpreted: int = 0  # graphs realized by interpreting them whole (none today; kept for the counters' readers)


STATS = RealizeStats()


# ---- the plan: a schedule made executable, free of the data it was built from ---------------------------------------
@dataclass
class Step:
    """One kernel launch of a plan: its kernel, buffer slots and compiled program."""

    name: str
    kernel: UOp  # the kernel.def
    args: tuple[int, ...]  # buffer slots in parameter order
    program: Program
    free: tuple[int, ...] = ()  # temporary slots not used after this step

    @functools.cached_property
    def writes(self) -> frozenset[int] | None:
        """The parameters the kernel stores into (None: not known, any may be)."""
        return stored_params(self.kernel)


@dataclass
class Plan:
    """Slots 0..n_inputs-1 are the inputs (in key order), then the temporaries the schedule allocates."""

    n_inputs: int
    temps: list[tuple[DType, tuple[int, ...]]]
    steps: list[Step]
    result: int | UOp  # a slot, or a const computed directly
    copy_result: str = ""  # "entry" / "exit": the result is an input's contents before / after the schedule (a copy)
    shape: tuple[int, ...] = field(default=())


class _Cache:
    """One backend's cached plans and compiled kernels, each an LRU with its bound. `live` finds a kernel that is
    still held elsewhere (by a cached plan, a TinyJit's capture, a realize running now), so a kernel is never compiled
    and loaded twice while one copy lives."""

    def __init__(self) -> None:
        self.plans: OrderedDict[tuple[UOp, str, str, str], Plan] = OrderedDict()  # (key, pipeline, UOPIR_NOOPT,
        # UOPIR_BEAM) -> plan
        self.programs: OrderedDict[UOp, Program] = OrderedDict()
        self.live: weakref.WeakValueDictionary[UOp, Program] = weakref.WeakValueDictionary()

    def keep(self, kdef: UOp, prog: Program) -> None:
        """Make `prog` the most recently used kernel, dropping the least recently used past the bound (under _LOCK)."""
        self.live[kdef] = prog
        self.programs[kdef] = prog
        self.programs.move_to_end(kdef)
        limit = program_cache_size()
        while len(self.programs) > limit:
            self.programs.popitem(last=False)


_CACHES: weakref.WeakKeyDictionary[Backend, _Cache] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()  # realize may run in several threads: the caches' bookkeeping is atomic


def _cache(backend: Backend) -> _Cache:
    c = _CACHES.get(backend)
    if c is None:
        c = _CACHES[backend] = _Cache()
    return c


def clear_schedule_cache() -> None:
    """Forget every cached plan and compiled kernel (of every backend)."""
    with _LOCK:
        _CACHES.clear()


def cached_counts(backend: Backend) -> tuple[int, int]:
    """(plans, compiled kernels) the caches of `backend` hold now (the second counts the program cache's entries,
    not the kernels that only live plans hold)."""
    with _LOCK:
        c = _CACHES.get(backend)
        return (0, 0) if c is None else (len(c.plans), len(c.programs))


def _err(u: UOp, msg: str) -> IRError:
    return IRError(diagnostics=[diag_at(u, msg)])


def cache_key(root: UOp) -> tuple[UOp, list[UOp], dict[str, int], bool]:
    """(the schedule-cache key, the input buffer ops in slot order, the bound variables' values, whether the graph
    has symbolic variables), in one walk over the graph."""
    new: dict[UOp, UOp] = {}
    inputs: list[UOp] = []
    var_vals: dict[str, int] = {}
    symbolic = False
    BUFFER, VAR, BIND = tensor.BUFFER, tensor.VAR, tensor.BIND
    for u in root.toposort():
        op = u.op
        if op is BUFFER:
            _, dev, shape = u.arg  # (id, device, shape)
            k = (len(inputs), u.dtype, dev, shape)
            ph = _PLACEHOLDERS.get(k)
            new[u] = _placeholder(k) if ph is None else ph
            inputs.append(u)
            continue
        src = u.src
        if not src:
            new[u] = u
            if op is VAR:
                symbolic = True
            continue
        if op is VAR:
            symbolic = True
        elif op is BIND:
            symbolic = True
            var, val = src
            if var.op is VAR and val.op is core.CONST:
                var_vals[var.attrs.name] = int(const_value(val))
                new[u] = var  # the key holds the variable, not its value
                continue
        nsrc = tuple(map(new.__getitem__, src))
        new[u] = u if nsrc == src else UOp(op, u.dtype, nsrc, u.arg, u.tag)  # == compares UOps by identity
    return new[root], inputs, var_vals, symbolic


# The placeholder buffers of keys, by (slot, dtype, device, shape): made once (building one hash-conses a nested
# tuple, ~1 us). They hold no data; the table is emptied past _PLACEHOLDERS_MAX entries (they are rebuilt on need).
_PLACEHOLDERS: dict[tuple, UOp] = {}
_PLACEHOLDERS_MAX = 4096


def _placeholder(k: tuple) -> UOp:
    if len(_PLACEHOLDERS) >= _PLACEHOLDERS_MAX:
        _PLACEHOLDERS.clear()
    slot, dtype, dev, shape = k
    u = _PLACEHOLDERS[k] = UOp(tensor.BUFFER, dtype, (), (slot, dev, shape), INPUT_TAG)
    return u


def _input_buffers(inputs: list[UOp]) -> list[Buffer]:
    out = []
    for u in inputs:
        bid, _device, shape = u.arg
        buf = BUFFERS.get(bid)
        if buf is None:
            raise _err(u, f"no buffer with id {bid} has data in this process (IR read from text names buffers, it "
                          f"does not hold them)")
        if buf.dtype is not u.dtype or buf.shape != tuple(shape):
            raise _err(u, f"buffer {bid} is {buf.dtype}{list(buf.shape)}, but the IR declares {u.dtype}{list(shape)}")
        out.append(buf)
    return out


def _compile(backend: Backend, cache: _Cache, kdef: UOp, name: str) -> Program:
    with _LOCK:
        prog = cache.programs.get(kdef) or cache.live.get(kdef)
        if prog is not None:
            cache.keep(kdef, prog)
            return prog
    if kdef.op is kernel.DEF and debug_level() >= 5:  # compiled as kernel IR (python); else _KernelIRPrinter
        print_kernel_ir(kdef, name)
    prog = backend.compile(kdef, name)
    if trace.ACTIVE is not None and prog.source is not None:  # the visualizer shows each kernel's source
        trace.ACTIVE.add_source(name, backend.device, prog.source)
    with _LOCK:
        STATS.compiles += 1
        cache.keep(kdef, prog)
    return prog


class _CompileAhead(PassInstrumentation):
    """Compiles each kernel as soon as a pass has made it a device.program (with a lowering that runs kernel by
    kernel, `default{per-kernel=true}`, while the next kernel lowers: the C compiler runs in the background). A
    program it cannot compile is left to the plan, which compiles it again and reports the error there. `held` keeps
    what it compiled until the plan takes it (the program cache may drop a kernel of a schedule larger than itself)."""

    def __init__(self, backend: Backend, cache: _Cache, held: list[Program] | None = None):
        self.backend, self.cache, self.held = backend, cache, held

    def run_after_pass(self, event: PassEvent, before: UOp, after: UOp) -> None:
        if after.op is device.PROGRAM and before is not after and self.backend.compiler is not None:
            try:
                prog = _compile(self.backend, self.cache, after, after.arg if isinstance(after.arg, str) else "program")
            except Exception:  # noqa: BLE001 - reported by the plan's own compile of this kernel
                return
            if self.held is not None:
                self.held.append(prog)


def _plan(backend: Backend, cache: _Cache, key: UOp, n_inputs: int) -> Plan:
    """Lower the key with the backend's pipeline and make its schedule executable."""
    held: list[Program] = []  # the kernels compiled during the lowering, until the plan holds them
    insts: list[PassInstrumentation] = [_CompileAhead(backend, cache, held)]
    if debug_level() >= 5:
        insts.append(_KernelIRPrinter())
    lowered = backend.lower(key, instruments=insts)
    res = lowered.src[0] if lowered.op is core.SINK else lowered
    slots: dict[UOp, int] = {}
    temps: list[tuple[DType, tuple[int, ...]]] = []
    steps: list[Step] = []
    last_use: dict[int, int] = {}
    for u in lowered.toposort():
        if u.op is tensor.BUFFER:
            if u.tag == INPUT_TAG:
                slots[u] = u.attrs.id
            elif u not in slots:
                slots[u] = n_inputs + len(temps)
                temps.append((u.dtype, tuple(u.attrs.shape)))
        elif u.op is tensor.CALL:
            bad = next((x for x in u.src if x.op is not tensor.BUFFER and x.op is not tensor.VAR
                        and x.dtype is not dtypes.void), None)
            if bad is not None:
                raise _err(u, f"tensor.call operands must be tensor.buffer values, variables (or void values that "
                              f"order it), got {bad.op.name}")
            kdef, name = u.arg
            args = tuple(slots[x] for x in u.src if x.op is tensor.BUFFER)
            for a in args:
                last_use[a] = len(steps)
            steps.append(Step(name, kdef, args, _compile(backend, cache, kdef, name)))
    shape = res.shape if res.shape is not None else ()
    copy = ""
    if res.op is tensor.AFTER:
        result: int | UOp = slots[res.operands.buffer]
        copy = "exit" if result < n_inputs else ""
    elif res.op is tensor.BUFFER:  # an input, as it was on entry (a kernel of the schedule may write it)
        result, copy = slots[res], "entry"
    elif res.op is core.CONST:
        result = res
    else:
        raise _err(res, f"the pipeline of device {backend.device!r} ({backend.pipeline!r}) left a {res.op.name} as "
                        f"the result; realize runs a schedule (tensor.calls, the result a tensor.after of a buffer)")
    for slot, i in last_use.items():
        if slot >= n_inputs and slot != result:
            steps[i].free += (slot,)
    return Plan(n_inputs, temps, steps, result, copy, shape)


def _run(backend: Backend, plan: Plan, inputs: list[Buffer], var_vals: dict[str, int]) -> Buffer:
    alloc = backend.allocator
    bufs: list[Buffer | None] = [*inputs]
    for d, s in plan.temps:
        bufs.append(alloc.alloc(d, s))
    out = _copy(alloc, inputs[plan.result]) if plan.copy_result == "entry" else None
    dbg = env.DEBUG.get()
    runtime = backend.runtime
    launch, sync = runtime.launch, runtime.synchronize
    for st in plan.steps:
        args = [bufs[i] for i in st.args]
        if dbg >= 2:
            backend.runtime.ready(st.program)
            t0 = time.perf_counter()
            launch(st.program, args, var_vals=var_vals)
            sync()
            dt = time.perf_counter() - t0
            STATS.kernels += 1
            debug_print(launch_line(backend.device, STATS.kernels, st.name, st.program, args, var_vals, dt))
        else:
            launch(st.program, args, var_vals=var_vals)
            STATS.kernels += 1
        for i in st.free:
            bufs[i] = None
    sync()
    if isinstance(plan.result, UOp):
        return const_result(alloc, plan)
    if out is None:
        out = bufs[plan.result]
        assert out is not None
        if plan.copy_result == "exit":  # never alias an input: a later write to it must not change this value
            out = _copy(alloc, out)
    return out


def const_result(alloc: Allocator, plan: Plan) -> Buffer:
    """The result of a plan whose result is a constant, in a fresh buffer of `alloc`."""
    assert isinstance(plan.result, UOp)
    arr = np.array(np.broadcast_to(const_array(plan.result.dtype, const_value(plan.result)), plan.shape))
    return alloc.from_numpy(arr, plan.result.dtype)


def launch_line(device: str, count: int, name: str, prog: Program, args: list[Buffer], var_vals: dict[str, int],
                dt: float) -> str:
    """The UOPIR_DEBUG=2 line of one timed launch: device, running count, kernel, buffers, time, rates, work."""
    est = _estimates(prog, var_vals, [b.nbytes for b in args])
    gflops, gbs = est.rates(dt)
    return (f"*** {device:<8} {count:6d} {name:<32} arg {len(args):2d}  tm {dt * 1e6:11.2f}us  {gflops:9.3f} GFLOP/s "
            f"{gbs:9.3f} GB/s  ({est.flops} flop, {est.bytes} B)")


def kernel_ir_printer() -> PassInstrumentation | None:
    """The instrument that prints each kernel's IR at UOPIR_DEBUG >= 5 (for a lowering outside realize), else None."""
    return _KernelIRPrinter() if debug_level() >= 5 else None


def _estimates(prog: Program, var_vals: dict[str, int], nbytes: list[int]) -> Estimates:
    """The work of one launch (UOPIR_DEBUG=2), counted once per program, variable values and buffer sizes."""
    key = (tuple(sorted(var_vals.items())), tuple(nbytes))
    memo = _ESTIMATES.setdefault(prog, {})
    est = memo.get(key)
    if est is None:
        est = memo[key] = estimate(prog.program, var_vals, nbytes)
    return est


_ESTIMATES: weakref.WeakKeyDictionary[Program, dict[tuple, Estimates]] = weakref.WeakKeyDictionary()


def _copy(alloc: Allocator, buf: Buffer) -> Buffer:
    """A fresh buffer of `alloc` holding buf's value (a bf16 carrier rounded, as a read of the buffer is)."""
    arr = buf.numpy()
    return alloc.from_numpy(bf16_round(arr) if buf.dtype is dtypes.bfloat16 else arr, buf.dtype)


def plan(backend: Backend, key: UOp, n_inputs: int) -> Plan:
    """The executable schedule of a cache key on `backend`: from the schedule cache, else lowered (and cached)."""
    on = env.SCHEDULE_CACHE.get()
    ck = (key, backend.pipeline, env.NOOPT.raw(), env.BEAM.raw())  # the env vars change the lowering
    with _LOCK:
        cache = _cache(backend)
        p = cache.plans.get(ck) if on else None
        if p is not None:
            cache.plans.move_to_end(ck)
            STATS.cache_hits += 1
            return p
    p = _plan(backend, cache, key, n_inputs)  # outside the lock: two threads may lower one program, both correctly
    with _LOCK:
        STATS.lowerings += 1
        if on:
            cache.plans[ck] = p
            limit = schedule_cache_size()
            while len(cache.plans) > limit:
                cache.plans.popitem(last=False)
    return p


def compiled(backend: Backend, root: UOp) -> list[Program]:
    """The compiled kernels realizing `root` on `backend` would run, in order (the plan's, from the schedule cache
    or lowered and compiled now; nothing runs). Each Program has its `name`, its `source` (None on the interpreter)
    and the `program` the backend compiled (the device.program, or the kernel.def on python)."""
    key, inputs, _, _ = cache_key(root)
    return [st.program for st in plan(backend, key, len(inputs)).steps]


# ---- capture: the launches of a stretch of code, to run again on other buffers (the frontend's JIT) ------------------
@dataclass
class Launch:
    """One realize as `capture` records it."""

    backend: Backend
    plan: Plan
    inputs: list[Buffer]  # the buffers bound to the plan's input slots, in slot order
    var_vals: dict[str, int]
    result: Buffer


_CAPTURING = threading.local()


@contextmanager
def capture() -> Iterator[list[Launch]]:
    """Record every realize of this thread inside the block, in order (nested captures record into the innermost)."""
    stack: list[list[Launch]] = _CAPTURING.__dict__.setdefault("stack", [])
    launches: list[Launch] = []
    stack.append(launches)
    try:
        yield launches
    finally:
        stack.pop()


def run_plan(backend: Backend, plan: Plan, inputs: list[Buffer], var_vals: dict[str, int]) -> Buffer:
    """Run a plan (from a `Launch`) on `inputs` bound to its input slots: no cache key, lowering or compile."""
    if len(inputs) != plan.n_inputs:
        raise ValueError(f"run_plan: the plan has {plan.n_inputs} input slots, got {len(inputs)} buffers")
    return _run(backend, plan, inputs, var_vals)


def realize(backend: Backend, root: UOp) -> Buffer:
    """The value of a tensor-level graph, computed on `backend` kernel by kernel, in a fresh buffer of its device."""
    key, inputs, var_vals, symbolic = cache_key(root)
    if symbolic and not var_vals and any(u.op is tensor.VAR for u in root.toposort()):
        raise _err(root, "realizing needs every variable bound (Variable(...).bind(value))")
    bufs = _input_buffers(inputs)
    p = plan(backend, key, len(inputs))
    out = _run(backend, p, bufs, var_vals)
    stack = _CAPTURING.__dict__.get("stack")  # (getattr would raise and catch on a thread that never captured)
    if stack:
        stack[-1].append(Launch(backend, p, bufs, dict(var_vals), out))
    return out
