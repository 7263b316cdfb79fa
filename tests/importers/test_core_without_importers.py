"""The importers are optional extras: the core compiler never loads torch, torch-mlir or onnx."""

import subprocess
import sys
from pathlib import Path

ADD = Path(__file__).resolve().parents[1] / "data" / "add.mlir"


def test_compiling_mlir_loads_no_framework():
    code = (
        "import sys\n"
        "import pyree.compiler as c\n"
        f"c.compile_str(open({str(ADD)!r}).read(), c.CompileOptions(target_backends=['llvm-cpu']))\n"
        "from pyree.compiler.tools import compile, import_onnx\n"
        "loaded = sorted(m for m in ('torch', 'torch_mlir', 'onnx', 'onnxruntime') if m in sys.modules)\n"
        "print(loaded)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
