"""Where a device's math departs from float64: for each op, the worst inputs and what came back.
A diagnostic for tests/drivers/vulkan/test_vulkan_math.py's failures on a driver that is not
lavapipe.

    python3 tests/drivers/vulkan/math_report.py [--device vulkan] [--target hopper-h100-linux] \
        [--dtype f32]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from test_math_ops import (  # noqa: E402
    BINARY,
    UNARY,
    binary_inputs,
    compiled,
    inputs,
    np_dtype,
    reference,
    special_mask,
    ulp_errors,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="vulkan")
    p.add_argument("--target", default="hopper-h100-linux")
    p.add_argument("--dtype", default="f32")
    p.add_argument("--worst", type=int, default=4)
    args = p.parse_args()
    import pyree.runtime as rt
    backend = "llvm-cpu" if args.device.startswith("local") else "vulkan-spirv"
    options = {"vulkan_target": args.target} if backend == "vulkan-spirv" else {}
    module = rt.load_module(compiled(backend, list(UNARY), list(BINARY), args.dtype, **options),
                            device=args.device)
    dt = np_dtype(args.dtype)
    bx, by = binary_inputs(dt)
    for k, op in enumerate([*UNARY, *BINARY]):
        args_ = (inputs(op, dt),) if op in UNARY else (bx, by)
        got = np.asarray(module["f"](args_[0], by)[k].to_host())
        errors = ulp_errors(got, reference(op, *args_), special_mask(*args_))
        if not errors.max():
            continue
        worst = np.argsort(-errors, kind="stable")[:args.worst]
        cells = "; ".join(f"{op}({', '.join(repr(float(a[i])) for a in args_)}) = "
                          f"{float(got[i])!r}, want {float(reference(op, *args_)[i])!r}"
                          for i in worst)
        print(f"{op}: max {errors.max():.0f} ulp: {cells}")


if __name__ == "__main__":
    main()
