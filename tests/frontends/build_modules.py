"""Builds tests/frontends' programs and tests/e2e/ops' check files for the GPU host on this
CPU-only machine, where JAX and torch-mlir are installed:
``python3 tests/frontends/build_modules.py OUT_DIR [sm_XX]`` writes ``<name>.<target>.vmfb`` and
``<name>.npz`` (inputs, the framework's outputs, tolerances) per program and
``ops_<file>.<target>.vmfb`` per check file, for cuda and vulkan-spirv; run tests/frontends there
with PYREE_FRONTEND_MODULE_DIR=OUT_DIR."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from programs import all_programs  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402

OPS = Path(__file__).resolve().parents[1] / "e2e" / "ops"


def main(out: Path, cuda_target: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    backends = [CompileOptions(target_backends=[b], cuda_target=cuda_target)
                for b in ("cuda", "vulkan-spirv")]
    for path in sorted(OPS.glob("*.mlir")):
        for options in backends:
            (out / f"ops_{path.stem}.{options.target_backends[0]}.vmfb").write_bytes(
                compile_str(path.read_text(), options, str(path)))
    for program in all_programs():
        for options in backends:
            (out / f"{program.name}.{options.target_backends[0]}.vmfb").write_bytes(
                compile_str(program.mlir, options, program.name))
        arrays = {f"in{i}": x for i, x in enumerate(program.inputs)}
        arrays.update({f"out{i}": y for i, y in enumerate(program.expected)})
        np.savez(out / f"{program.name}.npz", count=len(program.inputs),
                 outputs=len(program.expected), rtol=program.rtol, atol=program.atol, **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "sm_90")
