"""What the gpu backends (OpenCL, CUDA) share: the C-style renderer parameterized by a language description
(renderer.py), launch-size evaluation (launch.py) and the emit-opencl / emit-cuda passes (emit.py)."""
