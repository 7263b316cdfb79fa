"""JAX's cumulative ops on pyree's cuda driver (a reduce_window as long as its line: the scan of
input/stablehlo/reduce.py, in blocks for one associative op, one counted pass otherwise) against
PyTorch's cumsum / cummax / logcumsumexp on the same GPU (CUDA events, medians).

    python3 bench/cuda/scans.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np
import pyree.runtime as rt
import torch
from pyree.compiler import CompileOptions, compile_str

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu_timing import pyree_ms, torch_ms  # noqa: E402

jax.config.update("jax_platforms", "cpu")
OPS = {"cumsum": (jax.lax.cumsum, lambda t, d: torch.cumsum(t, d)),
       "cummax": (jax.lax.cummax, lambda t, d: torch.cummax(t, d)),
       "cumlogsumexp": (jax.lax.cumlogsumexp, lambda t, d: torch.logcumsumexp(t, d))}


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    for shape in [(512, 2000), (64, 8191)]:
        for name, (jax_op, torch_op) in OPS.items():
            for axis in (0, 1):
                x = rng.standard_normal(shape).astype(np.float32)
                text = jax.jit(lambda v, op=jax_op, d=axis: op(v, d)).lower(x).as_text()
                module = rt.load_module(compile_str(text, CompileOptions(
                    target_backends=["cuda"], cuda_target="sm_90")), device="cuda")
                fn = module["main"]
                dx = rt.asdevicearray(module.device, x)
                want = np.asarray(jax.jit(lambda v, op=jax_op, d=axis: op(v, d))(x))
                np.testing.assert_allclose(fn(dx).to_host(), want, rtol=2e-4, atol=2e-3)
                _, per_call = pyree_ms(lambda f=fn, a=dx: f(a))
                tx = torch.from_numpy(x).cuda()
                t = torch_ms(lambda op=torch_op, a=tx, d=axis: op(a, d))
                print(f"{name} {shape} axis {axis}: pyree {per_call:.3f} ms, PyTorch {t:.3f} ms "
                      f"({per_call / t:.2f}x)")


if __name__ == "__main__":
    main()
