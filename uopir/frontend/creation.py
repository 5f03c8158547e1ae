"""Tensor creation: splat constants, ranges, the identity matrix, and random tensors drawn on the host.

Data and random tensors are made on the host now (a numpy Generator that `Tensor.manual_seed(n)` reseeds) and enter
the graph as buffers; `full`/`zeros`/`ones` are shaped `core.const`s (no buffer). Every factory takes tinygrad's
`requires_grad=`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from uopir.dialects import core as C
from uopir.dialects import tensor as T
from uopir.frontend import device as D
from uopir.frontend import dtype_promotion as P
from uopir.frontend import variable as V
from uopir.frontend.shapes import check_shape, shape_args
from uopir.ir.diagnostics import ArgumentError
from uopir.ir.dtype import DType, dtypes
from uopir.ir.uop import UOp

if TYPE_CHECKING:
    from uopir.frontend.tensor import DTypeLike, Scalar, Tensor


# While a TinyJit captures, the random tensors drawn on the host are appended to the innermost list, with their
# generator and shape (a replay draws new ones).
RANDOM_SOURCES: list[list[tuple[Any, Any, tuple[int, ...]]]] = []


def _creation(fn: Any) -> Any:
    """A creation function that also takes tinygrad's `requires_grad=` keyword."""
    def create(*args: Any, requires_grad: bool | None = None, **kwargs: Any) -> Tensor:
        t = fn(*args, **kwargs)
        if requires_grad is not None:
            t.requires_grad = requires_grad
        return t
    create.__name__, create.__qualname__, create.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    create.__wrapped__ = fn  # type: ignore[attr-defined]
    return create



def _draw(w: Tensor, u: Tensor, num_samples: int, replacement: bool) -> Tensor:
    """Indices drawn with probabilities proportional to the rows of w ((n,) or (rows, n)), int32 (tinygrad), with
    the uniform draws u (rows, num_samples) or (rows, n) given. With replacement: the count of cdf entries each
    draw passes; without: Efraimidis-Spirakis keys log(u) / w, the num_samples largest in descending order (the rank
    of each key from an n x n comparison, then a one-hot read per rank)."""
    x = w.unsqueeze(0) if w.ndim == 1 else w
    n = x.shape[1]
    x = x.cast(P.float_of(x.dtype)) if not x.dtype.is_float else x
    if replacement or num_samples == 1:
        cdf = x.cumsum(1)
        cdf = cdf / cdf[:, n - 1:n]
        idx = (u.unsqueeze(-1) >= cdf.unsqueeze(1)).sum(-1).minimum(n - 1)
    else:
        keys = u.log() / x  # (rows, n)
        rank = (keys.unsqueeze(1) > keys.unsqueeze(2)).sum(2)  # keys larger than key i
        ar = type(w).arange(n, device=w.device)
        hot = rank.unsqueeze(1) == ar[:num_samples].reshape(1, num_samples, 1)
        idx = hot.where(ar.reshape(1, 1, n), 0).sum(2)
    idx = idx.cast(dtypes.int32)
    return idx.reshape(idx.shape[1:]) if w.ndim == 1 else idx


