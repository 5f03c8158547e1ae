"""A graph as Graphviz `dot` text (`uop-opt --view-op-graph`, as MLIR's -view-op-graph): one node per UOp, labelled
with its op, dtype and short arg and filled with its dialect's color; edges from each operand to its user, in
operand order (`taillabel` is the operand's position); every region (a kernel body, a device program) is a
`subgraph cluster_N` inside the cluster of the op that holds it, with a dashed edge from the region's root to the op.
"""
from __future__ import annotations

import re

from uopir.ir.printer import fmt_type
from uopir.ir.regions import regions_of
from uopir.ir.trace import format_arg
from uopir.ir.uop import UOp

__all__ = ["to_dot", "dot_string", "DIALECT_COLORS", "MAX_DOT_TEXT"]

DIALECT_COLORS = {"core": "#dbe9f6", "tensor": "#fde2c4", "kernel": "#d9f0d3", "device": "#e8dcf0"}
_OTHER = "#eeeeee"
_LABEL_ARG = 40  # characters of an arg shown in a node's label
MAX_DOT_TEXT = 1000  # characters of a text in a dot string (escaped, at most 7 bytes each: under Graphviz's 16384)


# what a quoted dot string cannot show as itself: a line break other than \n (CR, U+0085, U+2028/2029), NUL and the
# other controls, lone surrogates (no UTF-8 holds them); each is written as visible text (`\x0d`, `\u2028`)
_DOT_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\\\x{c:02x}" if c < 0x100 else f"\\\\u{c:04x}"


def dot_string(text: str) -> str:
    """`text` as a quoted dot string (a graph name, a label, a color) that shows exactly it: `\\` and `"` escaped
    (so no dot escape such as `\\N` or `\\l` and no end quote comes from the text), a newline as dot's line break,
    other line breaks and controls as visible `\\xNN` / `\\uNNNN` text; past `MAX_DOT_TEXT` characters, cut with
    `...` (Graphviz reads no quoted string over 16384 bytes)."""
    if len(text) > MAX_DOT_TEXT:
        text = text[:MAX_DOT_TEXT - 3] + "..."
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + _DOT_UNSAFE.sub(_visible, text).replace("\n", "\\n") + '"'


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
    lines = [f"digraph {dot_string(name)} {{", "  rankdir=BT;",
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
            lines.append(f"{ind}  label={dot_string(str(x))}; style=dashed;")
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
            color = DIALECT_COLORS.get(dialect, _OTHER)
            lines.append(f"{ind}{ids[u]} [label={dot_string(label)}, fillcolor={dot_string(color)}];")
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
            lines.append(f"  {ids[s]} -> {nid} [taillabel={dot_string(str(i))}];")
    for r, u in holders:
        lines.append(f"  {ids[r]} -> {ids[u]} [style=dashed, label=region];")
    lines.append("}")
    return "\n".join(lines) + "\n"
