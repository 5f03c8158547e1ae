"""Dtype rules of the Tensor frontend: numpy's promotion lattice, weak Python scalars, accumulation dtypes.

Choices (and where they leave numpy):
- Tensor ⊕ Tensor follows `np.result_type` of the numpy equivalents (so int64 ⊕ uint64 → float64, as numpy).
- bfloat16 (which numpy lacks) sits beside float16: bf16 ⊕ bool/int → bf16, bf16 ⊕ f16 → f32, bf16 ⊕ f32/f64 → that.
- Python scalars are *weak* (numpy 2 / tinygrad): `int8 tensor + 1` stays int8, `f16 tensor * 2.0` stays f16.
  A float scalar with a bool/int tensor gives the default float, float32 (numpy would give float64): the one
  deliberate deviation, shared with tinygrad. An int scalar with a bool tensor gives the default int, int32.
- Python data without a dtype: floats → float32, ints → int32, bools → bool (tinygrad's defaults); numpy arrays
  keep their dtype. Python ints that int32 cannot hold take the dtype numpy would hold them in (int64; uint64 for
  [2**63, 2**64)); beyond that, and for Python ints outside an explicit int dtype, creation raises OverflowError
  as arithmetic does (numpy 2's rule), never wraps.
- Sums and products accumulate like numpy on a 64-bit machine: bool and signed ints → int64, unsigned → uint64;
  float16/bfloat16 accumulate in float32 and the result is cast back (numpy keeps float16 too).
"""
from __future__ import annotations

import numpy as np

from uopir.dialects.semantics import bf16_round
from uopir.ir.dtype import DType, dtypes

DEFAULT_FLOAT: DType = dtypes.float32
DEFAULT_INT: DType = dtypes.int32

Scalar = bool | int | float


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
    """Accept a DType, a name (`'float32'`, `'f32'`) or a numpy dtype/type."""
    if d is None or isinstance(d, DType):
        return d
    if isinstance(d, str) and (r := dtypes.from_name(d)) is not None:
        return r
    try:
        return from_np(np.dtype(d))
    except TypeError:
        raise TypeError(f"unknown dtype {d!r}") from None


def promote(*ds: DType) -> DType:
    """The common dtype of tensor operands (numpy's lattice, bfloat16 added beside float16)."""
    if len(ds) == 1:
        return ds[0]
    if all(d is ds[0] for d in ds):
        return ds[0]
    if dtypes.bfloat16 in ds:
        rest = [d for d in ds if d is not dtypes.bfloat16]
        r = promote(*rest)
        if r.kind in ("bool", "int", "uint"):
            return dtypes.bfloat16
        return dtypes.float32 if r is dtypes.float16 else r
    return from_np(np.result_type(*(to_np(d) for d in ds)))


def is_scalar(v: object) -> bool:
    """A Python number or bool (weak for promotion); numpy scalars are strong and become 0-d tensors."""
    return type(v) in (bool, int, float)


def promote_scalar(d: DType, v: Scalar) -> DType:
    """The dtype of `tensor(d) ⊕ v` for a weak Python scalar v."""
    if type(v) is float:
        return d if d.is_float else DEFAULT_FLOAT
    if type(v) is int:
        return DEFAULT_INT if d.is_bool else d
    return d


def int_dtype(v: int) -> DType:
    """The dtype a Python int stands alone in: the default int when it fits, else int64 or uint64 (numpy's choice);
    OverflowError beyond them."""
    for d in (DEFAULT_INT, dtypes.int64, dtypes.uint64):
        if d.min <= v <= d.max:
            return d
    raise OverflowError(f"Python integer {v} is out of bounds for int64 and uint64")


def check_fits(v: object, d: DType) -> None:
    """OverflowError if `v` is a Python int outside the range of the int dtype `d` (numpy 2 raises too)."""
    if type(v) is int and d.is_int and not d.min <= v <= d.max:
        raise OverflowError(f"Python integer {v} is out of bounds for {d!r} (range [{d.min}, {d.max}])")


def scalar_dtype(v: Scalar) -> DType:
    """The dtype a Python scalar has when it stands alone."""
    return dtypes.bool if type(v) is bool else int_dtype(v) if type(v) is int else DEFAULT_FLOAT  # type: ignore


def promote_scalars(*vs: Scalar) -> DType:
    """The dtype of an expression of weak scalars only: float if any is a float, else int if any is an int (wide
    enough for every one of them)."""
    if any(type(v) is float for v in vs):
        return DEFAULT_FLOAT
    ints = [int_dtype(v) for v in vs if type(v) is int]  # type: ignore[arg-type]
    return promote(*ints) if ints else dtypes.bool


def float_of(d: DType) -> DType:
    """The dtype transcendental ops and true division compute in: d itself if float, else the default float."""
    return d if d.is_float else DEFAULT_FLOAT


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
    """`data` as a contiguous numpy array holding dtype d (bfloat16 rounded, carried in float32)."""
    if d is dtypes.bfloat16:  # round once, from float64, as a cast from float64 would (not through float32)
        return bf16_round(np.array(data, dtype=np.float64)).copy(order="C")
    return np.array(data, dtype=to_np(d), copy=True, order="C")


def infer_dtype(arr: np.ndarray) -> DType:
    """The default dtype of Python data converted by numpy: bool, int32 or float32 (tinygrad's defaults); ints that
    int32 cannot hold keep numpy's int64 or uint64."""
    k = arr.dtype.kind
    if k == "b":
        return dtypes.bool
    if k in "iu":
        if arr.size == 0 or (DEFAULT_INT.min <= arr.min() and arr.max() <= DEFAULT_INT.max):
            return DEFAULT_INT
        return from_np(arr.dtype)
    if k == "f":
        return DEFAULT_FLOAT
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
        return np.zeros((0,), np.float32), DEFAULT_FLOAT
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
