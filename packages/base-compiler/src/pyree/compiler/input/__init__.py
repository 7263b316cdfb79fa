"""The MLIR front end: MLIR text (func/arith/math/tensor/linalg, IREE's check and util ops)
-> xDSL module -> tensor program (``pyree.compiler.tensor_program``).

``parse_mlir`` parses and verifies, recording each op's ``file:line:col``;
``lower_to_tensor_program`` normalizes the ops into Generic/Constant/View/Check;
``import_mlir`` does both. Bad input raises ``CompileError`` naming the problem and where.
"""

from __future__ import annotations

from pyree.compiler.input.lowering import lower_to_tensor_program
from pyree.compiler.input.parser import parse_mlir
from pyree.compiler.tensor_program import Program
from xdsl.dialects.builtin import ModuleOp


def parse(text: str, source_name: str = "<string>") -> tuple[ModuleOp, Program]:
    module = parse_mlir(text, source_name)
    return module, lower_to_tensor_program(module)


def import_mlir(text: str, source_name: str = "<string>") -> Program:
    return parse(text, source_name)[1]


__all__ = ["import_mlir", "lower_to_tensor_program", "parse", "parse_mlir"]