def _int_linspace(start: float, stop: float, steps: int, d: DType) -> np.ndarray:
    """linspace's values in the int dtype d, each truncated toward zero as numpy's cast does: OverflowError when an
    end lies outside d (numpy's cast would wrap it: 300 in int8 is 44); exact for int ends beyond 2**53, where a
    float64 step would round them (2**60 .. 2**60 + 4 in 5 steps: five equal values)."""
    lo, hi = min(start, stop), max(start, stop)
    if not d.min <= lo <= hi <= d.max:
        raise OverflowError(f"linspace({start}, {stop}, {steps}): {lo if lo < d.min else hi} is out of bounds for "
                            f"{d!r} (range [{d.min}, {d.max}])")
    if type(start) is int and type(stop) is int and max(abs(start), abs(stop)) > 2**53:
        den = max(steps - 1, 1)
        vals = []
        for i in range(steps):
            num = start * den + (stop - start) * i  # the value times den; // floors, the cast truncates
            vals.append(num // den if num >= 0 else -(-num // den))
        return np.array(vals, P.to_np(d))
    return np.linspace(float(start), float(stop), steps)


class Creation:
    """Tensor's factories (static: `Tensor.zeros(2, 3)`) and `*_like` constructors."""

    __slots__ = ()

    @classmethod
    def manual_seed(cls, seed: int = 0) -> None:
        """Reseed the host generator behind rand/randn/randint/uniform/normal, for reproducible programs."""
        cls._rng = np.random.default_rng(seed)

    @classmethod
    @_creation
    def full(cls, shape: int | Sequence[int], fill_value: Scalar, dtype: DTypeLike = None,
             device: str | None = None) -> Tensor:
        """A splat value: one shaped core.const, no buffer (a symbolic shape: a const expanded to it)."""
        shp = shape_args(shape, ())
        sym = any(V.is_sym(x) for x in shp)
        shp = V.dims(shp, "full") if sym else check_shape(shp)
        if sym and any(not V.is_sym(x) and x < 0 for x in shp):
            raise ValueError(f"full: shape {V.fmt_dims(shp)} must have non-negative dims")
        if not P.is_scalar(fill_value):
            fill_value = np.asarray(fill_value).item()
        d = P.to_dtype(dtype) or P.scalar_dtype(fill_value)
        P.check_fits(fill_value, d)
        if sym:
            return cls(T.movement(T.EXPAND, C.const(d, fill_value, (1,) * len(shp)), shp), device=device)
        return cls(C.const(d, fill_value, shp), device=device)

    @classmethod
    @_creation
    def zeros(cls, *shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return cls.full(shape_args(shape[0], shape[1:]) if shape else (), 0.0, P.to_dtype(dtype) or
                           P.DEFAULT_FLOAT, device)

    @classmethod
    @_creation
    def ones(cls, *shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return cls.full(shape_args(shape[0], shape[1:]) if shape else (), 1.0, P.to_dtype(dtype) or
                           P.DEFAULT_FLOAT, device)

    @classmethod
    @_creation
    def empty(cls, *shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """A fresh buffer (zero-filled here, so programs stay deterministic)."""
        shp = check_shape(shape_args(shape[0], shape[1:]) if shape else (), "empty shape")
        d = P.to_dtype(dtype) or P.DEFAULT_FLOAT
        return cls(np.zeros(shp, P.to_np(d)), dtype=d, device=device)

    @classmethod
    @_creation
    def arange(cls, start: Scalar, stop: Scalar | None = None, step: Scalar = 1, dtype: DTypeLike = None,
               device: str | None = None) -> Tensor:
        """start, start+step, ... < stop; int32 when all bounds are ints, else float32 (tinygrad's defaults)."""
        if stop is None:
            start, stop = 0, start
        if any(V.is_sym(v) for v in (start, stop, step)):
            raise TypeError("arange: start, stop and step must be numbers, not symbolic (slice a static arange with "
                            "the Variable instead: cls.arange(max)[:n])")
        if step == 0:
            raise ValueError("arange step must not be zero")
        ints = all(isinstance(v, int) for v in (start, stop, step))
        # ceil((stop - start) / step): exact for ints (a float quotient of ints near 2**62 rounds a step away)
        n = max(0, -((start - stop) // step) if ints else math.ceil((stop - start) / step))
        try:
            d = P.to_dtype(dtype) or (P.promote_scalars(start, start + (n - 1) * step) if ints and n else
                                      P.DEFAULT_INT if ints else P.DEFAULT_FLOAT)
        except OverflowError as e:
            raise OverflowError(f"arange({start}, {stop}, {step}): {e}") from None
        if ints and n:
            P.check_fits(int(start), d)
            P.check_fits(int(start + (n - 1) * step), d)
        if ints and n and d.kind in ("int", "uint"):  # lazy: the kernel's own index (no buffer; a pick folds to a load)
            base = cls(UOp(T.ARANGE, d if start == 0 and step == 1 else dtypes.int64, (), (n,)), device=device)
            return base if start == 0 and step == 1 else (base * step + start).cast(d)
        vals = start + np.arange(n, dtype=np.float64 if d.is_float else np.int64) * step
        return cls(vals, dtype=d, device=device)

    @classmethod
    @_creation
    def linspace(cls, start: float, stop: float, steps: int, dtype: DTypeLike = None,
                 device: str | None = None) -> Tensor:
        if steps < 0:
            raise ArgumentError(f"linspace steps must be >= 0, got {steps}")
        d = P.to_dtype(dtype) or P.DEFAULT_FLOAT
        if d.is_bool:
            raise ArgumentError("linspace with dtype bool is not supported (tinygrad)")
        if d.is_int and steps:
            return cls(_int_linspace(start, stop, steps, d), dtype=d, device=device)
        return cls(np.linspace(float(start), float(stop), steps), dtype=d, device=device)

    @classmethod
    @_creation
    def eye(cls, n: int, m: int | None = None, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Ones on the diagonal, built lazily: a column of ones padded by one and re-read row by row."""
        m = n if m is None else m
        check_shape((n, m))
        k = max(n, m)
        d = P.to_dtype(dtype) or P.DEFAULT_FLOAT
        if k == 0:
            return cls.zeros(n, m, dtype=d, device=device)
        sq = cls.ones(k, 1, dtype=d, device=device).pad(((0, 0), (0, k))).flatten().shrink(((0, k * k),))
        return sq.reshape(k, k).shrink(((0, n), (0, m)))

    def full_like(self, fill_value: Scalar, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return type(self).full(self.shape, fill_value, P.to_dtype(dtype) or self.dtype, device or self.device)

    def zeros_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return self.full_like(0, dtype, device)

    def ones_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return self.full_like(1, dtype, device)

    @classmethod
    def _random(cls, shape: tuple, dtype: DTypeLike, device: str | None, gen: Any, default: DType) -> Tensor:
        shp = check_shape(shape_args(shape[0], shape[1:]) if shape else (), "random tensor shape")
        t = cls(gen(shp), dtype=P.to_dtype(dtype) or default, device=device)
        if RANDOM_SOURCES:  # a TinyJit capture: a replay draws this tensor again
            RANDOM_SOURCES[-1].append((D.buffer_of(t.uop), gen, shp))
        return t

    @classmethod
    @_creation
    def rand(cls, *shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Uniform in [0, 1)."""
        return cls._random(shape, dtype, device, lambda s: cls._rng.random(s), P.DEFAULT_FLOAT)

    @classmethod
    @_creation
    def randn(cls, *shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Standard normal."""
        return cls._random(shape, dtype, device, lambda s: cls._rng.standard_normal(s), P.DEFAULT_FLOAT)

    @classmethod
    @_creation
    def randint(cls, *shape: Any, low: int = 0, high: int = 10, dtype: DTypeLike = None,
                device: str | None = None) -> Tensor:
        """Uniform integers in [low, high)."""
        if high <= low:
            raise ValueError(f"randint needs low < high, got low={low} high={high}")
        return cls._random(shape, dtype, device, lambda s: cls._rng.integers(low, high, s), P.DEFAULT_INT)

    @classmethod
    @_creation
    def uniform(cls, *shape: Any, low: float = 0.0, high: float = 1.0, dtype: DTypeLike = None,
                device: str | None = None) -> Tensor:
        if not low < high:
            raise ValueError(f"uniform needs low < high, got low={low}, high={high}")
        return cls._random(shape, dtype, device, lambda s: cls._rng.uniform(low, high, s), P.DEFAULT_FLOAT)

    @classmethod
    @_creation
    def normal(cls, *shape: Any, mean: float = 0.0, std: float = 1.0, dtype: DTypeLike = None,
               device: str | None = None) -> Tensor:
        if std < 0:
            raise ValueError(f"normal needs std >= 0, got {std}")
        return cls._random(shape, dtype, device, lambda s: cls._rng.normal(mean, std, s), P.DEFAULT_FLOAT)

    @classmethod
    @_creation
    def scaled_uniform(cls, *shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Uniform in [-1, 1) scaled by 1/sqrt(numel) (tinygrad's default layer init)."""
        shp = check_shape(shape_args(shape[0], shape[1:]) if shape else (), "random tensor shape")
        scale = math.prod(shp) ** -0.5 if math.prod(shp) else 1.0
        return cls._random(shp, dtype, device, lambda s: cls._rng.uniform(-1.0, 1.0, s) * scale, P.DEFAULT_FLOAT)

    @classmethod
    @_creation
    def glorot_uniform(cls, *shape: Any, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        shp = shape_args(shape[0], shape[1:]) if shape else ()
        bound = math.sqrt(6 / (shp[0] + math.prod(shp[1:]))) if shp else 1.0
        return cls.uniform(shp, low=-bound, high=bound, dtype=dtype, device=device)

    @classmethod
    @_creation
    def kaiming_uniform(cls, *shape: Any, a: float = 0.01, dtype: DTypeLike = None,
                        device: str | None = None) -> Tensor:
        shp = shape_args(shape[0], shape[1:]) if shape else ()
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a**2)) / math.sqrt(math.prod(shp[1:]) or 1)
        return cls.uniform(shp, low=-bound, high=bound, dtype=dtype, device=device)

    def rand_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        """Uniform in [0, 1) of self's shape (self's dtype when it is a float, and its device, unless given)."""
        return type(self).rand(self.shape, dtype=dtype or (self.dtype if self.dtype.is_float else None),
                           device=device or self.device)

    def randn_like(self, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        return type(self).randn(self.shape, dtype=dtype or (self.dtype if self.dtype.is_float else None),
                            device=device or self.device)

    @classmethod
    def randperm(cls, n: int, device: str | None = None, dtype: DTypeLike = dtypes.int32) -> Tensor:
        """A random permutation of 0..n-1 (drawn on the host, as the other random tensors)."""
        return cls(cls._rng.permutation(n), dtype=dtype, device=device)

    def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
        """Indices drawn from the (1-d, or 2-d per row) weights of self; int32 (tinygrad)."""
        if not 1 <= self.ndim <= 2 or num_samples < 1:
            raise ValueError(f"multinomial needs 1-d or 2-d weights and num_samples >= 1, got shape {self.shape} "
                             f"and num_samples={num_samples}")
        rows, n = (1, self.shape[0]) if self.ndim == 1 else self.shape
        if not replacement and num_samples > n:
            raise ValueError(f"multinomial without replacement cannot draw {num_samples} of {n} categories")
        draws = num_samples if replacement or num_samples == 1 else n
        u = type(self)(type(self)._rng.random((rows, draws)), dtype=dtypes.float32, device=self.device)
        return _draw(self, u, num_samples, replacement)

    @classmethod
    def kaiming_normal(cls, *shape: Any, a: float = 0.01, dtype: DTypeLike = None, device: str | None = None) -> Tensor:
        shp = shape_args(shape[0], shape[1:]) if shape else ()
        std = math.sqrt(2.0 / (1 + a**2)) / math.sqrt(math.prod(shp[1:]) or 1)
        return cls.normal(shp, mean=0.0, std=std, dtype=dtype, device=device)
