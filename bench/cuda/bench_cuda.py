"""pyree's CUDA driver against PyTorch, in one process on one GPU.

    python3 bench/cuda/bench_cuda.py MODULE_DIR [MODES...]

MODULE_DIR holds the modules that tests/drivers/cuda/build_modules.py writes.

PYREE_CUDA_F16_MODULE_DIR names another folder for the f16 matmul (the sm_90a build: wgmma).

Measures: add of two 64M-element f32 vectors (whole call including the result allocation,
device-resident inputs) vs torch.add(out=); a 4-element add, the whole invoke from Python
(numpy in, numpy out; and device-resident in); matmul 4096^3 f32 (TF32 off) and f16 vs
torch.matmul (cuBLAS). Prints a table with the ratios; --json writes the numbers too.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_timing import pyree_ms, torch_ms  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import invoke_latency  # noqa: E402


def main(folder: Path, mode: str, f16_folder: Path) -> dict:
    uri = f"cuda://0?command_buffer={mode}"
    rng = np.random.default_rng(0)
    out: dict = {"mode": mode, "gpu": torch.cuda.get_device_name(0)}

    # add 64M f32 ---------------------------------------------------------------------------
    m = rt.load_module(folder / "bench_add_64m.vmfb", device=uri)
    fn = m[m.function_names[0]]
    a = rng.standard_normal((8192, 8192)).astype(np.float32)
    b = rng.standard_normal((8192, 8192)).astype(np.float32)
    da, db = rt.asdevicearray(m.device, a), rt.asdevicearray(m.device, b)
    check = fn(da, db).to_host()
    assert np.array_equal(check, a + b), "64M add is wrong"
    lat, thr = pyree_ms(lambda: fn(da, db))
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tout = torch.empty_like(ta)
    t_add = torch_ms(lambda: torch.add(ta, tb, out=tout))
    out["add64m"] = {"pyree_latency_ms": lat, "pyree_ms": thr, "torch_ms": t_add,
                     "speed_vs_torch": t_add / thr, "pyree_GBps": 3 * a.nbytes / thr / 1e6}

    # 4-element add: per-call overhead (invoke_latency.py), against torch add + .cpu() -------
    out["add4"] = invoke_latency.measure(folder, uri)
    a4, b4 = rng.standard_normal((1, 4)).astype(np.float32), rng.standard_normal((1, 4)).astype(np.float32)
    t4a, t4b = torch.from_numpy(a4).cuda(), torch.from_numpy(b4).cuda()
    times_torch = []
    for i in range(2000):
        t0 = time.perf_counter()
        torch.add(t4a, t4b).cpu()
        if i >= 200:
            times_torch.append((time.perf_counter() - t0) * 1e6)
    out["add4"]["torch_add_cpu_us"] = statistics.median(times_torch)

    # matmul 4096^3 (cuBLAS with TF32 off for f32) ----------------------------------------------
    torch.backends.cuda.matmul.allow_tf32 = False
    out["matmul_f32"] = bench_matmul(folder, uri, "f32", np.float32, rng)
    out["matmul_f16"] = bench_matmul(f16_folder, uri, "f16", np.float16, rng)
    return out


def bench_matmul(folder: Path, uri: str, dtype: str, np_dt, rng, n: int = 4096) -> dict:
    m = rt.load_module(folder / f"bench_matmul_{dtype}.vmfb", device=uri)
    fn = m[m.function_names[0]]
    x = rng.standard_normal((n, n)).astype(np_dt)
    y = rng.standard_normal((n, n)).astype(np_dt)
    dx, dy = rt.asdevicearray(m.device, x), rt.asdevicearray(m.device, y)
    got = fn(dx, dy).to_host()
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    ref = (tx.double() @ ty.double()).cpu().numpy()
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    _, ms = pyree_ms(lambda: fn(dx, dy), reps=30, warmup=3)
    t_mm = torch_ms(lambda: torch.matmul(tx, ty), reps=20)
    flops = 2 * n ** 3
    return {"pyree_ms": ms, "torch_ms": t_mm, "rel_err": err, "pyree_TFLOPs": flops / ms / 1e9,
            "torch_TFLOPs": flops / t_mm / 1e9, "ratio_vs_cublas": t_mm / ms}


def print_table(r: dict) -> None:
    print(f"\n== {r['gpu']}, command buffers: {r['mode']} ==")
    a = r["add64m"]
    print(f"add 64M f32     pyree {a['pyree_ms']:.3f} ms/call ({a['pyree_GBps']:.0f} GB/s, latency "
          f"{a['pyree_latency_ms']:.3f} ms)  torch.add(out=) {a['torch_ms']:.3f} ms  "
          f"speed ratio {a['speed_vs_torch']:.2f}x")
    s = r["add4"]
    print(f"add 4 elements  pyree invoke numpy->numpy {s['pyree_numpy_in_out_us']:.1f} us, "
          f"device-resident {s['pyree_device_in_wait_us']:.1f} us; torch add+.cpu() "
          f"{s['torch_add_cpu_us']:.1f} us")
    for dt in ("f32", "f16"):
        mm = r[f"matmul_{dt}"]
        print(f"matmul {dt} 4096^3  pyree {mm['pyree_ms']:.2f} ms ({mm['pyree_TFLOPs']:.1f} TFLOP/s, "
              f"rel err {mm['rel_err']:.1e})  cuBLAS {mm['torch_ms']:.2f} ms "
              f"({mm['torch_TFLOPs']:.1f} TFLOP/s)  ratio {mm['ratio_vs_cublas']:.2f}x")


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    f16_folder = Path(os.environ.get("PYREE_CUDA_F16_MODULE_DIR") or folder)
    results = [main(folder, mode, f16_folder) for mode in sys.argv[2:] or ["graph"]]
    for r in results:
        print_table(r)
    if len(sys.argv) > 1:
        Path("bench_cuda.json").write_text(json.dumps(results, indent=1))
