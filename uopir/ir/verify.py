"""The verifier: every node of a graph (and of every nested region) checked against its op's declaration.

The hash-consed constructor validates nothing (it is the hot path), so this is where bad IR is caught: unknown ops,
wrong operand counts, malformed args, dtype rules (the op's `verify`) and shape rules (the op's `shape`). Every
failure becomes a located Diagnostic, prefixed with the op name the MLIR way (`'core.add' op ...`). Whatever it is
given, `verify` raises nothing but IRError: a crash inside an op's own rule becomes a diagnostic naming the op.
"""
from __future__ import annotations

import math
from typing import Any

from uopir.ir.diagnostics import Diagnostic, IRError, ShapeError, SourceMap, diag_at, located
from uopir.ir.dtype import DType
from uopir.ir.ops import REGISTRY, AttrError, OpDef, RegionAttr, fmt_literal
from uopir.ir.uop import UOp

__all__ = ["verify", "collect_diagnostics"]


def _same(a: Any, b: Any) -> bool:
    """Equality as hash-consing sees it: same types, floats bit-exact (so -0.0 and 1 vs 1.0 differ)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or a.hex() == b.hex()
    if type(a) is tuple:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a is b or a == b


def _err_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


class _Verifier:
    def __init__(self) -> None:
        self.diags: list[Diagnostic] = []
        self.state: dict[UOp, int] = {}  # 1 = on the walk path, 2 = done (shared by all regions)
        self.bad: set[UOp] = set()  # nodes whose users cannot be checked meaningfully (errors do not cascade)

    def error(self, u: UOp | None, msg: str) -> None:
        self.diags.append(diag_at(u, msg))

    # ---- walking ---------------------------------------------------------------------------------------------------
    def graph(self, root: Any) -> None:
        if not isinstance(root, UOp):
            self.error(None, f"expected a UOp graph to verify, got {type(root).__name__}")
            return
        for u in self.walk(root):
            self.check(u)

    def walk(self, root: UOp) -> list[UOp]:
        """Sources before users, like toposort, but survives garbage: a non-tuple src, non-UOp sources, cycles."""
        order: list[UOp] = []
        state = self.state
        stack: list[tuple[UOp, bool]] = [(root, False)]
        while stack:
            u, leaving = stack.pop()
            if leaving:
                state[u] = 2
                order.append(u)
                continue
            st = state.get(u)
            if st == 2:
                continue
            if st == 1:
                self.error(u, f"{self.prefix(u)}is part of a cycle (a node is its own operand)")
                self.bad.add(u)
                continue
            state[u] = 1
            stack.append((u, True))
            src = u.src
            if type(src) is not tuple:
                self.error(u, f"{self.prefix(u)}operands must be a tuple of UOps, got {type(src).__name__}")
                self.bad.add(u)
                continue
            junk = []
            for i in range(len(src) - 1, -1, -1):
                s = src[i]
                if type(s) is UOp or isinstance(s, UOp):
                    stack.append((s, False))
                else:
                    junk.append(i)
            for i in reversed(junk):
                self.error(u, f"{self.prefix(u)}operand {i} is not a UOp: {type(src[i]).__name__}")
                self.bad.add(u)
        return order

    @staticmethod
    def prefix(u: UOp) -> str:
        name = getattr(u.op, "name", None)
        return f"'{name}' op " if type(name) is str else ""

    # ---- one node --------------------------------------------------------------------------------------------------
    def check(self, u: UOp) -> None:
        op = u.op
        if not isinstance(op, OpDef) or REGISTRY.get(op.name) is not op:
            self.error(u, f"unregistered operation {fmt_literal(getattr(op, 'name', op))}")
            self.bad.add(u)
            return
        pre = f"'{op.name}' op "
        if not isinstance(u.dtype, DType):
            self.error(u, f"{pre}result type must be a DType, got {type(u.dtype).__name__}")
            self.bad.add(u)
            return
        if u in self.bad:  # structural problem already reported by the walk
            return
        ok = True
        if not op.arity_ok(len(u.src)):
            self.error(u, f"{pre}expects {op.arity_text()}, got {len(u.src)}")
            ok = False
        for msg in self.arg_errors(op, u):
            self.error(u, pre + msg)
            ok = False
        if not ok:
            self.bad.add(u)
            return
        self.regions(op, u)
        tainted = bool(self.bad) and any(s in self.bad for s in u.src)
        if op.verify is not None:
            try:
                for msg in op.verify(u):
                    self.error(u, pre + msg)
            except Exception as e:  # noqa: BLE001 - an op's own rule must never crash the verifier
                if not tainted:
                    self.error(u, f"{pre}verifier of '{op.name}' failed: {_err_text(e)}")
                    self.bad.add(u)
        if tainted:
            self.bad.add(u)  # its shape depends on a broken source: skip, and let the taint travel up
            return
        try:
            _ = u.shape
        except ShapeError as e:
            self.error(u, pre + str(e))
            self.bad.add(u)
        except Exception as e:  # noqa: BLE001
            self.error(u, f"{pre}shape rule of '{op.name}' failed: {_err_text(e)}")
            self.bad.add(u)

    def arg_errors(self, op: OpDef, u: UOp) -> list[str]:
        """The arg must be exactly what make_arg would build: right arity, every value canonical for its type."""
        arg = u.arg
        if not op.attrs:
            return [] if arg is None else [f"takes no attributes, got arg {fmt_literal(arg)}"]
        try:
            values = op.attr_values(arg)
        except Exception:  # noqa: BLE001 - wrong tuple length, not a tuple, ...
            names = ", ".join(a.name for a in op.attrs)
            return [f"arg must be a tuple of {len(op.attrs)} values ({names}), got {fmt_literal(arg)}"]
        errs = []
        for a in op.attrs:
            v = values.get(a.name)
            try:
                c = a.type.convert(v)
            except AttrError as e:
                errs.append(f"attribute '{a.name}': {e}")
                continue
            except Exception as e:  # noqa: BLE001
                errs.append(f"attribute '{a.name}': {_err_text(e)}")
                continue
            if not _same(c, v):
                errs.append(f"attribute '{a.name}' is not canonical: {fmt_literal(v)} (expected {fmt_literal(c)})")
        if not errs and op.normalize_arg is not None:
            try:
                n = op.normalize_arg(u.dtype, arg)
            except Exception as e:  # noqa: BLE001
                errs.append(f"invalid value for {u.dtype}: {e}")
            else:
                if not _same(n, arg):
                    errs.append(f"value {fmt_literal(arg)} is not normalized for {u.dtype} "
                                f"(expected {fmt_literal(n)})")
        return errs

    def regions(self, op: OpDef, u: UOp) -> None:
        """A region attr is an isolated graph of its own: verify it too."""
        values = None
        for a in op.attrs:
            if isinstance(a.type, RegionAttr):
                if values is None:
                    values = op.attr_values(u.arg)
                self.graph(values[a.name])


def collect_diagnostics(root: UOp, source: SourceMap | None = None) -> list[Diagnostic]:
    """Every problem in the graph (and its regions), sources first; an empty list means valid.

    Locations point into `source` (the map of the parse the caller holds: `parse_with_source_map`), else into the
    parse a `located` block made current, else into the newest parse that returned `root`."""
    v = _Verifier()
    with located(source if source is not None else root if isinstance(root, UOp) else None):
        try:
            v.graph(root)
        except Exception as e:  # noqa: BLE001 - last resort: the verifier reports, it never crashes
            v.error(None, f"internal verifier error: {_err_text(e)}")
    return v.diags


def verify(root: UOp, source: SourceMap | None = None) -> None:
    """Raise IRError holding every located diagnostic if the graph is invalid (located as `collect_diagnostics`)."""
    diags = collect_diagnostics(root, source)
    if diags:
        raise IRError(diagnostics=diags)
