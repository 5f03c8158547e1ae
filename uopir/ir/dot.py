"""A graph as Graphviz `dot` text (`uop-opt --view-op-graph`, as MLIR's -view-op-graph): one node per UOp, labelled
with its op, dtype and short arg and filled with its dialect's color; edges from each operand to its user, in
operand order (`taillabel` is the operand's position); every region (a kernel body, a device program) is a
`subgraph cluster_N` inside the cluster of the op that holds it, with a dashed edge from the region's root to the op.
"""
from __future__ import annotations

from uopir.ir.printer import fmt_type
from uopir.ir.regions import regions_of
from uopir.ir.trace import format_arg
from uopir.ir.uop import UOp

__all__ = ["to_dot", "DIALECT_COLORS"]

DIALECT_COLORS = {"core": "#dbe9f6", "tensor": "#fde2c4", "kernel": "#d9f0d3", "device": "#e8dcf0"}
_OTHER = "#eeeeee"
_LABEL_ARG = 40  # characters of an arg shown in a node's label


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _type(u: UOp) -> str:
    try:
        shape = u.shape if u.op.shape is not None else None
    except Exception:  # noqa: BLE001 - an invalid graph still draws
        shape = None
    return fmt_type(u.dtype, shape)


def to_dot(root: UOp, name: str = "uop") -> str:
    """The dot text of the graph rooted at root: every node reachable through sources, regions as clusters (a region
    shared by several ops is drawn once, in the cluster of the first; a node shared by blocks, where first seen)."""
    ids: dict[UOp, str] = {}
    lines = [f"digraph {_q(name)} {{", "  rankdir=BT;",
             '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];', "  edge [fontsize=8];"]
    holders: list[tuple[UOp, UOp]] = []  # (region root, op holding it)
    drawn: set[UOp] = {root}
    nclusters = 0
    # actions, last first: ("block", root, depth) draws a block's nodes; ("open", label, depth) / ("close", _, depth)
    stack: list[tuple[str, object, int]] = [("block", root, 1)]
    while stack:
        what, x, depth = stack.pop()
        ind = "  " * depth
        if what == "open":
            lines.append(f"{ind}subgraph cluster_{nclusters} {{")
            lines.append(f"{ind}  label={_q(str(x))}; style=dashed;")
            nclusters += 1
            continue
        if what == "close":
            lines.append(ind + "}")
            continue
        assert isinstance(x, UOp)
        nested: list[tuple[UOp, str]] = []
        for u in x.toposort():
            if u in ids:
                continue
            ids[u] = f"n{len(ids)}"
            dialect = u.op.name.split(".", 1)[0]
            arg = format_arg(u.arg)
            label = f"{u.op.name} : {_type(u)}"
            if arg is not None:
                label += "\n" + (arg if len(arg) <= _LABEL_ARG else arg[:_LABEL_ARG - 3] + "...")
            lines.append(f"{ind}{ids[u]} [label={_q(label)}, fillcolor={_q(DIALECT_COLORS.get(dialect, _OTHER))}];")
            for r in regions_of(u):
                holders.append((r, u))
                if r not in drawn:
                    drawn.add(r)
                    named = [a for a in (u.arg if type(u.arg) is tuple else ()) if type(a) is str]
                    nested.append((r, f"{u.op.name} @{named[0]}" if named else f"region of {u.op.name}"))
        for r, label in reversed(nested):  # each region a cluster inside this block's cluster
            stack += [("close", None, depth), ("block", r, depth + 1), ("open", label, depth)]
    for u, nid in ids.items():
        for i, s in enumerate(u.src):
            lines.append(f"  {ids[s]} -> {nid} [taillabel={_q(str(i))}];")
    for r, u in holders:
        lines.append(f"  {ids[r]} -> {ids[u]} [style=dashed, label=region];")
    lines.append("}")
    return "\n".join(lines) + "\n"
