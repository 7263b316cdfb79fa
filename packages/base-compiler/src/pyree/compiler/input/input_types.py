"""``--iree-input-type``: which input conversion runs before the text is parsed.

    auto        detect from the op names: tosa.* -> tosa; stablehlo.*/chlo.*/mhlo.* -> stablehlo
                (MHLO is read as the StableHLO it became)
    none        MLIR in the dialects pyree reads (func/arith/math/tensor/linalg/...)
    stablehlo   read directly by pyree's parser
    tosa        lowered to linalg in-process by MLIR's TOSA passes (input/tosa.py)

    stablehlo_xla  StableHLO as XLA writes it: read as stablehlo (an exported function's tuple
                arguments and results are flattened into their elements, as IREE does)

IREE's other spellings are refused by name: the framework types (``torch``, ``tm_tensor``,
``onnx``), whose programs come in through pyree's importers instead, as they do in IREE.
"""

from __future__ import annotations

import re

from pyree.compiler.errors import CompileError

INPUT_TYPES = ("auto", "none", "stablehlo", "tosa", "stablehlo_xla")

_REFUSED = {
    "torch": "import PyTorch programs with pyree.compiler.import_torch or compile_torch "
             "(pyree-base-compiler[torch]), which write linalg",
    "tm_tensor": "import PyTorch programs with pyree.compiler.import_torch or compile_torch "
                 "(pyree-base-compiler[torch]), which write linalg",
    "onnx": "import ONNX models with pyree-import-onnx or pyree.compiler.import_onnx "
            "(pyree-base-compiler[onnx]), which write linalg",
}

# The dialect of an op at the start of a line, in custom (`%0 = tosa.add`) or generic
# (`"tosa.const"()`) form; resource blobs and attribute values do not start a line this way.
_OP_DIALECT = re.compile(r'^[ \t]*(?:%[^=\n]*=[ \t]*)?"?(tosa|stablehlo|chlo|mhlo)\.', re.M)


def detect(text: str) -> str:
    """The input type ``auto`` picks for ``text``."""
    if "tosa." not in text and "hlo." not in text:  # 2 fast scans of 94 MB of weights: 0.14 s
        return "none"
    found = {m.group(1) for m in _OP_DIALECT.finditer(text)}
    if "tosa" in found:
        return "tosa"
    return "stablehlo" if found else "none"


def convert_input(text: str, source_name: str, input_type: str) -> tuple[str, str]:
    """(text pyree's parser reads, the input type used) for ``--iree-input-type=input_type``."""
    if input_type in _REFUSED:
        raise CompileError(f"--iree-input-type={input_type} is not supported: "
                           f"{_REFUSED[input_type]}")
    if input_type not in INPUT_TYPES:
        raise CompileError(f"unknown input type '{input_type}'; known input types: "
                           + ", ".join(INPUT_TYPES))
    if input_type == "auto":
        input_type = detect(text)
    elif input_type == "stablehlo_xla":
        input_type = "stablehlo"
    if input_type == "tosa":
        from pyree.compiler.input.tosa import tosa_to_linalg

        text = tosa_to_linalg(text, source_name)
    elif input_type == "stablehlo" and "mhlo." in text:
        text = mhlo_as_stablehlo(text)
    return text, input_type


# An MHLO op or attribute prefix: `%0 = mhlo.add`, `"mhlo.constant"(...)`, `#mhlo<...>`; not
# `mhlo.num_partitions = 1` or `{mhlo.layout_mode = ...}`, which are attribute names.
_MHLO = re.compile(r'(^[ \t]*(?:%[^=\n]*=[ \t]*)?"?)mhlo\.|#mhlo([.<])', re.M)


def mhlo_as_stablehlo(text: str) -> str:
    """MHLO (IREE's older docs, e.g. the CUDA backend's first example, ``mhlo.add``) read as the
    StableHLO it became: the ops and attributes pyree reads share names and syntax. An op's own
    line:col stays exact; later columns on its line move by 5."""
    return _MHLO.sub(lambda m: f"{m.group(1)}stablehlo." if m.group(1) is not None
                     else f"#stablehlo{m.group(2)}", text)
