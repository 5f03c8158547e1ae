"""The reference interpreter: executes core + tensor dialect graphs with numpy, op by op. It is the oracle every
later stage (passes, backends) is checked against, so every choice below is exact and implementable in C.

Values are numpy arrays (0-d for shapeless scalars); a vector dtype adds a trailing lane axis. Each node is
evaluated once (memoized), iteratively over `root.toposort()`.

Semantics, per dtype (the choices a C backend must reproduce):

- Integers (every width, and `index` = int64) wrap in two's complement on add/sub/mul/neg/shl/casts.
- `core.idiv` / `core.mod`: C semantics, truncate toward zero; the remainder has the sign of the dividend.
  Division by zero is defined: `x idiv 0 == 0` and `x mod 0 == 0`. `INT_MIN idiv -1 == INT_MIN` (wraps),
  `INT_MIN mod -1 == 0`. On floats `core.mod` is C's `fmod` (exact, sign of the dividend; `x mod 0.0` is NaN).
- `core.shl` / `core.shr`: the shift amount is taken modulo the bit width (`b & (bits - 1)`, so negative amounts
  wrap too); `shr` is arithmetic for signed types and logical for unsigned ones; `shl` wraps.
- `core.cast`:
  float -> int truncates toward zero and SATURATES to [min, max] of the target; NaN -> 0 (so +inf -> max,
  -inf -> min, -1.5 -> 0 for unsigned targets);
  int -> int wraps; int/float -> bool is `x != 0` (NaN -> true); bool -> number is 0 / 1;
  to a float: round to nearest even, correctly rounded from the exact source value (no double rounding,
  including to bf16 from f64 and from 64-bit ints).
- `core.bitcast`: reinterprets the bits (numpy `.view`); bf16 bits are the top half of its float32 carrier.
- Floats: IEEE in the dtype's precision. f16 is computed by numpy in f16 (results rounded to f16 after every op).
  bf16 is carried as float32 and rounded to bf16 (round to nearest even; NaN stays a quiet NaN) after every op,
  which equals the correctly rounded result for add/sub/mul/div/sqrt (24 >= 2*8+2 bits).
- `core.mulacc a, b, c` is NOT fused: `(a*b)` is rounded, then `+ c` is rounded (C backends: -ffp-contract=off).
- `core.max` (and reductions max/min) propagate NaN; they order +0.0 above -0.0, so max/min are commutative
  bit for bit (max(-0.0, 0.0) = 0.0, min(-0.0, 0.0) = -0.0). Comparisons are IEEE (NaN compares unequal).
- `core.neg` of a bool is logical not (the verifier rejects it; the interpreter stays total).
- `tensor.reduce`: add/mul accumulate sequentially in the dtype, in row-major order of the reduced elements,
  starting from the identity (0 / 1): `((0 + x0) + x1) + ...`, rounding after every step (f16 accumulates in f16,
  bf16 in bf16); this is what a plain C loop with an accumulator computes. Integer sums/products wrap in the dtype.
  max/min start from the identity (-inf / +inf, or the int type's min / max), so an empty reduction yields it.
- `tensor.pad` pads with zero (false for bool). Movement ops are numpy views; values are never written in place,
  except by `tensor.assign`, which writes the target buffer (directly or through reshape/permute/shrink/flip
  views of it). Every buffer an assign in the graph targets is read as a private copy, so a graph reads all
  buffers as they were on entry; the result of an assign is the written value.
- `tensor.copy` / `tensor.contiguous` / `tensor.detach` are the identity on values.
- `tensor.var` needs a value in `var_vals` (by name); `tensor.bind` gives its const value (an index).
- A bf16 buffer's float32 carrier is rounded to bf16 when read.
- NaN payloads and signs are not part of the contract: any NaN equals any NaN.

Kernel level: `tensor.call` runs its kernel.def region on the buffers given as operands (`run_kernel`), data-
parallel (each range is a numpy axis; see run_kernel). `tensor.after buf, effects...` reads the buffer as it is once
its effect operands (calls) have run: how a schedule hands back the buffers its kernels wrote. Device-level ops are
not interpreted yet: they raise IRError.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from uopir.dialects.semantics import (
    ALU_NAMES,
    alu,
    bf16_round,
    bitcast_array,
    cast_array,
    const_array,
    np_dtype,
    reduce_array,
    to_python,
    values_equal,
)
from uopir.ir.diagnostics import IRError, diag_at
from uopir.ir.dtype import dtypes
from uopir.ir.uop import UOp

__all__ = ["evaluate", "run_kernel", "alu", "cast_array", "bitcast_array", "const_array", "bf16_round", "np_dtype",
           "to_python", "values_equal"]

Value = Any  # np.ndarray, a list of values (sink) or None (void)


def _err(u: UOp, msg: str) -> IRError:
    return IRError(diagnostics=[diag_at(u, msg)])


# ---- tensor ops ----------------------------------------------------------------------------------------------------
def _assign_view(u: UOp, target: UOp, buffers: dict[int, np.ndarray]) -> np.ndarray:
    """A writable numpy view of the buffer region that `target` denotes."""
    chain: list[UOp] = []
    t = target
    while t.op.name != "tensor.buffer":
        if t.op.name == "tensor.assign":
            t = t.src[0]
            continue
        if t.op.name not in ("tensor.reshape", "tensor.permute", "tensor.shrink", "tensor.flip"):
            raise _err(u, f"tensor.assign can write a tensor.buffer or a reshape/permute/shrink/flip view of one, "
                          f"not through {t.op.name}")
        chain.append(t)
        t = t.src[0]
    base = _buffer_array(t, buffers)
    v = base
    for m in reversed(chain):
        n = m.op.name
        if n == "tensor.reshape":
            nv = v.reshape(m.arg)
            if nv.size and not np.shares_memory(nv, base):
                raise _err(u, "tensor.assign cannot write through this reshape: it is not a view of the buffer")
            v = nv
        elif n == "tensor.permute":
            v = np.transpose(v, m.arg)
        elif n == "tensor.shrink":
            v = v[tuple(slice(b, e) for b, e in m.arg)]
        else:
            v = np.flip(v, axis=m.arg) if m.arg else v
    return v


def _buffer_array(u: UOp, buffers: dict[int, np.ndarray]) -> np.ndarray:
    bid, _device, shape = u.arg
    if bid not in buffers:
        raise _err(u, f"no buffer with id {bid} was given to the interpreter (have: {sorted(buffers)})")
    arr = buffers[bid]
    if not isinstance(arr, np.ndarray):
        raise _err(u, f"buffer {bid} must be a numpy array, got {type(arr).__name__}")
    want = np_dtype(u.dtype)
    if arr.dtype != want or arr.shape != tuple(shape):
        raise _err(u, f"buffer {bid} is {arr.dtype}{list(arr.shape)}, but the IR declares {u.dtype}{list(shape)} "
                      f"(numpy {want}{list(shape)})")
    return arr


class _Ctx:
    __slots__ = ("buffers", "assigned", "var_vals")

    def __init__(self, buffers: dict[int, np.ndarray], assigned: set[int], var_vals: dict[str, int]):
        self.buffers, self.assigned, self.var_vals = buffers, assigned, var_vals


def _eval_node(u: UOp, s: list[Value], ctx: _Ctx) -> Value:
    name = u.op.name
    if name in ALU_NAMES:
        return alu(name, u.dtype, s, [x.dtype for x in u.src])
    if name == "core.const":
        a = u.arg
        shaped = type(a) is tuple and len(a) == 2 and type(a[1]) is tuple and u.dtype.count == 1
        return const_array(u.dtype, a[0], a[1]) if shaped else const_array(u.dtype, a)
    if name == "core.cast":
        return cast_array(s[0], u.src[0].dtype, u.dtype)
    if name == "core.bitcast":
        return bitcast_array(s[0], u.src[0].dtype, u.dtype)
    if name == "core.sink":
        return list(s)
    if name == "core.group":
        return None
    if name == "core.vectorize":
        return np.stack([np.asarray(x) for x in np.broadcast_arrays(*s)], axis=-1)
    if name == "core.gep":
        r = s[0][..., list(u.arg)]
        return r[..., 0] if len(u.arg) == 1 else r
    if name == "tensor.buffer":
        arr = _buffer_array(u, ctx.buffers)
        if u.dtype is dtypes.bfloat16:  # the float32 carrier may hold more precision than bf16 has
            return bf16_round(arr)
        if u.arg[0] in ctx.assigned:
            return arr.copy()
        view = arr.view()
        view.flags.writeable = False
        return view
    if name == "tensor.reshape":
        return np.reshape(s[0], u.arg)
    if name == "tensor.permute":
        return np.transpose(s[0], u.arg)
    if name == "tensor.expand":
        return np.broadcast_to(s[0], u.arg)
    if name == "tensor.pad":
        if not u.arg:  # a 0-d tensor: nothing to pad (np.pad rejects an empty pad list)
            return s[0]
        return np.pad(s[0], [tuple(p) for p in u.arg], mode="constant", constant_values=np.zeros((), s[0].dtype))
    if name == "tensor.shrink":
        return s[0][tuple(slice(b, e) for b, e in u.arg)]
    if name == "tensor.flip":
        return np.flip(s[0], axis=u.arg) if u.arg else s[0]
    if name == "tensor.reduce":
        return reduce_array(s[0], u.arg[0], tuple(u.arg[1]), u.dtype)
    if name in ("tensor.copy", "tensor.contiguous", "tensor.detach"):
        return s[0]
    if name == "tensor.assign":
        view = _assign_view(u, u.src[0], ctx.buffers)
        val = np.asarray(s[1], dtype=view.dtype)
        view[...] = val
        return np.broadcast_to(val, view.shape)
    if name == "tensor.var":
        if u.arg[0] not in ctx.var_vals:
            raise _err(u, f"variable {u.arg[0]!r} is not bound (pass var_vals or use tensor.bind)")
        return np.asarray(ctx.var_vals[u.arg[0]], dtype=np.int64)
    if name == "tensor.bind":
        return np.asarray(s[1], dtype=np.int64)
    if name == "tensor.after":  # the live buffer, read now that its operand effects have run
        arr = _buffer_array(u.src[0], ctx.buffers)
        return bf16_round(arr) if u.dtype is dtypes.bfloat16 else arr.copy()
    if name == "tensor.call":
        arrays = [_buffer_array(x, ctx.buffers) for x in u.src if x.op.name == "tensor.buffer"]
        if any(x.dtype is not dtypes.void and x.op.name != "tensor.buffer" for x in u.src):
            raise _err(u, "tensor.call operands must be tensor.buffer values (or void values that order it)")
        run_kernel(u.arg[0], arrays, ctx.var_vals)
        return None
    if u.op.dialect in ("kernel", "device"):
        raise _err(u, f"{name} outside a tensor.call: the reference interpreter runs kernel-level ops only as the "
                      f"body of a kernel (run_kernel); device-level ops are not interpreted yet")
    raise _err(u, f"the reference interpreter does not know {name}")


def evaluate(root: UOp, buffers: dict[int, np.ndarray],
             var_vals: dict[str, int] | None = None) -> np.ndarray | list[np.ndarray]:
    """Run the graph under `root`; a core.sink root gives the list of its sources' values.

    `buffers` maps tensor.buffer ids to arrays (bf16 as float32); tensor.assign writes into them in place.
    `var_vals` gives tensor.var values by name (a tensor.bind in the graph binds its variable everywhere)."""
    order = root.toposort()
    assigned: set[int] = set()
    var_vals = dict(var_vals or {})
    for u in order:
        if u.op.name == "tensor.bind" and u.src[0].op.name == "tensor.var":
            var_vals.setdefault(u.src[0].arg[0], int(u.src[1].arg))
        if u.op.name == "tensor.call":
            assigned.update(x.arg[0] for x in u.src if x.op.name == "tensor.buffer")
        if u.op.name == "tensor.assign":
            t = u.src[0]
            while t.src and t.op.name != "tensor.buffer":
                t = t.src[0]
            if t.op.name == "tensor.buffer":
                assigned.add(t.arg[0])
    ctx = _Ctx(buffers, assigned, var_vals)
    vals: dict[UOp, Value] = {}
    for u in order:
        try:
            vals[u] = _eval_node(u, [vals[s] for s in u.src], ctx)
        except IRError:
            raise
        except (ValueError, TypeError, IndexError, KeyError) as e:
            raise _err(u, f"the reference interpreter failed on {u.op.name}: {e}") from e
    return _own(vals[root])


def _own(v: Value) -> Value:
    """Results never alias the caller's buffers or internal views."""
    if isinstance(v, list):
        return [_own(x) for x in v]
    return None if v is None else np.array(v, copy=True)


