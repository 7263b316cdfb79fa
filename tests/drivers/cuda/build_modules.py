"""Compiles every CUDA test case (cases.py, the numerics table every device runs of
tests/numerics_cases.py, the math ops, the control-flow cases, the MLP of tests/data and the
traced chain of trace_cases.py) on this CPU-only machine into a folder the GPU host reads:
``python3 tests/drivers/cuda/build_modules.py OUT_DIR [sm_XX]``. Build twice for a Hopper host,
``sm_90`` (mma.sync) and ``sm_90a`` (wgmma), and run the GPU tests on each.

The MLP's expected output comes from the local-task CPU driver here, for fixed inputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
from codegen.cuda.cases import CASES, MATH_CASES  # noqa: E402
from control_flow_cases import MLIR as CONTROL_FLOW  # noqa: E402
from e2e.test_reduction_accuracy import MLIR as REDUCTION_ACCURACY  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"


def main(out: Path, target: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cuda = CompileOptions(target_backends=["cuda"], cuda_target=target)
    for name, (mlir, *_rest) in CASES.items():
        (out / f"{name}.vmfb").write_bytes(compile_str(mlir, cuda))
    import numerics_cases
    for name, make in numerics_cases.CASES.items():
        (out / f"{numerics_cases.FILE_PREFIX}{name}.vmfb").write_bytes(compile_str(make().mlir, cuda))
    from test_math_ops import compiled
    for name, (dtype, unary, binary) in MATH_CASES.items():
        (out / f"{name}.vmfb").write_bytes(compiled("cuda", unary, binary, dtype, cuda_target=target))
    (out / "control_flow.vmfb").write_bytes(compile_str(CONTROL_FLOW, cuda))
    from runtime.hostile_runs import compile_bases  # the module fuzz test's bases
    for name, data in compile_bases(cuda).items():
        (out / f"hostile_{name}.vmfb").write_bytes(data)
    (out / "reduction_accuracy.vmfb").write_bytes(compile_str(REDUCTION_ACCURACY, cuda))
    from trace_cases import CHAIN
    (out / "trace_chain.vmfb").write_bytes(compile_str(CHAIN, cuda, "trace_chain.mlir"))
    mlp = (DATA / "mlp.mlir").read_text()
    (out / "mlp.vmfb").write_bytes(compile_str(mlp, cuda))
    import pyree.runtime as rt
    cpu = rt.load_module(compile_str(mlp, CompileOptions(target_backends=["llvm-cpu"])),
                         device="local-task")
    x = np.random.default_rng(7).standard_normal((37, 53)).astype(np.float32)
    np.savez(out / "mlp_expected.npz", x=x, y=np.asarray(cpu[cpu.function_names[0]](x)))
    # the benchmark shapes
    from codegen.cuda.cases import add, matmul
    (out / "bench_add_4.vmfb").write_bytes(compile_str(add(1, 4), cuda))
    (out / "bench_add_64m.vmfb").write_bytes(compile_str(add(8192, 8192), cuda))
    for dtype in ("f32", "f16"):
        (out / f"bench_matmul_{dtype}.vmfb").write_bytes(
            compile_str(matmul(4096, 4096, 4096, dtype), cuda))
    build_concurrency(out, target)
    from gather_cases import CASES as GATHERS
    for name, case in GATHERS.items():
        (out / f"gather_{name}.vmfb").write_bytes(compile_str(case.program, cuda))
    from sort_cases import CASES as SORTS
    from sort_cases import LONG_CASES, file_name
    for name, case in {**SORTS, **LONG_CASES}.items():
        (out / file_name(name)).write_bytes(compile_str(case.program, cuda))


def build_concurrency(out: Path, target: str) -> None:
    """test_cuda_concurrency.py's modules, for cuda and vulkan-spirv in one file: the programs of
    tests/concurrency_cases.py, and real models with their weights exported (a recipe of each
    weight file travels instead: random_parameters.py)."""
    import json

    from concurrency_cases import PROGRAMS
    from random_parameters import describe
    options = CompileOptions(target_backends=["cuda", "vulkan-spirv"], cuda_target=target,
                             vulkan_target="hopper-h100-linux")
    for name, program in PROGRAMS.items():
        (out / f"concurrency_{name}.vmfb").write_bytes(compile_str(program.mlir, options))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))
    import definitions
    from pyree.compiler import import_torch
    for name in STRESS_MODELS:
        factory, _shape, _dtype, function = definitions.MODELS[name]
        mlir = import_torch(factory(), definitions.example_input(name), function_name=function)
        weights = out / f"model_{name}.safetensors"
        export = CompileOptions(target_backends=["cuda", "vulkan-spirv"], cuda_target=target,
                                vulkan_target="hopper-h100-linux", export_parameters=str(weights))
        (out / f"model_{name}.vmfb").write_bytes(compile_str(mlir, export))
        (out / f"model_{name}.recipe.json").write_text(json.dumps(describe(weights)))
        weights.unlink()


STRESS_MODELS = ("resnet18", "mobilenet_v2", "gpt2_block")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "sm_90")
