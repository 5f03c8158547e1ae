"""The CUDA backend: device programs rendered to CUDA C, compiled to PTX by NVRTC or nvcc, launched with pycuda where
an NVIDIA GPU is present. See backend.py."""
