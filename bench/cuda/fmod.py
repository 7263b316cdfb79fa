"""``arith.remf`` (exact fmod, codegen/common/math_expansion.exact_fmod) on pyree's cuda driver
against ``torch.fmod`` on the same GPU (CUDA events, medians; pyree per call with calls queued),
4096x4096 f32 of every magnitude, each answer checked against numpy first.

    python3 bench/cuda/fmod.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import torch
from pyree.compiler import CompileOptions, compile_str

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_timing import pyree_ms, torch_graph_ms, torch_ms  # noqa: E402

N = 4096
T = f"tensor<{N}x{N}xf32>"
TEXT = f"""func.func @main(%a: {T}, %b: {T}) -> {T} {{
  %r = arith.remf %a, %b : {T}
  return %r : {T}
}}"""


def main() -> None:
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    rng = np.random.default_rng(0)
    for label, scale in (("quotients below 2^24", 1.0), ("every magnitude", None)):
        if scale is None:
            a, b = (rng.integers(0, 0x7F800000, (N, N)).astype(np.uint32).view(np.float32)
                    for _ in range(2))
        else:
            a, b = (rng.uniform(-100, 100, (N, N)).astype(np.float32) for _ in range(2))
        module = rt.load_module(compile_str(TEXT, CompileOptions(target_backends=["cuda"],
                                                                  cuda_target="sm_90")),
                                device="cuda")
        da, db = rt.asdevicearray(module.device, a), rt.asdevicearray(module.device, b)
        got = module["main"](da, db).to_host()
        np.testing.assert_array_equal(got, np.fmod(a, b))
        _, per_call = pyree_ms(lambda f=module["main"], x=da, y=db: f(x, y))
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        assert torch.equal(torch.fmod(ta, tb).cpu(), torch.from_numpy(np.fmod(a, b)))
        fmod = lambda x=ta, y=tb: torch.fmod(x, y)  # noqa: E731
        eager, graph = torch_ms(fmod), torch_graph_ms(fmod)
        print(f"fmod {N}x{N} f32, {label}: pyree {per_call:.3f} ms, PyTorch {eager:.3f} ms eager, "
              f"{graph:.3f} ms graph ({per_call / graph:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
