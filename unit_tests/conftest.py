"""Shared pytest setup: tests marked `gpu` are skipped cleanly on machines without a usable GPU."""
from __future__ import annotations

import shutil
import subprocess

import pytest


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [it for it in items if "gpu" in it.keywords]
    if gpu_items and not _has_gpu():
        skip = pytest.mark.skip(reason="no GPU available")
        for it in gpu_items:
            it.add_marker(skip)
