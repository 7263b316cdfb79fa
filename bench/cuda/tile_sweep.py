"""Variant sweep for the f16 4096^3 matmul: the wgmma template (sm_90a) at each tile width and
pipeline depth, and the best mma.sync tile (sm_90) for comparison. One of them reads B's
descriptor offsets the other way round, so that a wrong reading of the ISA's layout table shows
up as the one variant that is right.

    python3 bench/cuda/tile_sweep.py build DIR     (CPU machine: one module per variant)
    python3 bench/cuda/tile_sweep.py run DIR       (GPU host: checks and times each)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

N = 4096
VARIANTS = {  # name: (target, {module attribute: value})
    "wgmma_n256_s4": ("sm_90a", {"TILES": "256", "STAGES": 4}),
    "wgmma_n256_s3": ("sm_90a", {"TILES": "256", "STAGES": 3}),
    "wgmma_n128_s4": ("sm_90a", {"TILES": "128", "STAGES": 4}),
    "wgmma_n256_s4_bswap": ("sm_90a", {"TILES": "256", "STAGES": 4, "B_LBO": 1024, "B_SBO": 8192}),
    "mma_128x256x64_s3": ("sm_90", {}),
}


def build(folder: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cuda"))
    from cases import matmul
    from pyree.compiler import CompileOptions, compile_str
    from pyree.compiler.codegen.cuda import matmul_wgmma as wg
    folder.mkdir(parents=True, exist_ok=True)
    saved = {k: getattr(wg, k) for k in ("TILES", "STAGES", "AHEAD", "B_LBO", "B_SBO")}
    for name, (target, patch) in VARIANTS.items():
        for key, value in patch.items():
            setattr(wg, key, (wg.Tile(int(value)),) if key == "TILES" else value)
        wg.AHEAD = wg.STAGES - 2
        vmfb = compile_str(matmul(N, N, N, "f16"), CompileOptions(target_backends=["cuda"],
                                                                  cuda_target=target))
        (folder / f"sweep_{name}.vmfb").write_bytes(vmfb)
        for key, value in saved.items():
            setattr(wg, key, value)


def run(folder: Path) -> None:
    import pyree.runtime as rt
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, N)).astype(np.float16)
    y = rng.standard_normal((N, N)).astype(np.float16)
    rows = np.arange(0, N, 29)  # rows of every warpgroup and block row
    want = x[rows].astype(np.float64) @ y.astype(np.float64)
    results = {}
    for name in VARIANTS:
        m = rt.load_module(folder / f"sweep_{name}.vmfb", device="cuda")
        fn = m[m.function_names[0]]
        dx, dy = rt.asdevicearray(m.device, x), rt.asdevicearray(m.device, y)
        got = fn(dx, dy).to_host()[rows]
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
        print(f"{name:22s} {ms:.3f} ms  {2 * N**3 / ms / 1e9:6.1f} TFLOP/s  rel err {err:.1e}")
    Path("tile_sweep.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    {"build": build, "run": run}[sys.argv[1]](Path(sys.argv[2]))
