"""The LLVM GPU kernel templates that ``cuda`` and ``rocm`` share (IREE's LLVMGPU): an LLVM IR text
writer, scalar lowering, elementwise, reduction, SIMT matmul and matrix-vector templates, written
against the target interface of ``llvm_text.Module.target``, and llvmlite's target machines."""
