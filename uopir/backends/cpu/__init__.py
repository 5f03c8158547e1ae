"""What the host-cpu backends (C and LLVM) share: the walk over a linearized device.program and the ctypes runtime.

    program.py    the program walk: execution order, values that escape their block, the kernel signature, the ops
                  a cpu cannot run
    runtime.py    HostKernel (argument checks, aliasing, the split of a global id across cores), HostRuntime,
                  PooledHostAllocator, the thread count
"""
