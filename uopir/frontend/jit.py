"""TinyJit: capture the kernels a function runs, then replay them on new inputs without building, scheduling or
compiling anything (tinygrad's TinyJit, on uopir's realize).

    @TinyJit
    def step(x: Tensor, y: Tensor) -> Tensor: ...

Call 1 runs the function as it is (a warm-up: optimizer state, lazily built values, caches settle). Call 2 runs it
inside `realize.capture()`, which records every realize it does: the executable plan (compiled kernels and buffer
slots, from the schedule cache), the buffers bound to its input slots and the result buffer. From call 3 on the
function does not run: each recorded plan runs again (`realize.run_plan`) with its slots rebound:

- a buffer of a Tensor argument at capture -> that argument's buffer now (arguments are realized first);
- a buffer a recorded realize produced, or a fresh buffer Tensor.realize_all allocated as the target of a value ->
  the buffer made for it in this replay (so each replay returns new buffers and never overwrites an earlier result);
- any other buffer (parameters, optimizer state, constants) -> the same buffer, so in-place assigns (an optimizer's
  step) update it again on every replay.

On the host-cpu backends (c, llvm) a replay is one native call (uopir.backends.cpu.graph): the first replay builds a
table of every kernel's function pointer and arguments, and each replay writes the addresses of its inputs and of
the buffers it returns into it and runs it, the GIL released, instead of a Python launch per kernel. The graph's
other intermediates (plan temporaries, results not returned) are allocated once and reused by every replay (a lock
keeps two threads replaying one TinyJit from sharing them at once). Plans with a non-host kernel, UOPIR_DEBUG >= 2,
no C compiler, UOPIR_GRAPH=0, or inputs whose memory overlaps another input or a captured buffer replay the Python
way below.

`TinyJit(f, constants=[...])` names tensors the caller promises not to change while the capture lives (a model's
weights; uopir.onnx passes its initializers). The native replay then runs each kernel that reads only those and what
such kernels wrote (a conv's weights re-packed into channel blocks) once, when its graph is built, and replays the
rest. A kernel whose buffers a replayed launch writes after all (an assign into a constant, an output overwritten
later) stays in the replay, and so does whatever reads what it writes.

The return value has the structure of the captured one with every Tensor (realized at capture) rebound the same way;
other values come back as they were captured. Random tensors the function draws (Tensor.rand/randn/uniform/..., dropout
masks: host data) are drawn again on each replay, from the same generator in the same order. A replay refuses Tensor
arguments whose number, shapes, dtypes or devices differ from the capture's, and non-Tensor arguments that differ (they
may have shaped the graph): `reset()` forgets the capture. `TinyJit(f, warmup=False)` captures on the first call
(uopir.onnx's plans: nothing lazy to settle first). A capture holds its plans, and so their compiled kernels, until
`reset()` or until the TinyJit is dropped: the realize module's bounded caches may evict them meanwhile without a
recompile (a kernel still held is found again), and memory goes when the TinyJit does. Other host-side work of the
function (`.item()`, data made from numpy, Python side effects) is frozen at the capture, as in tinygrad.
"""
from __future__ import annotations

import bisect
import functools
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from uopir.backends import realize as R
from uopir.backends.buffers import buffer_of, buffer_op
from uopir.backends.cpu.runtime import SCRATCH_ADDR, array_address, host_info, overlaps
from uopir.dialects import tensor as T
from uopir.dialects.semantics import np_dtype
from uopir.frontend import dtype_promotion as P
from uopir.frontend.creation import RANDOM_SOURCES
from uopir.frontend.realization import FRESH_TARGETS
from uopir.frontend.tensor import Tensor
from uopir.ir.dtype import dtypes

__all__ = ["TinyJit", "JitError"]

Ret = TypeVar("Ret")


class JitError(ValueError):
    """A jitted function was called in a way its capture cannot replay."""


@dataclass
class _Slot:
    kind: str  # "in" (argument index), "made" (index into the replay's made buffers), "fixed" (the buffer itself)
    index: int = 0
    buf: Any = None


@dataclass
class _Step:
    launch: R.Launch
    slots: list[_Slot]
    fresh: list[tuple[int, Any]]  # (made index, captured buffer) of the fresh targets allocated before this launch
    made: int  # made index of this launch's result


class _NoGraph(Exception):
    """A buffer of the capture that the native graph cannot pass (not in host memory)."""


