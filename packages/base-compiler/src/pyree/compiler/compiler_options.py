"""IREE's ``iree.compiler.CompilerOptions`` and ``OutputFormat``, and what each of IREE's compile
keywords does here, so that IREE's pattern ``compile_str(text, **CompilerOptions(...).__dict__)``
runs unchanged.

pyree compiles in-process, straight to a module. The keywords that shape IREE's MLIR printing or
its diagnostics (``optimize``, ``output_mlir_debuginfo``, ...) have nothing to act on and are
accepted as they are; the ones asking for something pyree cannot make (another output format,
TFLite bindings, benchmark functions) are refused by name; an unknown one is a TypeError, as a
misspelt keyword is in IREE.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from pyree.compiler.errors import CompileError
from pyree.compiler.options import InputType

# IREE's iree.compiler.tools constants: the backend its tests compile for, and its driver.
DEFAULT_TESTING_BACKENDS = ["llvm-cpu"]
DEFAULT_TESTING_DRIVER = "local-task"


class OutputFormat(enum.Enum):
    """IREE's output formats. pyree writes its module (FLATBUFFER_BINARY, the default) only."""

    FLATBUFFER_BINARY = "flatbuffer-binary"
    FLATBUFFER_TEXT = "flatbuffer-text"
    MLIR_TEXT = "mlir-text"

    @staticmethod
    def parse(spec: OutputFormat | str) -> OutputFormat:
        """An OutputFormat, or the case-insensitive name of one (``"flatbuffer-binary"``)."""
        if isinstance(spec, OutputFormat):
            return spec
        name = str(getattr(spec, "value", spec)).upper().replace("-", "_")
        if name not in OutputFormat.__members__:
            raise ValueError(f"For output_format= argument, expected one of: "
                             f"{', '.join(OutputFormat.__members__)}")
        return OutputFormat[name]

    def __str__(self) -> str:
        return self.value


def parse_input_type(spec: InputType | enum.Enum | str) -> InputType:
    """IREE's ``InputType.parse``: a member (ours or IREE's enum) or a case-insensitive name."""
    name = str(getattr(spec, "value", spec)).lower().replace("-", "_")
    try:
        return InputType(name)
    except ValueError:
        raise ValueError(f"For input_type= argument, expected one of: "
                         f"{', '.join(InputType.__members__)}") from None


@dataclass
class CompilerOptions:
    """IREE's compile keywords with IREE's defaults; ``**options.__dict__`` is what
    ``compile_str`` / ``compile_file`` take."""

    output_file: str | None = None
    target_backends: Sequence[str] = ()
    input_type: InputType | str = InputType.AUTO
    output_format: OutputFormat | str = OutputFormat.FLATBUFFER_BINARY
    extra_args: Sequence[str] = ()
    optimize: bool = True
    output_mlir_debuginfo: bool = True
    output_generic_mlir: bool = False
    extended_diagnostics: bool = False
    strip_debug_ops: bool = False
    strip_source_map: bool = False
    crash_reproducer_path: str | None = None
    enable_tflite_bindings: bool = False
    enable_benchmark: bool = False

    def __post_init__(self):
        self.input_type = parse_input_type(self.input_type)
        self.output_format = OutputFormat.parse(self.output_format)


_REFUSED = {
    "enable_tflite_bindings": "pyree has no TFLite runtime bindings shim; TFLite models compile "
                              "as TOSA (--iree-input-type=tosa) and run through pyree.runtime",
    "enable_benchmark": "pyree exports no per-dispatch benchmark functions; "
                        "pyree-benchmark-module times a module's functions",
}
_FORMATS = {
    OutputFormat.FLATBUFFER_TEXT: "pyree-dump-module --output=flatbuffer-json prints a compiled "
                                  "module's FlatBuffer as JSON",
    OutputFormat.MLIR_TEXT: "pyree has no VM dialect; extra_args=['--compile-to=flow'] (or "
                            "another phase) returns a stage's IR as text",
}


def check_keywords(keywords: dict[str, object]) -> None:
    """Checks IREE's compile keywords beyond target_backends, input_type, extra_args and
    output_file; raises CompileError for one pyree cannot honour."""
    fields = set(CompilerOptions.__dataclass_fields__)
    for name, value in keywords.items():
        if name not in fields:
            raise TypeError(f"compile_str() got an unexpected keyword argument '{name}'")
        if name in _REFUSED and value:
            raise CompileError(f"{name}=True is not supported: {_REFUSED[name]}")
    if "output_format" in keywords:
        try:
            output_format = OutputFormat.parse(keywords["output_format"])
        except ValueError as e:
            raise CompileError(str(e)) from None
        if output_format in _FORMATS:
            raise CompileError(f"output_format={output_format} is not supported: pyree writes "
                               f"its module only ({_FORMATS[output_format]})")
