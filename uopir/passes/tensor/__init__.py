"""Tensor-level passes; importing this package registers them with the pass manager."""
from uopir.passes.tensor import canonicalize as canonicalize  # noqa: F401
from uopir.passes.tensor import split_reduce as split_reduce  # noqa: F401
