"""The module schema's table layouts, as the bounds walker and the unpack need them: per table,
its fields in slot order as (the object API's attribute name, kind).

Mirrors schemas/*.fbs field by field, in declaration order; tests/runtime/test_module_layout.py
parses the schema text and fails when the two drift apart.
Kinds: a scalar is its little-endian struct format ("<B", "<q"...; an enum its base type's);
DATA_REF the one struct; "string"; ("vector", a scalar's format); ("strings",) a vector of
strings; ("table", name); ("tables", name) a vector of tables.
"""

from __future__ import annotations

import struct

DATA_REF = "<QQ"  # struct DataRef { offset: ulong; length: ulong; }

TABLES: dict[str, list[tuple[str, object]]] = {
    "Module": [("schemaVersionMajor", "<H"), ("schemaVersionMinor", "<H"), ("name", "string"),
               ("producer", "string"), ("functions", ("tables", "Function")),
               ("constants", ("tables", "Constant")), ("executables", ("tables", "Executable")),
               ("kernels", ("tables", "KernelInfo")), ("initializer", ("table", "Function"))],
    "KernelInfo": [("name", "string"), ("sources", ("strings",))],
    "Function": [("name", "string"), ("arguments", ("tables", "TensorType")),
                 ("results", ("tables", "TensorType")), ("resultSizes", ("vector", "<Q")),
                 ("transientSize", "<Q"), ("commands", ("tables", "Command")),
                 ("location", "string"), ("readbackSize", "<Q"),
                 ("symbols", ("tables", "Symbol")), ("resultSizeExprs", ("tables", "SizeExpr")),
                 ("transientSizeExpr", ("table", "SizeExpr")),
                 ("sizeChecks", ("tables", "SizeCheck")), ("tiedResults", ("vector", "<i"))],
    "SizeCheck": [("condition", ("table", "SizeExpr")), ("message", "string"),
                  ("location", "string")],
    "TensorType": [("elementType", "<B"), ("dims", ("vector", "<q")),
                   ("dynamicDims", ("tables", "SizeExpr"))],
    "Symbol": [("name", "string"), ("min", "<q"), ("max", "<q"), ("divisor", "<q")],
    "SizeExpr": [("code", ("vector", "<q"))],
    "Constant": [("type", ("table", "TensorType")), ("data", DATA_REF),
                 ("parameter", ("table", "Parameter")), ("mutable", "<?"),
                 ("computed", "<?")],
    "Parameter": [("scope", "string"), ("key", "string")],
    "BufferRef": [("kind", "<B"), ("index", "<I"), ("offset", "<Q"), ("length", "<Q"),
                  ("offsetExpr", ("table", "SizeExpr")), ("lengthExpr", ("table", "SizeExpr"))],
    "Dispatch": [("kernel", "<I"), ("bindings", ("tables", "BufferRef")),
                 ("pushConstants", ("vector", "<I")),
                 ("pushConstantExprs", ("tables", "SizeExpr"))],
    "Copy": [("source", ("table", "BufferRef")), ("target", ("table", "BufferRef"))],
    "Fill": [("target", ("table", "BufferRef")), ("pattern", "<Q"), ("patternLength", "<B")],
    "Check": [("kind", "<B"), ("lhs", ("table", "BufferRef")),
              ("lhsType", ("table", "TensorType")), ("rhs", ("table", "BufferRef")),
              ("rhsType", ("table", "TensorType")), ("atol", "<f"), ("rtol", "<f"),
              ("location", "string"), ("message", "string")],
    "Branch": [("condition", ("table", "BufferRef")), ("conditionType", "<B"), ("ifZero", "<?"),
               ("target", "<I"), ("conditionSize", ("table", "SizeExpr"))],
    "Command": [("kind", "<B"), ("dispatch", ("table", "Dispatch")), ("copy", ("table", "Copy")),
                ("fill", ("table", "Fill")), ("check", ("table", "Check")),
                ("branch", ("table", "Branch"))],
    "BindingLayout": [("access", "<B"), ("minLength", "<Q"),
                      ("minLengthExpr", ("table", "SizeExpr")), ("alignment", "<B")],
    "CpuExport": [("symbol", "string"), ("bindings", ("tables", "BindingLayout")),
                  ("workgroupCount", "<Q"), ("workgroupCountExpr", ("table", "SizeExpr"))],
    "CpuExecutable": [("format", "string"), ("targetCpu", "string"),
                      ("cpuFeatures", ("strings",)), ("library", DATA_REF),
                      ("exports", ("tables", "CpuExport")),
                      ("variants", ("tables", "CpuExecutable"))],
    "GpuExport": [("name", "string"), ("gridSize", ("vector", "<I")),
                  ("blockSize", ("vector", "<I")), ("sharedMemoryBytes", "<I"),
                  ("bindings", ("tables", "BindingLayout")),
                  ("gridSizeExpr", ("tables", "SizeExpr"))],
    "CudaExecutable": [("targetArch", "string"), ("ptx", DATA_REF), ("cubinArch", "string"),
                       ("cubin", DATA_REF), ("exports", ("tables", "GpuExport"))],
    "RocmExecutable": [("targetArch", "string"), ("codeObject", DATA_REF),
                       ("exports", ("tables", "GpuExport"))],
    "SpirvExecutable": [("target", "string"), ("code", DATA_REF),
                        ("exports", ("tables", "GpuExport"))],
    "Executable": [("name", "string"), ("format", "<B"), ("cpu", ("table", "CpuExecutable")),
                   ("cuda", ("table", "CudaExecutable")), ("rocm", ("table", "RocmExecutable")),
                   ("spirv", ("table", "SpirvExecutable"))],
}
ROOT = "Module"


def inline_size(kind) -> int | None:
    """The bytes a field of ``kind`` takes in its table when it is a scalar or a struct; None
    for the others (a 4-byte offset to the object)."""
    return struct.calcsize(kind) if isinstance(kind, str) and kind.startswith("<") else None
