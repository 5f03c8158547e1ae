"""Data types: scalars, vectors and pointers, interned so that equality is identity."""
from __future__ import annotations

from typing import Final

_FMT = {  # kind, bits -> numpy dtype name
    ("bool", 1): "bool", ("int", 8): "int8", ("int", 16): "int16", ("int", 32): "int32", ("int", 64): "int64",
    ("uint", 8): "uint8", ("uint", 16): "uint16", ("uint", 32): "uint32", ("uint", 64): "uint64",
    ("float", 16): "float16", ("float", 32): "float32", ("float", 64): "float64", ("index", 64): "int64",
}
ADDRSPACES: Final = ("global", "local", "register")


class DType:
    """One interned type. `scalar` is the element type of a vector (itself for a scalar); `base` the pointee."""

    __slots__ = ("kind", "bits", "count", "scalar", "base", "addrspace", "size", "name", "__weakref__")
    _cache: dict[tuple, DType] = {}

    kind: str
    bits: int
    count: int
    scalar: DType
    base: DType | None
    addrspace: str | None
    size: int
    name: str

    def __new__(cls, kind: str, bits: int, count: int = 1, base: DType | None = None,
                addrspace: str | None = None, size: int = -1, name: str | None = None,
                scalar: DType | None = None) -> DType:
        if kind == "ptr":
            key: tuple = ("ptr", base, addrspace, size)
        elif count > 1:
            assert scalar is not None and scalar.count == 1
            key = ("vec", scalar, count)
        else:
            key = ("scalar", name)
        if (d := DType._cache.get(key)) is not None:
            return d
        d = object.__new__(cls)
        d.kind, d.bits, d.count, d.base, d.addrspace, d.size = kind, bits, count, base, addrspace, size
        if kind == "ptr":
            assert base is not None and addrspace in ADDRSPACES, (base, addrspace)
            d.scalar = d
            d.name = f"ptr<{base.name}, {addrspace}" + (f", {size}>" if size >= 0 else ">")
        elif count > 1:
            assert scalar is not None
            d.scalar = scalar
            d.name = f"vector<{count}x{scalar.name}>"
        else:
            assert name is not None, "scalar dtypes are created once, in this module"
            d.scalar = d
            d.name = name
        DType._cache[key] = d
        return d

    def __reduce__(self):
        if self.kind == "ptr":
            return (DType, (self.kind, self.bits, 1, self.base, self.addrspace, self.size))
        if self.count > 1:
            return (DType, (self.kind, self.bits, self.count, None, None, -1, None, self.scalar))
        return (DType, (self.kind, self.bits, 1, None, None, -1, self.name))

    def __repr__(self) -> str:
        return f"dtypes.{_PY_NAMES[self]}" if self in _PY_NAMES else self.name

    def __str__(self) -> str:
        return self.name

    # --- derived facts -------------------------------------------------------------------------------------------
    def vec(self, count: int) -> DType:
        assert self.kind != "ptr" and self.count == 1, f"cannot vectorize {self.name}"
        return self if count == 1 else DType(self.kind, self.bits, count, scalar=self)

    def ptr(self, addrspace: str = "global", size: int = -1) -> DType:
        return DType("ptr", 64, 1, self, addrspace, size)

    @property
    def itemsize(self) -> int:
        return 8 if self.kind == "ptr" else max(1, self.bits // 8) * self.count

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """Integers of any signedness, including `index`."""
        return self.kind in ("int", "uint", "index")

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "uint"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_ptr(self) -> bool:
        return self.kind == "ptr"

    @property
    def is_vector(self) -> bool:
        return self.count > 1

    @property
    def np_name(self) -> str | None:
        """The numpy dtype name that holds one element (bfloat16 is carried as float32)."""
        if self.scalar.name == "bf16":
            return "float32"
        return _FMT.get((self.kind, self.bits)) if self.kind != "ptr" else None

    @property
    def min(self) -> int | float | bool:
        if self.kind == "bool":
            return False
        if self.kind == "uint":
            return 0
        if self.kind in ("int", "index"):
            return -(1 << (self.bits - 1))
        return float("-inf")

    @property
    def max(self) -> int | float | bool:
        if self.kind == "bool":
            return True
        if self.kind == "uint":
            return (1 << self.bits) - 1
        if self.kind in ("int", "index"):
            return (1 << (self.bits - 1)) - 1
        return float("inf")


class _DTypesMeta(type):
    """Makes `dtypes.default_float` / `dtypes.default_int` settable class properties (tinygrad's
    `dtypes.default_float = dtypes.float16`), checked on assignment; every frontend default reads them."""

    _default_float: DType
    _default_int: DType

    @property
    def default_float(cls) -> DType:
        return cls._default_float

    @default_float.setter
    def default_float(cls, d: DType) -> None:
        if not isinstance(d, DType) or d.kind != "float" or d.count != 1:
            raise TypeError(f"dtypes.default_float must be a float dtype, got {d!r}")
        cls._default_float = d

    @property
    def default_int(cls) -> DType:
        return cls._default_int

    @default_int.setter
    def default_int(cls, d: DType) -> None:
        if not isinstance(d, DType) or d.kind not in ("int", "uint") or d.count != 1:
            raise TypeError(f"dtypes.default_int must be an integer dtype, got {d!r}")
        cls._default_int = d


class dtypes(metaclass=_DTypesMeta):  # noqa: N801 - the name users of tinygrad expect
    """The scalar types, by their Python names. Text names (`f32`) are the `.name` of each.

    `dtypes.default_float` (float32) and `dtypes.default_int` (int32) are the dtypes the frontend picks when none is
    given; assign them to change that (tinygrad's rule)."""

    bool: Final = DType("bool", 1, name="bool")
    int8: Final = DType("int", 8, name="i8")
    int16: Final = DType("int", 16, name="i16")
    int32: Final = DType("int", 32, name="i32")
    int64: Final = DType("int", 64, name="i64")
    uint8: Final = DType("uint", 8, name="u8")
    uint16: Final = DType("uint", 16, name="u16")
    uint32: Final = DType("uint", 32, name="u32")
    uint64: Final = DType("uint", 64, name="u64")
    float16: Final = DType("float", 16, name="f16")
    bfloat16: Final = DType("float", 16, name="bf16")
    float32: Final = DType("float", 32, name="f32")
    float64: Final = DType("float", 64, name="f64")
    index: Final = DType("index", 64, name="index")
    void: Final = DType("void", 0, name="void")

    # aliases (tinygrad's and C's names)
    half = float16
    float = float32
    double = float64
    int = int32
    long = int64
    uchar = uint8
    char = int8
    short = int16
    ushort = uint16
    uint = uint32
    ulong = uint64

    _default_float: DType = float32
    _default_int: DType = int32

    # groups (tinygrad's names)
    uints: Final = (uint8, uint16, uint32, uint64)
    sints: Final = (int8, int16, int32, int64)
    ints: Final = uints + sints
    floats: Final = (float16, bfloat16, float32, float64)

    # predicates as functions of a dtype (tinygrad's `dtypes.is_float(d)`; the DType properties are the same tests)
    @staticmethod
    def is_float(d: DType) -> bool:
        return d.kind == "float"

    @staticmethod
    def is_int(d: DType) -> bool:
        """Integers of any signedness (`index` included), not bool."""
        return d.kind in ("int", "uint", "index")

    @staticmethod
    def is_unsigned(d: DType) -> bool:
        return d.kind == "uint"

    @staticmethod
    def is_bool(d: DType) -> bool:
        return d.kind == "bool"

    @staticmethod
    def from_py(x: object) -> DType:
        """The dtype a Python value gets with no dtype given: bool, the default int (int64 if that cannot hold it),
        the default float; a list or tuple the widest of its elements' (the default float when empty)."""
        if isinstance(x, bool):
            return dtypes.bool
        if isinstance(x, int):
            d = dtypes.default_int
            return d if d.min <= x <= d.max else dtypes.int64
        if isinstance(x, float):
            return dtypes.default_float
        if isinstance(x, list | tuple):
            if not x:
                return dtypes.default_float
            ds = [dtypes.from_py(v) for v in x]
            if any(d.kind == "float" for d in ds):
                return dtypes.default_float
            return max(ds, key=lambda d: d.bits)
        raise TypeError(f"no dtype for a Python {type(x).__name__}")

    @staticmethod
    def all_scalars() -> tuple[DType, ...]:
        return SCALARS

    @staticmethod
    def from_name(name: str) -> DType | None:
        """A scalar dtype from its text name (`f32`) or Python name (`float32`)."""
        return _BY_NAME.get(name)

    @staticmethod
    def from_numpy(npdtype) -> DType:
        import numpy as np

        name = np.dtype(npdtype).name
        if (d := _BY_NAME.get(name)) is None:
            raise TypeError(f"numpy dtype {name} has no uopir equivalent")
        return d

SCALARS: Final = (dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16,
                  dtypes.uint32, dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64,
                  dtypes.index, dtypes.void)
_PY_NAMES: dict[DType, str] = {
    dtypes.bool: "bool", dtypes.int8: "int8", dtypes.int16: "int16", dtypes.int32: "int32", dtypes.int64: "int64",
    dtypes.uint8: "uint8", dtypes.uint16: "uint16", dtypes.uint32: "uint32", dtypes.uint64: "uint64",
    dtypes.float16: "float16", dtypes.bfloat16: "bfloat16", dtypes.float32: "float32", dtypes.float64: "float64",
    dtypes.index: "index", dtypes.void: "void",
}
_ALIASES: dict[str, DType] = {  # tinygrad's and C's names: "int" is int32 as in tinygrad and C (numpy: int64)
    "half": dtypes.float16, "float": dtypes.float32, "double": dtypes.float64, "char": dtypes.int8,
    "short": dtypes.int16, "int": dtypes.int32, "long": dtypes.int64, "uchar": dtypes.uint8, "ushort": dtypes.uint16,
    "uint": dtypes.uint32, "ulong": dtypes.uint64,
}
_BY_NAME: dict[str, DType] = {**{d.name: d for d in SCALARS}, **{v: k for k, v in _PY_NAMES.items()}, **_ALIASES}
