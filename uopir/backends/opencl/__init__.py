"""The OpenCL backend: device programs rendered to OpenCL C, built and run with pyopencl (any OpenCL device; pocl's
CPU device where there is no GPU). See backend.py."""
