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

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from uopir.backends import realize as R
from uopir.backends.buffers import buffer_of, buffer_op
from uopir.dialects import tensor as T
from uopir.frontend import dtype_promotion as P
from uopir.frontend.creation import RANDOM_SOURCES
from uopir.frontend.realization import FRESH_TARGETS
from uopir.frontend.tensor import Tensor

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


def _sig(t: Tensor) -> tuple:
    return (tuple(t.shape), t.dtype, t.device)


def _fmt(sig: tuple) -> str:
    return f"shape {sig[0]} dtype {sig[1]!r} on {sig[2]}"


class TinyJit(Generic[Ret]):
    """Decorator: capture the function's kernels on its second call, replay them from the third on."""

    def __init__(self, fxn: Callable[..., Ret], *, warmup: bool = True) -> None:
        self.fxn = fxn
        self.warmup = warmup  # False: the first call captures (a function with nothing lazy to settle first)
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
        self.randoms: list[tuple[int, Any, Any, tuple[int, ...]]] = []
        self._keep: list[Any] = []

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
        return self._replay(self._input_buffers(tensors))

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
            ret_slots[id(t)] = where.get(id(b), _Slot("fixed", buf=b))
        self.randoms = [(where[id(b)].index if id(b) in where else -1, b, gen, shp) for b, gen, shp in randoms]
        self.steps, self.n_made, self.ret, self.ret_slots, self._keep = steps, n_made, ret, ret_slots, keep
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

    def _replay(self, inputs: list[Any]) -> Ret:
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
        new: dict[int, Tensor] = {}
        for t in _flatten(self.ret):
            new[id(t)] = Tensor(buffer_op(bind(self.ret_slots[id(t)])), device=t.device)
        return _rebuild(self.ret, new)
