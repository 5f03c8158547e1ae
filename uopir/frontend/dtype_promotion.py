"""Dtype rules of the Tensor frontend: tinygrad's promotion lattice, weak Python scalars, accumulation dtypes.

Choices (tinygrad's where it and numpy differ):
- Tensor ⊕ Tensor is the least upper bound in tinygrad's promotion lattice (below), so an int ⊕ a float is that
  float (`int32 ⊕ float32 → float32`, `int64 ⊕ float16 → float16`; numpy gives float64), signed ⊕ unsigned is the
  next signed int wide enough (`int8 ⊕ uint8 → int16`, `int32 ⊕ uint32 → int64`), and `int64 ⊕ uint64`, which no int
  holds, is float16 (the lattice's first float; tinygrad's fp8 types, which uopir lacks, sit below it there).
- bfloat16 sits beside float16: bf16 ⊕ bool/int → bf16, bf16 ⊕ f16 → f32, bf16 ⊕ f32/f64 → that.
- Python scalars are *weak* (tinygrad, numpy 2): `int8 tensor + 1` stays int8, `f16 tensor * 2.0` stays f16; a
  float scalar with a bool/int tensor gives the lattice's join of that dtype and the default float (float32 unless
  `dtypes.default_float` was changed); an int scalar with a bool tensor gives the default int.
- Defaults: `dtypes.default_float` (float32) and `dtypes.default_int` (int32), read at each use, so assigning them
  changes every later choice. Python data without a dtype: floats → the default float, ints → the default int
  (int64 when it cannot hold them; uint64 for [2**63, 2**64)), bools → bool; numpy arrays keep their dtype. Beyond
  that, and for Python ints outside an explicit int dtype, creation raises OverflowError (never wraps).
- Sums and products accumulate like numpy on a 64-bit machine: bool and signed ints → int64, unsigned → uint64;
  float16/bfloat16 accumulate in float32 and the result is cast back (numpy keeps float16 too).
"""
from __future__ import annotations

import numpy as np

from uopir.backends.interface import ALIGN_MIN_BYTES, aligned_empty
from uopir.dialects.semantics import bf16_round
from uopir.ir.dtype import DType, dtypes

Scalar = bool | int | float
# the unsigned int of a float's size, to work on its bits (abs clears the sign bit, pick moves values bit for bit)
UINT_OF_SIZE = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


class UnknownDTypeError(TypeError, AttributeError):
    """A dtype name or object uopir does not know: a TypeError, and an AttributeError as tinygrad raises (it looks a
    name up as an attribute of `dtypes`)."""

# tinygrad's promotion lattice (less its fp8 types): each dtype points at the dtypes just above it
_LATTICE: dict[DType, tuple[DType, ...]] = {
    dtypes.bool: (dtypes.int8, dtypes.uint8), dtypes.int8: (dtypes.int16,), dtypes.int16: (dtypes.int32,),
    dtypes.int32: (dtypes.int64,), dtypes.int64: (dtypes.float16, dtypes.bfloat16),
    dtypes.uint8: (dtypes.int16, dtypes.uint16), dtypes.uint16: (dtypes.int32, dtypes.uint32),
    dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.uint64: (dtypes.float16, dtypes.bfloat16),
    dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,), dtypes.float32: (dtypes.float64,),
    dtypes.float64: (),
}
# the order the least upper bound is picked in (tinygrad's dtype priority)
_RANK: dict[DType, int] = {d: i for i, d in enumerate((
    dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64,
    dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64))}


def _above(d: DType) -> frozenset[DType]:
    """d and every dtype above it in the lattice."""
    out = {d}
    todo = [d]
    while todo:
        for p in _LATTICE[todo.pop()]:
            if p not in out:
                out.add(p)
                todo.append(p)
    return frozenset(out)


_UPPER: dict[DType, frozenset[DType]] = {d: _above(d) for d in _LATTICE}
_JOIN: dict[tuple[DType, DType], DType] = {
    (a, b): min(_UPPER[a] & _UPPER[b], key=_RANK.__getitem__) for a in _LATTICE for b in _LATTICE}


def __getattr__(name: str) -> DType:
    """`DEFAULT_FLOAT` / `DEFAULT_INT`: the current `dtypes.default_float` / `default_int` (read at each use)."""
    if name == "DEFAULT_FLOAT":
        return dtypes.default_float
    if name == "DEFAULT_INT":
        return dtypes.default_int
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_np(d: DType) -> np.dtype:
    """The numpy dtype that stores `d` on the host (bfloat16 is carried in float32)."""
    name = d.np_name
    if name is None or d.kind == "index":
        raise TypeError(f"{d!r} has no host storage type")
    return np.dtype(name)


