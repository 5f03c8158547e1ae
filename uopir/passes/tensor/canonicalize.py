"""`tensor-canonicalize`: the named pipeline realize runs on frontend graphs, `canonicalize` with the folds of the
core and tensor dialects (movement chains, constants, exact identities, where, group dedup; see
uopir.dialects.core and uopir.dialects.tensor, where each fold sits beside its op).
"""
from __future__ import annotations

from uopir.passes.registry import register_pipeline

register_pipeline("tensor-canonicalize", None, lambda _: "canonicalize{dialects=core,tensor}",
                  summary="canonicalize with the folds of the core and tensor dialects")
