"""Passes on the kernel dialect (one kernel, loops explicit), and the `kernel(...)` anchor that runs a nested
pipeline on every kernel body."""
