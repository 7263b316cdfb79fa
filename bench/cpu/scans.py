"""JAX's cumulative ops (a ``reduce_window`` as long as the line, pyree's scan since the
thirty-seventh session) on local-task against JAX's own CPU, along both axes of 512 x 2000.

    python bench/cpu/scans.py
"""

from __future__ import annotations

import time

import jax
import numpy as np
import pyree.runtime as rt
from pyree.compiler import CompileOptions, compile_str

jax.config.update("jax_platforms", "cpu")
OPS = {"cumsum": jax.lax.cumsum, "cumprod": jax.lax.cumprod, "cummax": jax.lax.cummax,
       "cumlogsumexp": jax.lax.cumlogsumexp}


def median_ms(fn, x, finish, runs: int = 15) -> float:
    finish(fn(x))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        finish(fn(x))
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def main() -> None:
    x = np.random.default_rng(0).uniform(0.999, 1.001, (512, 2000)).astype(np.float32)
    for name, op in OPS.items():
        for axis in (0, 1):
            def f(x, op=op, axis=axis):
                return op(x, axis)
            jitted = jax.jit(f)
            start = time.perf_counter()
            module = rt.load_module(compile_str(jitted.lower(x).as_text(),
                                                CompileOptions(target_backends=["llvm-cpu"])),
                                    device="local-task")["main"]
            compile_s = time.perf_counter() - start
            np.testing.assert_allclose(module(x).to_host(), np.asarray(jitted(x)), rtol=1e-4)
            p = median_ms(module, x, rt.DeviceArray.to_host)
            j = median_ms(jitted, x, jax.block_until_ready)
            print(f"{name} axis {axis}: compile {compile_s:.1f} s, pyree {p:.2f} ms, "
                  f"JAX {j:.2f} ms ({p / j:.2f}x)")


if __name__ == "__main__":
    main()
