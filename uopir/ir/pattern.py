"""The rewrite engine, in one import: the pattern language, the matcher compiler and the rewrite driver.

The engine lives in three modules, each with one job; this facade keeps `from uopir.ir.pattern import ...` working:
  uopir.ir.upat              UPat (patterns over UOps, operator sugar for core ops) and the dtype predicates
  uopir.ir.pattern_compiler  PatternMatcher (rules, names, sources, inspection) compiled to per-op functions
  uopir.ir.rewrite           graph_rewrite, RewriteStats, RewriteError
"""
from __future__ import annotations

from uopir.ir.pattern_compiler import PatternMatcher, Rule
from uopir.ir.rewrite import RewriteError, RewriteStats, graph_rewrite
from uopir.ir.upat import UPat, is_bool, is_float, is_int, is_ptr, is_vector

__all__ = ["UPat", "PatternMatcher", "Rule", "graph_rewrite", "RewriteStats", "RewriteError",
           "is_float", "is_int", "is_bool", "is_ptr", "is_vector"]
