"""Shared pytest setup: tests marked `gpu` are skipped cleanly on machines without a usable GPU; property tests are
derandomized under CI (a fixed example sequence, so a submission's result never depends on luck) and explore new
random examples on a developer's machine."""
from __future__ import annotations

import os

# the frontend suite runs on the reference device unless UOPIR_DEVICE asks otherwise; `make test` (tools/run_tests.py)
# runs it a second time with UOPIR_DEVICE=c
os.environ.setdefault("UOPIR_DEVICE", "python")
# the c device's tiered compile (a kernel runs compiled in process by LLVM until its C binary is built) is off in the
# tests: the c leg and every test of the C backend check the C compiler's binaries; unit_tests/test_c_tiered.py turns
# it on and checks that both tiers give the same bits
os.environ.setdefault("UOPIR_C_TIERED", "0")

import shutil
import subprocess

import pytest
from hypothesis import settings

# tinygrad's names (DEBUG, NOOPT, VIZ, BEAM) are aliases of UOPIR_ variables (uopir/ir/env.py): one left set in a
# developer's shell would change what the tests see, so the suite drops them (set the UOPIR_ name to debug a test)
for _alias in ("DEBUG", "NOOPT", "VIZ", "BEAM"):
    os.environ.pop(_alias, None)

# The test-* passes (uopir.passes.testing) load only on request; the tests use them.
os.environ.setdefault("UOPIR_TEST_PASSES", "1")

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def training():
    """Tensor.training on for the test (dropout, BatchNorm's batch statistics), restored after."""
    from uopir import Tensor
    with Tensor.train():
        yield


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# The longest files (tens of seconds each) are collected first: pytest-xdist (tools/run_tests.py, --dist loadfile)
# hands out whole files in collection order, and one of these started last would leave a single worker running it
# alone on an otherwise idle machine. Only the order changes; each file's tests keep theirs.
LONG_FILES = ("test_onnx_cnn_models.py", "test_search_ray.py", "test_search.py", "test_memory_bounds.py",
              "test_onnx_conformance.py", "test_fuzz_text.py", "test_fuzz_slice.py", "test_mlir_export.py",
              "test_compile_cache.py", "test_tensor_reduce.py", "test_tensor_nn_ops.py", "test_tensor_movement.py",
              "test_tensor_nn.py", "test_realize_schedule.py", "test_tensor_selection.py")


def _long_first(item: pytest.Item) -> int:
    name = item.path.name
    return LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_long_first)  # stable: the rest keep their order
    for it in items:  # `make fuzz` selects the property tests (-m property) to run them with their full counts
        if getattr(getattr(it, "obj", None), "is_hypothesis_test", False):
            it.add_marker(pytest.mark.property)
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]  # a marker, not a keyword: a
    # keyword also matches a folder named gpu
    if gpu_items and not _has_gpu():
        skip = pytest.mark.skip(reason="no GPU available")
        for it in gpu_items:
            it.add_marker(skip)
