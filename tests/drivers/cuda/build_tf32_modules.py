"""Compiles tf32_cases.py's programs in each ``--pyree-cuda-f32-matmul`` mode on this CPU-only
machine into a folder the GPU host reads (test_cuda_tf32_on_gpu.py with PYREE_CUDA_MODULE_DIR):
``python3 tests/drivers/cuda/build_tf32_modules.py OUT_DIR [sm_XX]`` (default sm_90a, the
H100/H200's: TF32 products whose operands both run along k take wgmma there, the rest
mma.sync)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from tf32_cases import CASES, MODES, flags, module_name  # noqa: E402


def main(out: Path, target: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    options = CompileOptions(target_backends=["cuda"], cuda_target=target)
    for name, case in CASES.items():
        for mode in MODES:
            vmfb = compile_str(case.mlir, options, extra_args=flags(mode))
            (out / f"{module_name(name, mode)}.vmfb").write_bytes(vmfb)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "sm_90a")
