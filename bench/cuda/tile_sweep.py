"""Tensor-core tile sweep for the f16 4096^3 matmul: which ``matmul_mma.TILES`` entry is fastest.

    python3 bench/cuda/tile_sweep.py build DIR     (CPU machine: one module per tile)
    python3 bench/cuda/tile_sweep.py run DIR       (GPU host: times each, prints TFLOP/s)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

N = 4096
VARIANTS = {  # name: (bm, bn, bk, stages, min_blocks)
    "128x256x64_s3": (128, 256, 64, 3, 1), "128x256x64_s4": (128, 256, 64, 4, 1),
    "128x128x64_s3": (128, 128, 64, 3, 2), "128x128x64_s4": (128, 128, 64, 4, 1),
    "128x256x32_s4": (128, 256, 32, 4, 1), "256x128x64_s3": (256, 128, 64, 3, 1),
}


def build(folder: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cuda"))
    from cases import matmul
    from pyree.compiler import CompileOptions, compile_str
    from pyree.compiler.codegen.cuda import matmul_mma
    folder.mkdir(parents=True, exist_ok=True)
    for name, shape in VARIANTS.items():
        matmul_mma.TILES = (matmul_mma.Tile(*shape),)
        vmfb = compile_str(matmul(N, N, N, "f16"), CompileOptions(target_backends=["cuda"],
                                                                  cuda_target="sm_90"))
        (folder / f"sweep_{name}.vmfb").write_bytes(vmfb)


def run(folder: Path) -> None:
    import pyree.runtime as rt
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, N)).astype(np.float16)
    y = rng.standard_normal((N, N)).astype(np.float16)
    want = x[:64].astype(np.float64) @ y.astype(np.float64)
    results = {}
    for name in VARIANTS:
        m = rt.load_module(folder / f"sweep_{name}.vmfb", device="cuda")
        fn = m[m.function_names[0]]
        dx, dy = rt.asdevicearray(m.device, x), rt.asdevicearray(m.device, y)
        got = fn(dx, dy).to_host()[:64]
        err = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        for _ in range(3):
            fn(dx, dy).wait()
        reps, r = 40, None
        t0 = time.perf_counter()
        for _ in range(reps):
            r = fn(dx, dy)
        r.wait()
        ms = (time.perf_counter() - t0) * 1e3 / reps
        results[name] = {"ms": ms, "TFLOPs": 2 * N**3 / ms / 1e9, "rel_err": err}
        print(f"{name:16s} {ms:.3f} ms  {2 * N**3 / ms / 1e9:6.1f} TFLOP/s  rel err {err:.1e}")
    Path("tile_sweep.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    {"build": build, "run": run}[sys.argv[1]](Path(sys.argv[2]))