def from_np(npd: np.dtype | type) -> DType:
    """The uopir dtype of a numpy dtype; TypeError for ones uopir lacks (complex, strings, objects)."""
    try:
        return dtypes.from_numpy(npd)
    except TypeError:
        raise TypeError(f"numpy dtype {np.dtype(npd).name} has no uopir equivalent") from None


def to_dtype(d: DType | str | np.dtype | type | None) -> DType | None:
    """Accept a DType, a name (`'float32'`, `'f32'`, tinygrad's `'int'` = int32, `'half'`), a numpy dtype/type, or
    the Python types bool, int (the default int) and float (the default float)."""
    if d is None:
        return d
    if isinstance(d, DType):
        if d.kind == "ptr" or d.count > 1 or d is dtypes.void:
            raise TypeError(f"{d.name} is not a tensor element dtype (a scalar: bool, an int or a float)")
        return d
    if isinstance(d, str) and (r := dtypes.from_name(d) or dtypes.from_name(d.lower())) is not None:
        return r
    if d is float:
        return dtypes.default_float
    if d is int:
        return dtypes.default_int
    try:
        return from_np(np.dtype(d))
    except TypeError:
        raise UnknownDTypeError(f"unknown dtype {d!r}") from None


def promote(*ds: DType) -> DType:
    """The common dtype of tensor operands: their least upper bound in tinygrad's lattice (module docstring)."""
    r = ds[0]
    for d in ds[1:]:
        if d is not r:
            try:
                r = _JOIN[r, d]
            except KeyError:
                raise TypeError(f"no common dtype of {r!r} and {d!r}") from None
    return r


def is_scalar(v: object) -> bool:
    """A Python number or bool (weak for promotion); numpy scalars are strong and become 0-d tensors."""
    return type(v) in (bool, int, float)


def promote_scalar(d: DType, v: Scalar) -> DType:
    """The dtype of `tensor(d) ⊕ v` for a weak Python scalar v."""
    if type(v) is float:
        return d if d.is_float else promote(d, dtypes.default_float)
    if type(v) is int:
        return dtypes.default_int if d.is_bool else d
    return d


def int_dtype(v: int) -> DType:
    """The dtype a Python int stands alone in: the default int when it fits, else int64 or uint64 (numpy's choice);
    OverflowError beyond them."""
    for d in (dtypes.default_int, dtypes.int64, dtypes.uint64):
        if d.min <= v <= d.max:
            return d
    raise OverflowError(f"Python integer {v} is out of bounds for int64 and uint64")


def wrap_int(v: int, d: DType) -> int:
    """The Python int v wrapped (two's complement) into the int dtype d: what a weak scalar outside d becomes in
    arithmetic with a d tensor (tinygrad's rule: `int32 tensor | 0xFFFFFFFF` is `| -1`)."""
    v &= (1 << d.bits) - 1
    return v - (1 << d.bits) if d.kind == "int" and v > d.max else v


def check_fits(v: object, d: DType) -> None:
    """OverflowError if `v` is a Python int outside the range of the int dtype `d` (numpy 2 raises too)."""
    if type(v) is int and d.is_int and not d.min <= v <= d.max:
        raise OverflowError(f"Python integer {v} is out of bounds for {d!r} (range [{d.min}, {d.max}])")


def scalar_dtype(v: Scalar) -> DType:
    """The dtype a Python scalar has when it stands alone."""
    return dtypes.bool if type(v) is bool else int_dtype(v) if type(v) is int else dtypes.default_float  # type: ignore


def promote_scalars(*vs: Scalar) -> DType:
    """The dtype of an expression of weak scalars only: float if any is a float, else int if any is an int (wide
    enough for every one of them: uint64 for ints that need int64 and uint64 at once, OverflowError where one is
    negative)."""
    if any(type(v) is float for v in vs):
        return dtypes.default_float
    ints = [v for v in vs if type(v) is int]
    if not ints:
        return dtypes.bool
    d = promote(*(int_dtype(v) for v in ints))  # type: ignore[arg-type]
    if d.is_int:
        return d
    # int64 beside uint64: the lattice joins them in a float (float16), which holds none of them; as Tensor(list)
    lo, hi = min(ints), max(ints)  # type: ignore[type-var]
    if lo >= 0:
        return dtypes.uint64
    raise OverflowError(f"Python integers {lo} and {hi} do not fit one integer dtype (int64 or uint64)")


def float_of(d: DType) -> DType:
    """The dtype transcendental ops and true division compute in: d itself if float, else its join with the default
    float (the default float itself unless that was set to a half type)."""
    return d if d.is_float else promote(d, dtypes.default_float)


