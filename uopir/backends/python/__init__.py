"""The python backend: the reference interpreter, a table of numpy handlers per dialect.

    core.py  tensor.py  kernel.py   one handler table each (dict OpDef -> handler)
    base.py                         the handler signature and the loop that runs a table over a toposort
    interpreter.py                  `evaluate`: a core + tensor graph (kernel bodies through tensor.call)
    kernel.py                       `run_kernel`: one kernel.def on buffers, data-parallel over its ranges
    device.py                       `run_program`: one linearized device.program on buffers, in program order
    backend.py                      PythonBackend: the interpreter behind the backend interface

The semantics it implements are specified in uopir.dialects.semantics. Device-level ops run inside a device.program
(a linearized kernel); outside one they are reported as located errors naming the op.
"""
from uopir.backends.python.backend import PythonBackend
from uopir.backends.python.device import run_program
from uopir.backends.python.interpreter import evaluate
from uopir.backends.python.kernel import run_kernel

__all__ = ["evaluate", "run_kernel", "run_program", "PythonBackend"]
