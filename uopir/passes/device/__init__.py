"""Device-level passes: device-decompose, device-devectorize, device-linearize (one module each), and what the
kernel → device passes share (common.py). Importing a module registers its pass."""
