"""Tensor by op family (issue 25): `tensor.py` holds the class and its core, every other public method is defined
once, in the mixin of its family, and no method is a one-line hand-off to a function (of another module or of
its own): the op's body is the method's."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

from uopir.frontend.tensor import Tensor

FRONTEND = Path(__file__).resolve().parent.parent / "uopir" / "frontend"
# the family modules Tensor's methods live in (mixin classes the class inherits)
FAMILIES = {"creation", "casts", "elementwise", "math_ops", "activations", "movement", "shape_ops", "reduction",
            "indexing", "selection", "scatter", "nn_ops", "realization"}
# what the class itself keeps: construction, the lazy UOp, shape/dtype/device properties, devices, autograd
CORE = {"shape", "dtype", "ndim", "numel", "element_size", "nbytes", "size", "is_floating_point", "to", "clone",
        "contiguous", "detach", "requires_grad", "requires_grad_", "gradient", "backward", "train", "test", "training",
        "no_grad", "uop", "device", "grad"}


def _public() -> list[str]:
    return [n for n in dir(Tensor) if not n.startswith("_") or (n.startswith("__") and n.endswith("__")
                                                                and any(n in vars(c) for c in Tensor.__mro__[:-1]))]


def _owners(name: str) -> list[type]:
    return [c for c in Tensor.__mro__[:-1] if name in vars(c)]


def test_every_public_method_is_defined_once() -> None:
    twice = {n: [c.__name__ for c in _owners(n)] for n in _public() if len(_owners(n)) > 1
             and n not in ("__slots__", "__doc__", "__module__", "__annotations__", "__dict__", "__weakref__",
                           "__firstlineno__", "__static_attributes__", "__qualname__")}
    assert not twice, f"defined in more than one class of Tensor's MRO: {twice}"


def test_tensor_keeps_only_its_core_and_families_hold_the_rest() -> None:
    own = {n for n in vars(Tensor) if not n.startswith("_")}
    assert own <= CORE, f"public methods defined in tensor.py that belong to a family module: {sorted(own - CORE)}"
    for base in Tensor.__mro__[1:-1]:
        module = base.__module__.rsplit(".", 1)[-1]
        assert base.__module__.startswith("uopir.frontend.") and module in FAMILIES, \
            f"{base.__name__} comes from {base.__module__}, not a family module"
        assert vars(base).get("__slots__") == (), f"{base.__name__} must declare __slots__ = () (Tensor is slotted)"
    # the families together define every public method the class does not keep
    for n in _public():
        if n.startswith("__") or n in CORE:
            continue
        owner = _owners(n)[0]
        assert owner is not Tensor and owner.__module__.rsplit(".", 1)[-1] in FAMILIES, (n, owner)


def _on_self(node: ast.expr | None) -> bool:
    """Is the call's first argument the tensor itself: `self`, `self.m()`, or a tuple that starts with `self`?"""
    if isinstance(node, ast.Tuple) and node.elts:
        node = node.elts[0]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return isinstance(node, ast.Name) and node.id == "self"


def _handoffs(path: Path) -> list[str]:
    """Methods whose whole body (docstring aside) is `return function(self, ...)` (or of `self.m()`): the op's body
    lives elsewhere. `function` is either an imported module's (`module.function`) or a function defined in the same
    module (a family module keeps as functions only the pieces several ops share, each called with more around it).
    Calls that hand over a value (`D.compiled(self.uop, ...)`) are the method's own work."""
    tree = ast.parse(path.read_text())
    modules = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom | ast.Import)
               for a in node.names}
    local_functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    out = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if not (len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call)):
                continue
            f, args = body[0].value.func, body[0].value.args
            if not _on_self(args[0] if args else None):
                continue
            if isinstance(f, ast.Name) and f.id in local_functions:
                out.append(f"{path.name}: {cls.name}.{fn.name} -> {f.id} (a function of the same module)")
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules \
                    and inspect.ismodule(getattr(importlib.import_module(f"uopir.frontend.{path.stem}"), f.value.id,
                                                 None)):
                out.append(f"{path.name}: {cls.name}.{fn.name} -> {f.value.id}.{f.attr}")
    return out


def test_no_method_hands_off_to_a_function() -> None:
    found = [h for name in sorted(FAMILIES | {"tensor"}) if (FRONTEND / f"{name}.py").exists()
             for h in _handoffs(FRONTEND / f"{name}.py")]
    assert not found, "one-line delegations (put the body in the family's method):\n" + "\n".join(found)