def sum_acc(d: DType) -> DType:
    """The dtype a sum/product accumulates in (see the module docstring)."""
    if d.is_bool or d.kind == "int":
        return dtypes.int64
    if d.kind == "uint":
        return dtypes.uint64
    if d in (dtypes.float16, dtypes.bfloat16):
        return dtypes.float32
    return d


def sum_result(d: DType) -> DType:
    """The dtype of a sum/product result: the accumulator, except half floats come back as themselves."""
    return d if d in (dtypes.float16, dtypes.bfloat16) else sum_acc(d)


def host_array(data: object, d: DType) -> np.ndarray:
    """`data` as a contiguous numpy array holding dtype d (bfloat16 rounded, carried in float32); a large array of
    d's host type is copied to a cache-line aligned start (aligned_empty: a kernel's vector loads then never span two
    lines)."""
    if d is dtypes.bfloat16:  # round once, from float64, as a cast from float64 would (not through float32)
        return bf16_round(np.array(data, dtype=np.float64)).copy(order="C")
    want = to_np(d)
    if type(data) is np.ndarray and data.dtype == want and data.nbytes >= ALIGN_MIN_BYTES:
        out = aligned_empty(data.shape, want)
        np.copyto(out, data)
        return out
    return np.array(data, dtype=want, copy=True, order="C")


def infer_dtype(arr: np.ndarray) -> DType:
    """The default dtype of Python data converted by numpy: bool, the default int or the default float (tinygrad's
    rule); ints that the default int cannot hold keep numpy's int64 or uint64."""
    k = arr.dtype.kind
    if k == "b":
        return dtypes.bool
    if k in "iu":
        di = dtypes.default_int
        if arr.size == 0 or (di.min <= arr.min() and arr.max() <= di.max):
            return di
        return from_np(arr.dtype) if arr.dtype.itemsize == 8 else dtypes.int64
    if k == "f":
        return dtypes.default_float
    raise TypeError(f"cannot make a Tensor from data of numpy dtype {arr.dtype.name}")


def _leaves(data: object) -> list[object]:
    """The scalars of nested lists/tuples, in order."""
    out: list[object] = []
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, list | tuple | range):
            stack.extend(reversed(x))
        else:
            out.append(x)
    return out


def from_python(data: list | tuple | range, d: DType | None) -> tuple[np.ndarray, DType]:
    """Nested Python data as a numpy array and its dtype (`d`, or the default one): Python ints out of range raise
    OverflowError (numpy 2's rule for an explicit dtype; without one, ints that no int64 or uint64 holds), ragged or
    non-numeric data ValueError."""
    if d is not None:
        try:
            # bfloat16 goes through float64 so that host_array rounds once (float32 first would round twice)
            return np.array(data, dtype=np.float64 if d is dtypes.bfloat16 else to_np(d)), d
        except OverflowError:
            for v in _leaves(data):  # name the int numpy refused
                check_fits(v, d)
            raise
        except (TypeError, ValueError):
            raise ValueError("cannot make a Tensor from ragged or non-numeric nested data") from None
    if not len(data):
        return np.zeros((0,), to_np(dtypes.default_float)), dtypes.default_float
    try:
        arr = np.array(data)
    except ValueError:
        arr = np.array(None, dtype=object)
    # numpy falls back to object for ints beyond 64 bits, and to float64 for ints that need int64 and uint64 at
    # once; neither is what the data says, so name the offending ints (the leaves are only walked in these cases)
    suspect = arr.dtype == object or (arr.dtype.kind == "f" and arr.size and np.nanmax(np.abs(arr)) >= 2**63)
    if suspect and arr.shape != ():
        leaves = _leaves(data)
        if all(type(v) in (bool, int) for v in leaves):
            for v in leaves:
                if type(v) is int:
                    int_dtype(v)  # raises for the first int beyond 64 bits
            lo, hi = min(leaves), max(leaves)  # type: ignore[type-var]
            if lo >= 0:  # numpy gives float64 for ints that need uint64 beside small ones; uint64 holds them all
                return np.array(data, dtype=np.uint64), dtypes.uint64
            raise OverflowError(f"Python integers {lo} and {hi} do not fit one integer dtype (int64 or uint64)")
        if arr.dtype == object and all(type(v) in (bool, int, float) for v in leaves):
            arr = np.array(data, dtype=np.float64)  # a float among huge ints: the whole is float, as numpy's float64
    if arr.dtype == object:
        raise ValueError("cannot make a Tensor from ragged or non-numeric nested data")
    return arr, infer_dtype(arr)
