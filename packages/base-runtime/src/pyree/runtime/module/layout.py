"""The module schema's table layouts, as the bounds walker needs them (field slot -> kind).

Mirrors schemas/*.fbs field by field, in declaration order; tests/runtime/test_module_layout.py
parses the schema text and fails when the two drift apart.
Kinds: a scalar or struct is its byte size (int); "string"; ("vector", element byte size);
("strings",) a vector of strings; ("table", name); ("tables", name) a vector of tables.
"""

from __future__ import annotations

DATA_REF = 16  # struct DataRef { offset: ulong; length: ulong; }

TABLES: dict[str, list] = {
    "Module": [2, 2, "string", "string", ("tables", "Function"), ("tables", "Constant"),
               ("tables", "Executable"), ("tables", "KernelInfo")],
    "KernelInfo": ["string", ("strings",)],
    "Function": ["string", ("tables", "TensorType"), ("tables", "TensorType"), ("vector", 8), 8,
                 ("tables", "Command"), "string", 8, ("tables", "Symbol"), ("tables", "SizeExpr"),
                 ("table", "SizeExpr"), ("tables", "SizeCheck")],
    "SizeCheck": [("table", "SizeExpr"), "string", "string"],
    "TensorType": [1, ("vector", 8), ("tables", "SizeExpr")],
    "Symbol": ["string", 8, 8, 8],
    "SizeExpr": [("vector", 8)],
    "Constant": [("table", "TensorType"), DATA_REF, ("table", "Parameter"), 1],
    "Parameter": ["string", "string"],
    "BufferRef": [1, 4, 8, 8, ("table", "SizeExpr"), ("table", "SizeExpr")],
    "Dispatch": [4, ("tables", "BufferRef"), ("vector", 4), ("tables", "SizeExpr")],
    "Copy": [("table", "BufferRef"), ("table", "BufferRef")],
    "Fill": [("table", "BufferRef"), 8, 1],
    "Check": [1, ("table", "BufferRef"), ("table", "TensorType"), ("table", "BufferRef"),
              ("table", "TensorType"), 4, 4, "string", "string"],
    "Branch": [("table", "BufferRef"), 1, 1, 4],
    "Command": [1, ("table", "Dispatch"), ("table", "Copy"), ("table", "Fill"), ("table", "Check"),
                ("table", "Branch")],
    "BindingLayout": [1, 8, ("table", "SizeExpr")],
    "CpuExport": ["string", ("tables", "BindingLayout"), 8, ("table", "SizeExpr")],
    "CpuExecutable": ["string", "string", ("strings",), DATA_REF, ("tables", "CpuExport"),
                      ("tables", "CpuExecutable")],
    "GpuExport": ["string", ("vector", 4), ("vector", 4), 4, ("tables", "BindingLayout"),
                  ("tables", "SizeExpr")],
    "CudaExecutable": ["string", DATA_REF, "string", DATA_REF, ("tables", "GpuExport")],
    "RocmExecutable": ["string", DATA_REF, ("tables", "GpuExport")],
    "SpirvExecutable": ["string", DATA_REF, ("tables", "GpuExport")],
    "Executable": ["string", 1, ("table", "CpuExecutable"), ("table", "CudaExecutable"),
                   ("table", "RocmExecutable"), ("table", "SpirvExecutable")],
}
ROOT = "Module"
