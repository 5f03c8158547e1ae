"""The device fingerprint a tuning result is valid for (a minimal stand-in: the cache worktree owns this module).

Timings are comparable, and a tuned opt set reusable, only between devices with the same fingerprint.
"""
from __future__ import annotations

import hashlib
import platform

__all__ = ["device_fingerprint"]


def _cpu() -> str:
    model, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() == "model name" and not model.strip():
                    model = val.strip()
                elif key.strip() == "model name":
                    model = val.strip()
                elif key.strip() == "flags":
                    flags = val.strip()
                if model and flags:
                    break
    except OSError:
        pass
    return f"cpu:{model}|{hashlib.sha256(flags.encode()).hexdigest()[:12]}"


def device_fingerprint(device: str) -> str:
    """"cpu:<model>|<flags digest>" for a host device; the device name alone for the others (no probe yet)."""
    return _cpu() if device in ("c", "llvm", "python", "mlir") else f"{device}:unknown"