@dataclass
class _NativeReplay:
    graph: Any  # uopir.backends.cpu.graph.LaunchGraph
    per_replay: list[int]  # made indices a replay binds anew: returned buffers, random draws
    fresh: list[tuple[int, Any, Any, tuple[int, ...]]]  # (made index, allocator, dtype, shape) allocated per replay
    fixed: list[tuple[int, int]]  # the captured buffers' memory, merged disjoint ranges in address order
    carriers: bool = False  # a buffer made per replay is bfloat16 (its host array a carrier, not its values)
    writes_inputs: bool = True  # a launch may write an input buffer (then a caller's array is never bound as one)
    fresh_np: list[tuple[tuple[str, int], Any, tuple[int, ...]]] | None = None  # fresh's (key, numpy dtype, shape)

    def hits_fixed(self, span: tuple[int, int]) -> bool:
        """Whether [start, end) overlaps a captured buffer (an input bound to a parameter: aliasing to re-check)."""
        i = bisect.bisect_right(self.fixed, (span[0], 1 << 64))
        return (i > 0 and self.fixed[i - 1][1] > span[0]) or (i < len(self.fixed) and self.fixed[i][0] < span[1])


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _flatten(ret: Any) -> list[Tensor]:
    out: list[Tensor] = []
    stack = [ret]
    while stack:
        o = stack.pop()
        if isinstance(o, Tensor):
            out.append(o)
        elif isinstance(o, list | tuple):
            stack.extend(reversed(o))
        elif isinstance(o, dict):
            stack.extend(reversed(list(o.values())))
    return out


def _rebuild(ret: Any, new: dict[int, Tensor]) -> Any:
    """ret with each Tensor t replaced by new[id(t)] (structures: tuple, list, dict; iterative over nesting)."""
    if isinstance(ret, Tensor):
        return new[id(ret)]
    if isinstance(ret, list | tuple):
        vals = [_rebuild(x, new) for x in ret]  # nesting depth of a return value, not of a graph
        return type(ret)(vals) if not hasattr(ret, "_fields") else type(ret)(*vals)
    if isinstance(ret, dict):
        return {k: _rebuild(v, new) for k, v in ret.items()}
    return ret


def _reads_only(args: list[Any], params: Any, written: frozenset[int], const: set[int]) -> bool:
    """Whether a kernel reads only constant buffers (by address) and writes only buffers the graph owns: no buffer
    bound per replay (a key, not an address) and nothing constant."""
    if not const:
        return False
    for i, (d, a) in enumerate(zip(params, args, strict=False)):
        if d is None:
            continue
        if not isinstance(a, int) or (a in const) == (i in written):
            return False
    return bool(written)


def _split_constant(entries: list[tuple[Any, bool, set[int] | None, set[int]]]) -> tuple[list[Any], list[Any]]:
    """(every launch a replay runs, those that run once at the build). Of the kernels that read only constants, one
    stays in the replay when a launch that stays writes a buffer it reads or writes (an assign into a weight, an
    output a later launch overwrites: the precomputed value would go stale), and so on to a fixed point (what
    reads a buffer a kernel brought back into the replay writes comes back too)."""
    hoist = [h for _, h, _, _ in entries]
    while True:
        written: set[Any] = set()
        for (_, _, w, _), h in zip(entries, hoist, strict=True):
            if not h:
                if w is None:  # a launch that may write anything
                    return [e for e, *_ in entries], []
                written |= w
        back = [i for i, (_, _, w, r) in enumerate(entries) if hoist[i] and ((w or set()) | r) & written]
        if not back:
            break
        for i in back:
            hoist[i] = False
    return [e for (e, *_), h in zip(entries, hoist, strict=True) if not h], \
        [e for (e, *_), h in zip(entries, hoist, strict=True) if h]


def _sig(t: Tensor) -> tuple:
    return (tuple(t.shape), t.dtype, t.device)


def _fmt(sig: tuple) -> str:
    return f"shape {sig[0]} dtype {sig[1]!r} on {sig[2]}"


