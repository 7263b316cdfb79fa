"""The GPT-2 block's parts as separate modules, to find which one misbehaves on a device:

    python3 bench/models/op_modules.py OUT_DIR [backend] [target]     (here, on the build machine)
    python3 bench/models/op_modules.py --run OUT_DIR DEVICE           (on the GPU host)

--run loads every module in its own process with a time limit, calls it three times on a fresh
random input and compares with the numpy float64 result saved at build time, printing one line
per module: a hang shows as TIMEOUT instead of stopping the whole run.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "models"))


def parts():
    import definitions
    import torch
    from torch import nn
    block = definitions.gpt2_block()

    class Softmax(nn.Module):
        def forward(self, s):
            return torch.softmax(s, dim=-1)

    class MaskedSoftmax(nn.Module):
        def forward(self, s):
            return torch.softmax(s.masked_fill(~block.bias, float("-inf")), dim=-1)

    class BatchMatmul(nn.Module):
        def forward(self, a, b):
            return a @ b

    class Gelu(nn.Module):
        def forward(self, x):
            return nn.functional.gelu(x, approximate="tanh")

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = definitions.gpt2_block()

        def forward(self, x):
            return self.block.attention(x)

    class AttentionResidual(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = definitions.gpt2_block()

        def forward(self, x):
            return x + self.block.attention(self.block.ln_1(x))

    class MlpResidual(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = definitions.gpt2_block()

        def forward(self, x):
            b = self.block
            return x + b.mlp_proj(nn.functional.gelu(b.c_fc(b.ln_2(x)), approximate="tanh"))

    r = torch.randn
    return {
        "attention_residual": (AttentionResidual(), (r(1, 128, 256),)),
        "mlp_residual": (MlpResidual(), (r(1, 128, 256),)),
        "layernorm": (block.ln_1, (r(1, 128, 256),)),
        "linear_256_768": (block.c_attn, (r(1, 128, 256),)),
        "linear_1024_256": (block.mlp_proj, (r(1, 128, 1024),)),
        "softmax": (Softmax(), (r(1, 4, 128, 128),)),
        "masked_softmax": (MaskedSoftmax(), (r(1, 4, 128, 128),)),
        "batch_matmul_qk": (BatchMatmul(), (r(1, 4, 128, 64), r(1, 4, 64, 128))),
        "batch_matmul_pv": (BatchMatmul(), (r(1, 4, 128, 128), r(1, 4, 128, 64))),
        "gelu": (Gelu(), (r(1, 128, 1024),)),
        "attention": (Attention(), (r(1, 128, 256),)),
        "block": (block, (r(1, 128, 256),)),
    }


def build(out: Path, backend: str, target: str) -> None:
    import copy

    import torch
    from pyree.compiler import CompileOptions, compile_str, import_torch
    out.mkdir(parents=True, exist_ok=True)
    options = CompileOptions(target_backends=[backend])
    if backend == "vulkan-spirv":
        options.vulkan_target = target
    elif backend == "cuda":
        options.cuda_target = target
    for name, (module, args) in parts().items():
        mlir = import_torch(module, *args)
        (out / f"{name}.vmfb").write_bytes(compile_str(mlir, options))
        with torch.no_grad():
            ref = copy.deepcopy(module).double()(*(a.double() for a in args)).numpy()
        np.savez(out / f"{name}.npz", *[a.numpy() for a in args], ref=ref)
        print("built", name, flush=True)


def run_one(path: Path, device: str) -> None:
    import pyree.runtime as rt
    data = np.load(path.with_suffix(".npz"))
    args = [data[k] for k in sorted(k for k in data.files if k.startswith("arr_"))]
    module = rt.load_module(path, device=device)
    fn = module[module.function_names[0]]
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        got = fn(*args).to_host()
        times.append((time.perf_counter() - t0) * 1e3)
    ref = data["ref"]
    err = np.linalg.norm(got.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
    print(f"{path.stem:18s} first {times[0]:9.2f} ms  then {min(times[1:]):9.3f} ms  "
          f"rel err {err:.1e}{'' if err <= 1e-4 and math.isfinite(err) else '  WRONG'}")


def run_all(folder: Path, device: str, limit: float = 30.0) -> None:
    for path in sorted(folder.glob("*.vmfb")):
        try:
            proc = subprocess.run([sys.executable, __file__, "--one", str(path), device],
                                  capture_output=True, text=True, timeout=limit)
            print(proc.stdout.strip() or f"{path.stem:18s} FAILED: {proc.stderr.strip()[-300:]}",
                  flush=True)
        except subprocess.TimeoutExpired:
            print(f"{path.stem:18s} TIMEOUT after {limit:.0f} s", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        run_all(Path(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "--one":
        run_one(Path(sys.argv[2]), sys.argv[3])
    else:
        build(Path(sys.argv[1]), *(sys.argv[2:] or ["vulkan-spirv", "hopper-h100-linux"]))
