"""Unsigned integer arguments and results kept unsigned at the function boundary.

torch-mlir's linalg-on-tensors output is signless: a PyTorch ``uint8`` tensor or an ONNX
``UINT8`` value becomes ``tensor<...xi8>``, so the module's signature says i8 and the runtime
hands back int8 arrays: 255 read back as -1, a wrong answer for anyone who reads the numbers.
Each importer knows which of its function's arguments and results were unsigned; ``restore``
gives those their unsigned type in the signature (``ui8``: what IREE's reflection calls a
uint8 array) and reinterprets them at the boundary (``flow.tensor.bitcast``, the same bits), so
the body stays as torch-mlir wrote it.
"""

from __future__ import annotations

import re

from pyree.compiler.errors import CompileError

UNSIGNED = ("ui8", "ui16", "ui32", "ui64")

_TENSOR = r"tensor<[^<>]*>"


def restore(text: str, function_name: str, arguments: list[str | None],
            results: list[str | None]) -> str:
    """``text`` with function ``function_name``'s arguments and results whose entry in
    ``arguments`` / ``results`` is an unsigned type (``UNSIGNED``; None: as it is) taking that
    type at the boundary."""
    if not any(arguments) and not any(results):
        return text
    head = re.search(rf"func\.func @{re.escape(function_name)}\((.*?)\)( -> (\(.*?\)|{_TENSOR}))?"
                     r"([^\n]*)\{\n", text)
    if head is None:
        raise CompileError(f"internal error: no function @{function_name} in the imported module")
    params = re.findall(rf"(%[\w.]+): ({_TENSOR})", head.group(1))
    result_types = re.findall(_TENSOR, head.group(3) or "")
    if len(params) != len(arguments) or len(result_types) != len(results):
        raise CompileError(f"internal error: @{function_name} has {len(params)} arguments and "
                           f"{len(result_types)} results, the importer named {len(arguments)} "
                           f"and {len(results)}")
    lines, args = [], head.group(1)
    for i, ((name, type_), unsigned) in enumerate(zip(params, arguments)):
        if unsigned is not None:
            outer = f"%pyree_unsigned_arg{i}"
            lines += _bitcast(outer, _as(type_, unsigned), name, type_, f"{outer}_")
            args = re.sub(rf"{re.escape(name)}: {re.escape(type_)}(?=[,\s{{]|$)",
                          f"{outer}: {_as(type_, unsigned)}", args, count=1)
    new_results = [_as(t, u) if u else t for t, u in zip(result_types, results)]
    arrow = "" if not result_types else " -> " + (
        new_results[0] if head.group(3).startswith("tensor") else f"({', '.join(new_results)})")
    header = f"func.func @{function_name}({args}){arrow}{head.group(4)}{{\n"
    body_start, body_end = head.end(), _body_end(text, head.end())
    body = text[body_start:body_end]
    if any(results):
        body = _returns(body, results)
    indent = re.match(r"\s*", body).group(0) or "    "
    return (text[:head.start()] + header + "".join(indent + line + "\n" for line in lines) + body
            + text[body_end:])


def _as(type_: str, unsigned: str) -> str:
    """``tensor<2x?xi8>`` as ``tensor<2x?xui8>``."""
    return re.sub(r"(?<=[<x])i(\d+)>$", unsigned + ">", type_)


def _dims(type_: str) -> list[int]:
    return [d for d, extent in enumerate(type_[len("tensor<"):-1].split("x")[:-1]) if extent == "?"]


def _bitcast(source: str, source_type: str, result: str, result_type: str, prefix: str) -> list[str]:
    """MLIR lines defining ``result`` as ``source``'s bits in ``result_type``."""
    lines, sizes = [], []
    for d in _dims(source_type):
        lines += [f"{prefix}c{d} = arith.constant {d} : index",
                  f"{prefix}d{d} = tensor.dim {source}, {prefix}c{d} : {source_type}"]
        sizes.append(f"{prefix}d{d}")
    dims = "{" + ", ".join(sizes) + "}" if sizes else ""
    return lines + [f"{result} = flow.tensor.bitcast {source} : {source_type}{dims} -> "
                    f"{result_type}{dims}"]


def _body_end(text: str, start: int) -> int:
    """Where the function body that starts at ``start`` closes (its closing brace's line)."""
    depth = 1
    for match in re.finditer(r"[{}]|\"(?:[^\"\\]|\\.)*\"", text[start:]):
        token = match.group(0)
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return start + text[start:start + match.start()].rfind("\n") + 1
    raise CompileError("internal error: the imported function's body does not close")


def _returns(body: str, results: list[str | None]) -> str:
    """``body`` with each ``return`` giving the unsigned results as their unsigned type."""
    def rewrite(match) -> str:
        indent, values, types = match.group(1), match.group(2), match.group(3)
        values = [v.strip() for v in values.split(",")]
        types = re.findall(_TENSOR, types)
        lines = []
        for j, unsigned in enumerate(results):
            if unsigned is None:
                continue
            name = f"%pyree_unsigned_result{j}"
            lines += _bitcast(values[j], types[j], name, _as(types[j], unsigned),
                              f"%pyree_unsigned_result{j}_")
            values[j], types[j] = name, _as(types[j], unsigned)
        return "".join(indent + line + "\n" for line in lines) + \
            f"{indent}return {', '.join(values)} : {', '.join(types)}\n"
    return re.sub(r"^(\s*)return (%[^:\n]*) : ([^\n]*)\n", rewrite, body, flags=re.M)
