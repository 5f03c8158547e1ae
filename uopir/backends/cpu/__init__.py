"""What the host-cpu backends (C, LLVM, MLIR) share: the walk over a linearized device.program and the ctypes runtime.

    program.py    the program walk: execution order, values that escape their block, the kernel signature, the ops
                  a cpu cannot run, the checks of the program's structure (blocks, ids) every renderer makes
    alu.py        the ALU choices of the LLVM renderer and the MLIR export (comparison predicates, bool ops, when a
                  division needs no guard)
    runtime.py    HostKernel (argument checks, aliasing, the split of a global id across cores), HostRuntime,
                  PooledHostAllocator, the thread count
"""
