"""The opencl device is offered only when its driver builds a trivial kernel; otherwise it is unavailable with the
compiler's reason, which `uop-run --backend=opencl` prints and the opencl tests skip with.

A platform can list a device that builds nothing: pocl 3.0 on a CPU newer than its LLVM 14 (AMD Zen 5) fails every
build with "unknown target CPU 'generic'". The tests below do not wait for such a machine: the reason is read from
pyopencl-shaped messages, and a real build that fails (a kernel with an error, on whatever device is here) is
probed through the real driver, in a fresh process where the probe kernel is that one.
"""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from uopir.backends.opencl.runtime import (
    PROBE_SOURCE,
    ClDevice,
    OpenCLUnavailable,
    build_failure_reason,
    open_device,
    probe_build,
)
from uopir.backends.registry import get_backend
from uopir.tools.uop_run import main as uop_run

# what pyopencl raises when pocl 3.0's clang rejects the CPU name (seen on an AMD EPYC, cpu family 26)
POCL_UNKNOWN_CPU = """clBuildProgram failed: BUILD_PROGRAM_FAILURE - clBuildProgram failed: BUILD_PROGRAM_FAILURE

Build on <pyopencl.Device 'pthread-AMD EPYC' on 'Portable Computing Language' at 0x55cd0d0fbd50>:

error: unknown target CPU 'generic'
Device pthread-AMD EPYC failed to build the program

(options: -I /site-packages/pyopencl/cl)"""

# a kernel every OpenCL C compiler rejects (an undeclared name)
BROKEN = "__kernel void uopir_probe(__global int *out) { out[0] = uopir_no_such_name; }\n"

RELU = """
%x = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>
%z = core.const 0.0 : f32
%y = core.max %x, %z : tensor<4xf32>
core.sink %y
"""


def _device() -> ClDevice:
    try:
        return open_device()
    except OpenCLUnavailable as e:
        pytest.skip(f"no OpenCL platform here: {e}")


def test_the_reason_is_the_compilers_words_without_pyopencls_wrapping() -> None:
    why = build_failure_reason(POCL_UNKNOWN_CPU)
    assert why.startswith("error: unknown target CPU 'generic' (")
    assert "does not know this CPU model" in why and "POCL_LLVM_CPU_NAME" in why
    for wrapping in ("clBuildProgram", "Build on", "options:", "0x55cd0d0fbd50", "\n"):
        assert wrapping not in why


def test_the_reason_keeps_every_error_and_drops_warnings() -> None:
    log = ("clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\nBuild on <pyopencl.Device 'gpu0'>:\n\n"
           "<source>:1:5: warning: unused variable 'v'\n<source>:2:9: error: use of undeclared identifier 'q'\n"
           "<source>:3:1: error: expected ';'\n\n(options: -w)")
    assert build_failure_reason(log) == ("<source>:2:9: error: use of undeclared identifier 'q'; "
                                         "<source>:3:1: error: expected ';'")
    # no diagnostic: what the driver said; no log at all: pyopencl's own line
    assert build_failure_reason("Build on <dev>:\n\nDevice d failed to build the program\n") == \
        "Device d failed to build the program"
    assert build_failure_reason("clBuildProgram failed: BUILD_PROGRAM_FAILURE\n") == \
        "clBuildProgram failed: BUILD_PROGRAM_FAILURE"


def test_a_long_log_is_cut_to_one_readable_line() -> None:
    log = "Build on <d>:\n" + "\n".join(f"<source>:{i}:1: error: bad thing number {i}" for i in range(100))
    why = build_failure_reason(log)
    assert len(why) == 400 and why.endswith("...") and why.startswith("<source>:0:1: error: bad thing number 0; ")


def test_the_probe_reports_a_real_failed_build() -> None:
    """A kernel the compiler rejects gives a reason with its error, whatever device is here; the probe kernel's
    verdict is the device's availability."""
    dev = _device()
    why = probe_build(dev, BROKEN)
    assert why is not None and "error" in why and "clBuildProgram" not in why
    backend = get_backend("opencl")
    good = probe_build(dev, PROBE_SOURCE)
    assert backend.available == (good is None), (backend.reason, good)
    if good is not None:  # a device whose compiler builds nothing (pocl 3.0 on a CPU newer than LLVM 14)
        assert good in backend.reason and "cannot build a trivial kernel" in backend.reason


_CHILD = """
import io, sys
import uopir.backends.opencl.runtime as rt
rt.PROBE_SOURCE = sys.argv[1]  # the device's first probe builds a kernel the compiler rejects
from uopir.backends.registry import available, get_backend
from uopir.backends.opencl.backend import FALLBACK_TARGET, opencl_target
from uopir.tools.uop_run import main
b = get_backend("opencl")
err = io.StringIO()
rc = main([sys.argv[2], "--backend=opencl"], io.StringIO(), err)
print(b.available, "opencl" in available(), opencl_target() is FALLBACK_TARGET, rc)
print(b.reason)
print(err.getvalue().strip())
"""


def test_a_device_that_cannot_build_is_unavailable_with_the_compilers_reason(tmp_path: Path) -> None:
    """In a fresh process whose probe kernel does not compile: the device is unavailable, not listed, its target is
    the fallback, and uop-run --backend=opencl exits 1 with the compiler's error, not a traceback."""
    _device()
    prog = tmp_path / "relu.uop"
    prog.write_text(RELU)
    out = subprocess.run([sys.executable, "-c", _CHILD, BROKEN, str(prog)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    verdict, reason, message = out.stdout.splitlines()[-3:]
    assert verdict == "False False True 1"
    assert "cannot build a trivial kernel: " in reason and "error" in reason.split("cannot build a trivial kernel")[1]
    assert message == f"uop-run: error: --backend=opencl: {reason}"
    assert "Traceback" not in out.stderr


def test_uop_run_names_the_reason_when_opencl_is_unavailable(tmp_path: Path) -> None:
    backend = get_backend("opencl")
    if backend.available:
        pytest.skip("the opencl device builds kernels here")
    prog = tmp_path / "relu.uop"
    prog.write_text(RELU)
    err = io.StringIO()
    assert uop_run([str(prog), "--backend=opencl"], io.StringIO(), err) == 1
    assert err.getvalue() == f"uop-run: error: --backend=opencl: {backend.reason}\n"