class TinyJit(Generic[Ret]):
    """Decorator: capture the function's kernels on its second call, replay them from the third on."""

    def __init__(self, fxn: Callable[..., Ret], *, warmup: bool = True, constants: Iterable[Tensor] = ()) -> None:
        self.fxn = fxn
        self.warmup = warmup  # False: the first call captures (a function with nothing lazy to settle first)
        # tensors the caller promises not to change while a capture lives (a model's weights): in the native replay,
        # kernels that read nothing else (weight re-packing) run once when the graph is built, not on every replay
        self.constants = list(constants)
        functools.update_wrapper(self, fxn)
        self.reset()

    def reset(self) -> None:
        """Forget the capture: the next call runs the function again (as a warm-up), the one after captures."""
        self.cnt = 0 if self.warmup else 1
        self.steps: list[_Step] = []
        self.n_made = 0
        self.in_sigs: list[tuple] = []
        self.other_args: tuple = ()
        self.ret: Any = None
        self.ret_slots: dict[int, _Slot] = {}
        self._ret_flat: list[tuple[int, _Slot, str]] = []  # per returned Tensor (_flatten order): id, slot, device
        self.randoms: list[tuple[int, Any, Any, tuple[int, ...]]] = []
        self._keep: list[Any] = []
        self._graph: _NativeReplay | None | bool = None  # None: not built yet; False: this capture cannot have one
        self._waiting: Any = None  # a kernel whose C binary was still compiling when the graph was last tried
        self._graph_lock = threading.Lock()

    @property
    def captured(self) -> bool:
        return self.cnt >= 2

    def __get__(self, obj: Any, objtype: Any = None) -> Any:  # a jitted method binds its instance
        return self if obj is None else functools.partial(self.__call__, obj)

    @staticmethod
    def _split(args: tuple, kwargs: dict) -> tuple[list[Tensor], tuple]:
        items = list(args) + [kwargs[k] for k in sorted(kwargs)]
        tensors = [a for a in items if isinstance(a, Tensor)]
        others = tuple((i, a) for i, a in enumerate(items) if not isinstance(a, Tensor)) + (tuple(sorted(kwargs)),)
        return tensors, others

    @staticmethod
    def _input_buffers(tensors: list[Tensor]) -> list[Any]:
        Tensor.realize_all(*tensors)
        out = []
        for i, t in enumerate(tensors):
            if t.uop.op is not T.BUFFER:
                raise JitError(f"TinyJit: Tensor argument {i} of shape {t.shape} is not a plain buffer once realized "
                               f"(a symbolic shape?); jitted functions take tensors of static shape")
            out.append(buffer_of(t.uop))
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Ret:
        tensors, others = self._split(args, kwargs)
        if self.cnt == 0:
            self.cnt = 1
            ret = self.fxn(*args, **kwargs)
            Tensor.realize_all(*_flatten(ret))
            return ret
        if self.cnt == 1:
            return self._capture(tensors, others, args, kwargs)
        self._check(tensors, others)
        inputs = self._input_buffers(tensors)
        return self._result(inputs, self._replay(inputs))

    def replay_buffers(self, inputs: list[Any]) -> list[tuple[Any, bool]]:
        """Replay the capture on input Buffers (one per captured Tensor argument, of its shape and dtype: a JitError
        otherwise) without building a Tensor: each returned Tensor's buffer, in the order of the return value's
        Tensors, with whether it is this replay's own new buffer (else an input or a captured buffer, which the
        caller must copy before handing it out). uopir.onnx's steady calls come here."""
        if not self.captured:
            raise JitError("TinyJit.replay_buffers: nothing is captured yet")
        if len(inputs) != len(self.in_sigs):
            raise JitError(f"TinyJit.replay_buffers: {len(inputs)} buffers for {len(self.in_sigs)} captured inputs")
        for i, (b, sig) in enumerate(zip(inputs, self.in_sigs, strict=True)):
            if b.shape != sig[0] or b.dtype is not sig[1] or b.device != sig[2]:
                raise JitError(f"TinyJit.replay_buffers: buffer {i} is {b!r}, the capture has {_fmt(sig)}")
        made = self._replay(inputs)
        return [(inputs[s.index] if s.kind == "in" else made[s.index] if s.kind == "made" else s.buf,
                 s.kind == "made") for _, s, _ in self._ret_flat]

    def replay_arrays(self, arrays: list[np.ndarray], borrowed: bool = False) -> list[np.ndarray] | None:
        """The native replay on host arrays the caller made for this call (one per captured input, C-contiguous, of
        its shape and element type; nothing else references them): each returned Tensor's values as a numpy array
        of this call's own (a captured buffer, or an array returned twice, is copied). The replay's result buffers
        are plain numpy arrays bound into the launch graph, with no Buffer, pool or alias check around them: the
        arrays are fresh, so none overlaps another or a captured buffer. None when the capture has no native graph
        yet (built by a replay through `replay_buffers`), draws random numbers, returns bfloat16 (a carrier array,
        not its values) or runs under UOPIR_DEBUG >= 2 (a kernel-timed replay). uopir.onnx's steady calls of numpy
        feeds come here (uopir.onnx.replay).

        `borrowed`: the arrays are the caller's own (C-contiguous views of its feeds), which the kernels then read
        in place, saving a copy of every input per call (a memory-bound op on a 3 MB input: ~40% of its time),
        unless a launch may write an input, two of them overlap, one overlaps a captured buffer or one is not
        aligned to its element type: then each is copied first, as before. An input returned as a result is then
        always a copy."""
        g = self._graph
        if not isinstance(g, _NativeReplay) or self.randoms or g.carriers or R.debug_level() >= 2:
            return None
        addrs = [array_address(a) for a in arrays]
        if borrowed:
            spans = [(p, p + a.nbytes) for p, a in zip(addrs, arrays, strict=True) if a.nbytes]
            if g.writes_inputs or overlaps(spans) or any(g.hits_fixed(sp) for sp in spans) or \
                    not all(a.flags.c_contiguous and a.flags.aligned for a in arrays):
                arrays, borrowed = [np.array(a, order="C") for a in arrays], False
                addrs = [array_address(a) for a in arrays]
        if g.fresh_np is None:
            g.fresh_np = [(("made", j), np_dtype(dtype), shape) for j, _alloc, dtype, shape in g.fresh]
        made: dict[int, np.ndarray] = {}
        with self._graph_lock:
            graph = g.graph
            for i, p in enumerate(addrs):
                graph.bind(("in", i), p)
            for key, npd, shape in g.fresh_np:
                arr = made[key[1]] = np.empty(shape, npd)
                graph.bind(key, array_address(arr))
            graph.run()
        R.STATS.kernels += graph.kernels
        out: list[np.ndarray] = []
        handed: set[int] = set()
        for _, s, _ in self._ret_flat:
            a = arrays[s.index] if s.kind == "in" else made[s.index] if s.kind == "made" else None
            out.append(s.buf.numpy() if a is None else a.copy() if id(a) in handed or (borrowed and s.kind == "in")
                       else a)
            handed.add(id(a))
        return out

    # ---- capture ----------------------------------------------------------------------------------------------------
    def _capture(self, tensors: list[Tensor], others: tuple, args: tuple, kwargs: dict) -> Ret:
        inputs = self._input_buffers(tensors)
        if len({id(b) for b in inputs}) != len(inputs):
            raise JitError(f"TinyJit({getattr(self.fxn, '__name__', 'function')}): two Tensor arguments share one "
                           f"buffer at the capture, so a replay could not tell them apart; pass distinct tensors")
        fresh: list[Any] = []
        randoms: list[tuple[Any, Any, tuple[int, ...]]] = []
        FRESH_TARGETS.append(fresh)
        RANDOM_SOURCES.append(randoms)
        try:
            with R.capture() as launches:
                ret = self.fxn(*args, **kwargs)
                outs = _flatten(ret)
                Tensor.realize_all(*outs)
        finally:
            FRESH_TARGETS.pop()
            RANDOM_SOURCES.pop()
        where: dict[int, _Slot] = {id(b): _Slot("in", i) for i, b in enumerate(inputs)}
        fresh_ids = {id(b): b for b in fresh}
        random_ids = {id(b): (gen, shp) for b, gen, shp in randoms}
        keep: list[Any] = []  # the captured buffers, alive as long as the capture (their ids are its keys)
        n_made = 0
        steps: list[_Step] = []
        for la in launches:
            slots, new_fresh = [], []
            for b in la.inputs:
                s = where.get(id(b))
                if s is None and (id(b) in fresh_ids or id(b) in random_ids):
                    s = where[id(b)] = _Slot("made", n_made)
                    if id(b) in fresh_ids:
                        new_fresh.append((n_made, b))
                    n_made += 1
                slots.append(s if s is not None else _Slot("fixed", buf=b))
            where[id(la.result)] = _Slot("made", n_made)
            steps.append(_Step(la, slots, new_fresh, n_made))
            n_made += 1
            keep.extend([*la.inputs, la.result])
        ret_slots: dict[int, _Slot] = {}
        for i, t in enumerate(outs):
            if t.uop.op is not T.BUFFER:
                raise JitError(f"TinyJit: returned Tensor {i} of shape {t.shape} is not a plain buffer once realized "
                               f"(a symbolic shape?)")
            b = buffer_of(t.uop)
            if id(b) in random_ids and id(b) not in where:  # a random tensor returned as drawn: drawn per replay
                where[id(b)] = _Slot("made", n_made)
                n_made += 1
            ret_slots[id(t)] = where.get(id(b), _Slot("fixed", buf=b))
        self.randoms = [(where[id(b)].index if id(b) in where else -1, b, gen, shp) for b, gen, shp in randoms]
        self.steps, self.n_made, self.ret, self.ret_slots, self._keep = steps, n_made, ret, ret_slots, keep
        self._ret_flat = [(id(t), ret_slots[id(t)], t.device) for t in outs]
        self.in_sigs, self.other_args = [_sig(t) for t in tensors], others
        self.cnt = 2
        return ret

    # ---- replay -----------------------------------------------------------------------------------------------------
    def _check(self, tensors: list[Tensor], others: tuple) -> None:
        name = getattr(self.fxn, "__name__", "function")
        if len(tensors) != len(self.in_sigs):
            raise JitError(f"TinyJit({name}): called with {len(tensors)} Tensor arguments, captured with "
                           f"{len(self.in_sigs)}; call reset() to capture again")
        for i, (t, sig) in enumerate(zip(tensors, self.in_sigs, strict=True)):
            if _sig(t) != sig:
                raise JitError(f"TinyJit({name}): Tensor argument {i} has {_fmt(_sig(t))}, but the function was "
                               f"captured with {_fmt(sig)}; a jitted function replays only inputs of the captured "
                               f"shapes and dtypes (call reset() to capture again)")
        try:
            same = others == self.other_args
        except Exception:  # noqa: BLE001 - an argument whose == does not give a bool (an array): compare identity
            same = all(a is b for a, b in zip(others, self.other_args, strict=False))
        if not (same is True or same is False) or not same:
            raise JitError(f"TinyJit({name}): a non-Tensor argument differs from the capture's (captured "
                           f"{self.other_args!r}); it may have shaped the graph, so call reset() to capture again")

    def _replay(self, inputs: list[Any]) -> list[Any]:
        """Run the capture on `inputs`: the buffers made in this replay, by made index."""
        if self._graph is not False:
            with self._graph_lock:
                out = self._replay_native(inputs)
            if out is not None:
                return out
        made: list[Any] = [None] * self.n_made
        for i, b, gen, shp in self.randoms:  # drawn again, in the order the function drew them (unused ones too)
            arr = b.allocator.from_numpy(P.host_array(np.asarray(gen(shp)), b.dtype), b.dtype)
            if i >= 0:
                made[i] = arr

        def bind(s: _Slot) -> Any:
            return inputs[s.index] if s.kind == "in" else made[s.index] if s.kind == "made" else s.buf

        for st in self.steps:
            la = st.launch
            for i, b in st.fresh:
                made[i] = b.allocator.alloc(b.dtype, b.shape)
            made[st.made] = R.run_plan(la.backend, la.plan, [bind(s) for s in st.slots], la.var_vals)
        return made

    def _result(self, inputs: list[Any], made: list[Any]) -> Ret:
        new: dict[int, Tensor] = {}
        for i, s, device in self._ret_flat:
            b = inputs[s.index] if s.kind == "in" else made[s.index] if s.kind == "made" else s.buf
            new[i] = Tensor._of_buffer(buffer_op(b), device)
        return _rebuild(self.ret, new)

    # ---- replay as one native call (host-cpu kernels: uopir.backends.cpu.graph) --------------------------------------
    def _replay_native(self, inputs: list[Any]) -> list[Any] | None:
        """The replay through the native launch graph (the made buffers, as `_replay`), or None when it goes the
        Python way (no graph for this capture, not yet buildable, UOPIR_DEBUG >= 2, or inputs that overlap each other
        or a captured buffer: the graph chose each kernel's no-alias variant for the capture's buffers). Called under
        `_graph_lock`: the graph's intermediate buffers are shared by its replays."""
        if R.debug_level() >= 2:
            return None
        g = self._graph
        if g is None:
            if self._waiting is not None and not self._waiting._binary.done():
                return None  # the graph is built once every kernel's C binary is (a poll, not a build, per replay)
            g = self._build_graph(inputs)
            if g is None:
                return None
            self._graph = g
        if g is False:
            return None
        assert isinstance(g, _NativeReplay)
        spans: list[tuple[int, int]] = []
        addrs: list[int] = []
        for b in inputs:
            info = host_info(b)  # read once per Buffer (a pooled one brings its array's)
            if info is None:
                return None
            addr, nbytes = info[0], info[1]
            addrs.append(addr)
            if nbytes:
                spans.append((addr, addr + nbytes))
        if overlaps(spans) or any(g.hits_fixed(sp) for sp in spans):
            return None
        graph = g.graph
        for i, addr in enumerate(addrs):
            graph.bind(("in", i), addr)
        made: list[Any] = [None] * self.n_made
        for i, b, gen, shp in self.randoms:  # drawn again, in the order the function drew them (unused ones too)
            arr = b.allocator.from_numpy(P.host_array(np.asarray(gen(shp)), b.dtype), b.dtype)
            if i >= 0:
                made[i] = arr
        for j, alloc, dtype, shape in g.fresh:
            made[j] = alloc.alloc(dtype, shape)
        for j in g.per_replay:
            graph.bind(("made", j), host_info(made[j])[0])  # type: ignore[index]  # host buffers (the graph's)
        graph.run()
        R.STATS.kernels += graph.kernels
        return made

    def _build_graph(self, inputs: list[Any]) -> _NativeReplay | None | bool:
        """The capture as one launch graph (False when it cannot be one: a kernel not on a host-cpu backend, a plan
        whose result is a copy or a constant, no C compiler for the runner; None to try again at a later replay: a
        kernel whose C binary is still compiling). Buffers a replay returns or draws are bound per replay; every other
        intermediate (plan temporaries, results not returned) is allocated once here and reused by every replay."""
        from uopir.backends.c.runtime import TieredKernel
        from uopir.backends.cpu.graph import LaunchGraph, max_args, native
        from uopir.backends.cpu.runtime import HostKernel, HostRuntime, address

        if native() is None:
            return False
        per_replay = {s.index for s in self.ret_slots.values() if s.kind == "made"}
        per_replay |= {i for i, *_ in self.randoms if i >= 0}
        captured: list[Any] = [None] * self.n_made  # the capture's own buffer of each made index (alive in _keep)
        for st in self.steps:
            captured[st.made] = st.launch.result
            for i, b in st.fresh:
                captured[i] = b
        for i, b, _gen, _shp in self.randoms:
            if i >= 0:
                captured[i] = b
        random_made = {i for i, *_ in self.randoms if i >= 0}
        fresh = [(j, b.allocator, b.dtype, b.shape) for j, b in enumerate(captured) if j in per_replay
                 and j not in random_made]
        persistent: dict[int, Any] = {}
        keep: list[Any] = []
        fixed: list[tuple[int, int]] = []
        # every launch in order: (entry, whether it reads only constants, the addresses it writes (None: unknown),
        # the addresses it reads)
        entries: list[tuple[tuple[int, list[Any], int | None], bool, set[int] | None, set[int]]] = []
        const = self._constant_addresses()  # constant buffers, then the outputs of kernels that read only them
        limit = max_args()

        def array(buf: Any) -> np.ndarray:
            a = buf.host_view()
            if a is None or not a.flags.c_contiguous:
                raise _NoGraph
            return a

        try:
            for st in self.steps:
                la, plan = st.launch, st.launch.plan
                if not isinstance(la.backend.runtime, HostRuntime):
                    return False
                alloc = la.backend.allocator
                refs: list[tuple[Any, np.ndarray]] = []  # per plan slot: (argument or key, array)
                for i, b in st.fresh:
                    if i not in per_replay:
                        persistent[i] = alloc.alloc(b.dtype, b.shape)
                for s in st.slots:
                    if s.kind == "in":
                        refs.append((("in", s.index), array(inputs[s.index])))
                    elif s.kind == "made" and s.index in per_replay:
                        refs.append((("made", s.index), array(captured[s.index])))
                    else:
                        buf = persistent[s.index] if s.kind == "made" else s.buf
                        a = array(buf)
                        keep.append(buf)
                        if s.kind == "fixed" and a.nbytes:
                            fixed.append((a.ctypes.data, a.ctypes.data + a.nbytes))
                        refs.append((a.ctypes.data, a))
                # a result that is not a kernel's output: a copy of an input (before or after the kernels) or a
                # constant, copied into the made buffer by the graph from a pristine buffer made once here
                target: Any = None
                if plan.copy_result or not isinstance(plan.result, int):
                    res = la.result
                    if res.dtype is dtypes.bfloat16:  # the Python copy rounds the carrier
                        return False
                    if st.made in per_replay:
                        target = ("made", st.made)
                    else:
                        buf = persistent[st.made] = alloc.alloc(res.dtype, res.shape)
                        keep.append(buf)
                        target = array(buf).ctypes.data
                    if isinstance(plan.result, int):
                        source = refs[plan.result][0]
                    else:
                        pristine = R.const_result(alloc, plan)
                        keep.append(pristine)
                        source = array(pristine).ctypes.data
                    copy = (0, [target, source, res.nbytes], None) if res.nbytes else None
                    if copy is not None and plan.copy_result != "exit":
                        entries.append((copy, False, {target} if isinstance(target, int) else set(), set()))
                for t, (dt, shp) in enumerate(plan.temps):
                    if plan.n_inputs + t == plan.result and st.made in per_replay:
                        refs.append((("made", st.made), array(captured[st.made])))
                        continue
                    buf = alloc.alloc(dt, shp)
                    if plan.n_inputs + t == plan.result:
                        persistent[st.made] = buf
                    keep.append(buf)
                    a = array(buf)
                    refs.append((a.ctypes.data, a))
                for ps in plan.steps:
                    k = ps.program.entry
                    if not isinstance(k, HostKernel):
                        return False
                    if isinstance(k, TieredKernel) and k.tier != "c":
                        if not k._binary.done():
                            self._waiting = k
                            return None
                        k.finish()
                    sig = k.sig
                    if len(ps.args) < len(sig.params) or any(v not in la.var_vals for v in sig.vars):
                        return False
                    args: list[Any] = []
                    spans: list[tuple[int, int]] = []
                    for d, slot in zip(sig.params, ps.args, strict=False):
                        ref, a = refs[slot]
                        if d is not None and a.dtype != np_dtype(d):
                            return False
                        args.append(ref if a.size else SCRATCH_ADDR)
                        if d is not None and a.nbytes:
                            spans.append((a.ctypes.data, a.ctypes.data + a.nbytes))
                    args.extend(int(la.var_vals[v]) for v in sig.vars)
                    if len(args) + (2 if sig.parallel else 0) > limit:
                        return False
                    fn = k.function(aliased=overlaps(spans))
                    keep.append(fn)
                    entry = (address(fn), args, k.threads if sig.parallel else None)
                    written = ps.writes
                    writes = None if written is None else {args[i] for i in written if i < len(args)}
                    hoist = written is not None and _reads_only(args, sig.params, written, const)
                    if hoist:
                        const |= {a for a in writes if isinstance(a, int)}
                    reads = {a for i, (d, a) in enumerate(zip(sig.params, args, strict=False))
                             if d is not None and isinstance(a, int) and (written is None or i not in written)}
                    entries.append((entry, hoist, writes, reads))
                if target is not None and copy is not None and plan.copy_result == "exit":
                    entries.append((copy, False, {target} if isinstance(target, int) else set(), set()))
        except _NoGraph:
            return False
        launches, once = _split_constant(entries)
        if once:  # run once now, on the captured constants; replays reuse what they wrote
            LaunchGraph(once, keep).run()
            R.STATS.kernels += len(once)
        writes_inputs = any(w is None or any(isinstance(a, tuple) and a[0] == "in" for a in w)
                            for _, _, w, _ in entries)
        return _NativeReplay(LaunchGraph(launches, keep), sorted(per_replay), fresh, _merge(fixed),
                             any(dt is dtypes.bfloat16 for _, _, dt, _ in fresh), writes_inputs)

    def _constant_addresses(self) -> set[int]:
        """The host addresses of the constant tensors' buffers (those realized as plain host buffers)."""
        out: set[int] = set()
        for t in self.constants:
            if t.uop.op is T.BUFFER:
                info = host_info(buffer_of(t.uop))
                if info is not None and info[1]:
                    out.add(info[0])
        return out
