"""The programs the rocm driver runs on the HIP-on-CUDA shim, with numpy references: elementwise,
reductions and odd-shaped matmuls (tests/codegen/cuda/cases.py's generators), >64 MiB transfers, fills of
1, 2, 4 and 8-byte patterns (8 with differing halves), copies, and host control flow
(tests/control_flow_cases.py). Inputs carry NaN, ±inf and -0; results must match numpy's
(float64) IEEE behaviour exactly where it is not finite, and within a tolerance where it is.

Only numpy is imported at module level: the GPU host reads modules built elsewhere
(build_modules.py) and needs no compiler.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
from codegen.cuda.cases import CASES as CUDA_CASES  # noqa: E402
from codegen.cuda.cases import add, matmul  # noqa: E402

# The entries of tests/numerics_cases.py (the numerics table every device runs) that the rocm
# run leaves out: the MLP's reference reads its weights through the compiler, which the GPU host
# lacks (the MLP runs in test_module_constants, against the local-task driver's output instead).
NUMERICS_LEFT_OUT = {"mlp"}

LARGE = (4097, 4099)  # 67.2 MB of f32: past 64 MiB, odd in both dimensions


def _identity(shape: tuple[int, int]) -> str:
    t = f"tensor<{shape[0]}x{shape[1]}xf32>"
    return f"func.func @main(%x: {t}) -> {t} {{\n  return %x : {t}\n}}"


# name: (MLIR, [(shape, dtype) per argument], reference(*float64 args), rtol)
CASES = {
    **{name: CUDA_CASES[name] for name in (
        "add_37x53", "chain_37x53", "row_sum_37x1531", "row_max_41x333",
        "matmul_f32_257x131x67", "matmul_f32_700x900x333", "matmul_f16_37x53x61",
        "matmul_f16_tc_256x384x96")},
    "matmul_f32_37x53x29": (matmul(37, 53, 29, "f32"),
                            [((37, 29), "float32"), ((29, 53), "float32")],
                            lambda a, b: a @ b, 1e-5),
    "add_large": (add(*LARGE), [(LARGE, "float32")] * 2, lambda a, b: a + b, 1e-6),
    "copy_large": (_identity(LARGE), [(LARGE, "float32")], lambda x: x, 0.0),
}

# name: (element type, numpy dtype, element count, the constant's MLIR spelling); every result
# is a splat, which the compiler emits as a fill command of the element's width.
FILLS = {
    "i8": ("i8", np.int8, 1001, "-91"),
    "i16": ("i16", np.int16, 1001, "-12345"),
    "f16": ("f16", np.float16, 999, "-0.0"),
    "i32": ("i32", np.int32, 1001, "-19088744"),
    "i64_halves_differ": ("i64", np.int64, 1001, "81985529216486895"),      # 0x0123456789abcdef
    "i64_halves_equal": ("i64", np.int64, 1003, "21474836485"),            # 0x0000000500000005
    "f64": ("f64", np.float64, 1001, "-1.5e300"),
    "i64_large": ("i64", np.int64, 8388617, "-81985529216486896"),         # 67.1 MB
}
COPIED = (37, 53)  # the fills function also returns its argument: a device-to-device copy


def fills_mlir() -> str:
    results = [f"tensor<{n}x{t}>" for t, _, n, _ in FILLS.values()]
    body = [f"  %r{i} = arith.constant dense<{v}> : {r}"
            for i, ((_, _, _, v), r) in enumerate(zip(FILLS.values(), results))]
    x = f"tensor<{COPIED[0]}x{COPIED[1]}xf32>"
    names = ", ".join([f"%r{i}" for i in range(len(results))] + ["%x"])
    types = ", ".join(results + [x])
    return "\n".join([f"func.func @main(%x: {x}) -> ({types}) {{", *body,
                      f"  return {names} : {types}", "}"])


def fills_expected(x: np.ndarray) -> list[np.ndarray]:
    return [np.full(n, dtype(float(v) if "." in v or "e" in v else int(v)), dtype)
            for _, dtype, n, v in FILLS.values()] + [x]


def with_special_values(args: list[np.ndarray]) -> list[np.ndarray]:
    """NaN, ±inf and -0 at the first flat positions: a + b there meets nan, inf + -inf, -inf,
    -0 + -0; every matmul row 0 and every reduction row 0 turns non-finite."""
    out = [a.copy() for a in args]
    first = out[0].reshape(-1)
    first[:4] = [np.nan, np.inf, -np.inf, -0.0]
    if len(out) > 1:
        second = out[1].reshape(-1)
        second[1], second[3] = -np.inf, -0.0
    return out


def random_args(name: str, rng: np.random.Generator) -> list[np.ndarray]:
    return with_special_values([rng.standard_normal(shape).astype(dtype)
                                for shape, dtype in CASES[name][1]])


def assert_matches(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """NaN where numpy has NaN, the same infinities, the same sign on zeros, and a relative
    (2-norm) error of at most ``rtol`` over the finite rest."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), "NaN positions differ")
    infinite = np.isinf(want)
    np.testing.assert_array_equal(got[infinite], want[infinite], "infinities differ")
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]),
                                  "zero signs differ")
    finite = np.isfinite(want)
    assert np.all(np.isfinite(got[finite])), "a finite result came back non-finite"
    error = np.linalg.norm(got[finite] - want[finite]) / max(np.linalg.norm(want[finite]), 1e-30)
    assert error <= max(rtol, 2e-7), f"relative error {error:.3g} > {rtol}"


def damage(ptx: bytes) -> bytes:
    """The PTX with an instruction ptxas does not know before the first ``ret``."""
    assert b"\tret;" in ptx
    return ptx.replace(b"\tret;", b"\tpyree_damaged_instruction;\n\tret;", 1)
