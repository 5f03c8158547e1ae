"""The MLIR backend and interop (issue 14).

    backend.py    MLIRBackend: export -> mlir-opt -> mlir-translate -> llvmlite, behind the backend interface
    compiler.py   MLIRCompiler: the tool pipeline, batched (one pair of tool processes per batch), disk cache
    runtime.py    MLIRRuntime: the llvm backend's MCJIT and ctypes call
    tools.py      find_mlir_tool: where mlir-opt and mlir-translate are
"""
