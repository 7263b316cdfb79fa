"""Compiles the HIP-on-CUDA programs (rocm_on_cuda_cases.py) for cuda on this CPU-only machine
and relabels them as rocm modules (relabel.py) into a folder the GPU host reads:

    python3 tests/drivers/rocm/hip_on_cuda/build_modules.py .gpubuild/rocm_on_cuda [sm_90]

writes NAME.vmfb per rocm_on_cuda_cases.CASES entry, numerics_NAME.vmfb per entry of
tests/numerics_cases.py that the rocm run takes, fills.vmfb, control_flow.vmfb, damaged.vmfb
(add with a PTX ptxas refuses), and mlp.vmfb (constants) with mlp_expected.npz, its output on
the local-task CPU driver here for a fixed input.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rocm_on_cuda_cases as cases  # noqa: E402
from control_flow_cases import MLIR as CONTROL_FLOW  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from relabel import relabel  # noqa: E402


def main(out: Path, target: str = "sm_90") -> None:
    out.mkdir(parents=True, exist_ok=True)
    cuda = CompileOptions(target_backends=["cuda"], cuda_target=target)
    sources = {name: mlir for name, (mlir, *_rest) in cases.CASES.items()}
    sources |= {"fills": cases.fills_mlir(), "control_flow": CONTROL_FLOW}
    import numerics_cases
    sources |= {numerics_cases.FILE_PREFIX + name: make().mlir for name, make in numerics_cases.CASES.items()
                if name not in cases.NUMERICS_LEFT_OUT}
    for name, mlir in sources.items():
        (out / f"{name}.vmfb").write_bytes(relabel(compile_str(mlir, cuda)))
    add = compile_str(cases.CASES["add_37x53"][0], cuda)
    (out / "damaged.vmfb").write_bytes(relabel(add, edit_code=cases.damage))
    import pyree.runtime as rt
    mlp = (Path(__file__).resolve().parents[3] / "data" / "mlp.mlir").read_text()
    (out / "mlp.vmfb").write_bytes(relabel(compile_str(mlp, cuda)))
    cpu = rt.load_module(compile_str(mlp, CompileOptions(target_backends=["llvm-cpu"])),
                         device="local-task")
    x = np.random.default_rng(7).standard_normal((37, 53)).astype(np.float32)
    np.savez(out / "mlp_expected.npz", x=x, y=np.asarray(cpu[cpu.function_names[0]](x)))


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:3])