# ---- kernel level ---------------------------------------------------------------------------------------------------
class _Ptr:
    """A pointer value: a flat buffer plus an offset array (and gate) over the iteration space."""

    __slots__ = ("flat", "off", "gate")

    def __init__(self, flat: np.ndarray, off: np.ndarray, gate: np.ndarray | None):
        self.flat, self.off, self.gate = flat, off, gate


def _and_gate(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    return b if a is None else (a if b is None else a & b)


def run_kernel(kdef: UOp, buffers: list[np.ndarray], var_vals: dict[str, int] | None = None) -> None:
    """Run a kernel.def body on `buffers` (kernel.param idx i is buffers[i]); stores write them in place.

    Data-parallel semantics: every kernel.range is one numpy axis, each op is evaluated over its whole iteration
    space at once, in toposort order. A load sees a store of the same kernel only if it depends on it; when several
    iterations store to one address, the last in row-major order of the ranges (toposort order) wins. A kernel.reduce
    accumulates sequentially in row-major order of its range operands (the first range outermost), like nested
    loops in operand order."""
    if kdef.op.name != "kernel.def":
        raise _err(kdef, f"run_kernel needs a kernel.def, got {kdef.op.name}")
    order = kdef.toposort()
    ranges = [u for u in order if u.op.name == "kernel.range"]
    nd = len(ranges)
    axis = {r: i for i, r in enumerate(ranges)}
    vv = var_vals or {}
    vals: dict[UOp, Any] = {}

    def space(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return x.reshape(x.shape + (1,) * (nd - x.ndim)) if x.ndim < nd else x

    for u in order:
        name = u.op.name
        s = [vals.get(x) for x in u.src]
        try:
            if name == "kernel.param":
                if not 0 <= u.arg < len(buffers):
                    raise _err(u, f"kernel.param {u.arg}: the kernel got {len(buffers)} buffers")
                arr = buffers[u.arg]
                if arr.dtype != np_dtype(u.dtype.base):
                    raise _err(u, f"kernel.param {u.arg} is {u.dtype}, but buffer {u.arg} is {arr.dtype}")
                r: Any = _Ptr(arr.reshape(-1), space(np.zeros((), np.int64)), None)
                if not np.shares_memory(r.flat, arr) and arr.size:
                    raise _err(u, f"buffer {u.arg} must be contiguous to be written by a kernel")
            elif name in ("kernel.local", "kernel.register"):
                r = _Ptr(np.zeros(u.dtype.size, np_dtype(u.dtype.base)), space(np.zeros((), np.int64)), None)
            elif name == "kernel.var":
                if u.arg[0] not in vv:
                    raise _err(u, f"variable {u.arg[0]!r} is not bound (pass var_vals)")
                r = space(np.asarray(vv[u.arg[0]], np.int64))
            elif name == "kernel.range":
                end = np.asarray(s[0])
                if end.size != 1:
                    raise _err(u, "a range end must not depend on another range")
                shape = [1] * nd
                shape[axis[u]] = int(end.reshape(-1)[0])
                r = np.arange(shape[axis[u]], dtype=np.int64).reshape(shape)
            elif name == "kernel.index":
                p = s[0]
                r = _Ptr(p.flat, space(p.off + np.asarray(s[1], np.int64)),
                         _and_gate(p.gate, space(s[2]) if len(s) > 2 else None))
            elif name == "kernel.load":
                p = s[0]
                gate = _and_gate(p.gate, space(s[2]) if len(s) > 2 else None)
                inb = (p.off >= 0) & (p.off < p.flat.size)
                if np.any(~inb if gate is None else gate & ~inb):
                    raise _err(u, f"out-of-bounds load (buffer of {p.flat.size} elements)")
                off = np.where(inb, p.off, 0)
                val = p.flat[off] if p.flat.size else np.zeros(off.shape, p.flat.dtype)
                alt = s[1] if len(s) > 1 else np.zeros((), p.flat.dtype)
                r = space(val if gate is None else np.where(gate, val, alt))
            elif name == "kernel.store":
                p = s[0]
                gate = _and_gate(p.gate, space(s[2]) if len(s) > 2 else None)
                off, val = np.broadcast_arrays(p.off, space(s[1]), *(() if gate is None else (gate,)))[:2]
                mask = np.ones(off.shape, bool) if gate is None else np.broadcast_to(gate, off.shape)
                o, v = off[mask], val[mask]
                if o.size and (o.min() < 0 or o.max() >= p.flat.size):
                    raise _err(u, f"out-of-bounds store (buffer of {p.flat.size} elements)")
                p.flat[o] = v
                r = None
            elif name == "kernel.reduce":
                x = space(s[0])
                axes = tuple(axis[rr] for rr in u.src[1:])  # accumulate in operand order, the first outermost
                shape = list(x.shape)
                for rr in u.src[1:]:
                    shape[axis[rr]] = vals[rr].shape[axis[rr]]
                r = reduce_array(np.broadcast_to(x, shape), u.arg, axes, u.dtype)
            elif name in ("kernel.end", "kernel.def", "core.group", "core.sink"):
                r = None
            elif name == "core.const":
                r = space(const_array(u.dtype, u.arg))
            elif name in ALU_NAMES:
                r = alu(name, u.dtype, [np.asarray(x) for x in s], [x.dtype for x in u.src])
            elif name == "core.cast":
                r = cast_array(s[0], u.src[0].dtype, u.dtype)
            elif name == "core.bitcast" and u.dtype.count == 1 and u.src[0].dtype.count == 1:
                r = bitcast_array(s[0], u.src[0].dtype, u.dtype)
            else:
                raise _err(u, f"the reference interpreter does not run {name} inside a kernel yet")
        except IRError:
            raise
        except (ValueError, TypeError, IndexError, KeyError) as e:
            raise _err(u, f"the reference interpreter failed on {name}: {e}") from e
        vals[u] = r
