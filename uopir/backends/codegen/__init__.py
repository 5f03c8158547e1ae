"""What every emitter of device code shares: the program walk and its tables (walk.py), the C-style renderer of C,
OpenCL C and CUDA C (cstyle.py, with its lane expressions clanes.py and helpers cprelude.py), how a
user-controlled name reaches generated source (names.py), and the one emit-<lang> pass factory (emit.py)."""
