"""`mydsl-c`: what a new backend takes, at its smallest. It is the C backend (renderer, runtime, target description
`c`) with another compiler configuration: -O1 and no tiered start. Registered as a backend it is a Tensor device:
`Tensor(x, device="mydsl-c")`, `uop-run --backend=mydsl-c`."""
from __future__ import annotations

from uopir.backends.c.backend import CBackend
from uopir.backends.c.compiler import QUICK_FLAGS, CCompiler
from uopir.backends.registry import register_backend
from uopir.passes.target import register_target, target


class MydslCBackend(CBackend):
    """The C backend's code, compiled with QUICK_FLAGS (-O1) by the system compiler."""

    device = "mydsl-c"

    def __init__(self) -> None:
        super().__init__(compiler=CCompiler(flags=QUICK_FLAGS), tiered=False)
        self.target = target("mydsl-c")


register_target(lambda: target("c").derive(name="mydsl-c"), "mydsl-c")
register_backend("mydsl-c", MydslCBackend, needs="a C compiler (the c backend's)")
