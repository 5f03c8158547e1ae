"""What the host-cpu backends (C, LLVM, MLIR) share: the ALU choices and the ctypes runtime (the analysis of a program
every renderer makes, its order, escaping values, signature and checks, is uopir.backends.codegen.program).

    alu.py        the ALU choices of the LLVM renderer and the MLIR export (comparison predicates, bool ops, when a
                  division needs no guard)
    runtime.py    HostKernel (argument checks, aliasing, the split of a global id across cores), HostRuntime,
                  PooledHostAllocator, the thread count
"""
