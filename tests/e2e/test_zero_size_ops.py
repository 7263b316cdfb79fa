"""Ops over tensors with a dimension of size zero (an empty batch, an empty axis), as JAX
writes them, against JAX: compiling any of them for cuda or rocm raised ZeroDivisionError in the
grid arithmetic, llvm-cpu's matmul tiling did the same, a padded empty batch was refused, and a
mean over an empty axis came out 0 on Vulkan instead of NaN (flow/empty_loops.py)."""

from __future__ import annotations

import numpy as np
import pytest
from jax_runs import DEVICES, run_both
from pyree.compiler import CompileOptions, compile_str
from tooling import require_module

jax = require_module("jax")
jnp, lax = jax.numpy, jax.lax
jax.config.update("jax_platforms", "cpu")

ROWS = np.zeros((0, 5), np.float32)  # no rows
COLUMNS = np.zeros((4, 0), np.float32)  # rows of nothing

CASES = {
    "scale": (lambda a: a * 2, ROWS),
    "sum_over_nothing": (lambda a: jnp.sum(a, axis=0), ROWS),
    "mean_over_nothing": (lambda a: jnp.mean(a, axis=0), ROWS),
    "max_of_nothing_with_initial": (lambda a: jnp.max(a, axis=0, initial=-1.0), ROWS),
    "rows_max": (lambda a: jnp.max(a, axis=1, initial=-1.0), ROWS),
    "matmul_no_rows": (lambda a: a @ jnp.ones((5, 3)), ROWS),
    "matmul_k_zero": (lambda b: b @ jnp.ones((0, 3)) + 1, COLUMNS),
    "concatenate": (lambda b: jnp.concatenate([b, jnp.ones((4, 2))], axis=1), COLUMNS),
    "softmax_of_nothing": (lambda b: jax.nn.softmax(b, axis=1), COLUMNS),
    "argmax_no_rows": (lambda a: jnp.argmax(a, axis=1), ROWS),
    "sort_no_rows": (lambda a: jnp.sort(a, axis=0), ROWS),
    "cumsum_no_rows": (lambda a: jnp.cumsum(a, axis=0), ROWS),
    "transpose": (lambda a: a.T + 1, ROWS),
    "prod_var_logsumexp": (lambda b: (jnp.prod(b, axis=1), jnp.var(b, axis=1),
                                      jax.nn.logsumexp(b, axis=1)), COLUMNS),
    "any_all": (lambda b: (jnp.any(b > 0, axis=1), jnp.all(b > 0, axis=1)), COLUMNS),
    "conv_empty_batch": (lambda x: lax.conv(x, jnp.ones((3, 2, 3, 3)), (1, 1), "SAME"),
                         np.zeros((0, 2, 5, 5), np.float32)),
    "pad": (lambda b: jnp.pad(b, ((1, 1), (2, 0))), COLUMNS),
    "gram": (lambda b: jnp.einsum("ij,kj->ik", b, b), COLUMNS),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax(name, device):
    f, x = CASES[name]
    got, want = run_both(jax, device, f, x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)  # (NaN where JAX has NaN: a mean of nothing)


@pytest.mark.parametrize("target", ["cuda", "rocm"])
def test_every_case_compiles_for_the_gpu_targets_here(target):
    """The GPU targets' compile needs no GPU: this runs in CI."""
    for name, (f, x) in CASES.items():
        text = jax.jit(f, keep_unused=True).lower(x).as_text()
        assert compile_str(text, CompileOptions(target_backends=[target], cuda_target="sm_90")), name
