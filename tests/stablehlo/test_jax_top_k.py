"""JAX's ``lax.top_k`` (``chlo.top_k``) and ``approx_max_k`` against JAX, on local-task, lavapipe
and cuda: lines of a prime length, split in chunks whose rest joins the candidates whole, and
long lines that on a GPU had ranked every element against every other (a top-3 of 100003 was
10^10 comparisons), with NaN, -NaN, +-inf, +-0.0 (XLA's total order) and ties."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from jax_runs import DEVICES, options_for, run_both
from pyree.compiler import compile_str
from tooling import require_module

jax = require_module("jax")
lax = jax.lax
jax.config.update("jax_platforms", "cpu")


def line_data(shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(-40, 40, shape).astype(np.float32) / 4  # many ties
    flat = x.reshape(-1)
    flat[flat == 0] = -0.0
    flat[1::2][flat[1::2] == 0] = 0.0  # +0.0 before -0.0 in XLA's total order
    flat[7::101] = np.inf
    flat[11::103] = -np.inf
    flat[13::997] = np.nan  # first
    flat[17::991] = -np.nan  # last, after -inf
    flat[-1] = 99.0  # the largest in the rest past the last whole chunk
    return x


SHAPES = [((5,), 2), ((3, 8191), 3), ((2, 5003), 50),
          ((100003,), 3), ((1, 12007), 300)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, k", SHAPES)
def test_top_k_matches_jax(device, shape, k):
    x = line_data(shape, seed=shape[-1])
    got, want = run_both(jax, device, lambda v: lax.top_k(v, k), x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])  # ties in index order


@pytest.mark.parametrize("shape, k", SHAPES)
def test_the_gpu_forms_match_jax_on_the_cpu(shape, k):
    """The chunked passes GPUs run (a module for llvm-cpu and vulkan-spirv walks no line), on
    local-task: every prime line leaves a rest past its last whole chunk."""
    from pyree.compiler.input.sort_scan import topk_plan
    if shape[-1] > 1000:
        plan = topk_plan(shape[-1], k, ordered=True, lines=int(np.prod(shape[:-1])))
        assert plan.chunk and shape[-1] % plan.chunk
    x = line_data(shape, seed=shape[-1] + 1)
    f = jax.jit(lambda v: lax.top_k(v, k))
    options = options_for("local-task")
    options.target_backends = ["llvm-cpu", "vulkan-spirv"]
    module = rt.load_module(compile_str(f.lower(x).as_text(), options), device="local-task")
    got = [np.asarray(r.to_host()) for r in module["main"](x)]
    want = [np.asarray(w) for w in f(x)]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("device", DEVICES)
def test_approx_max_k_of_a_prime_line(device):
    x = line_data((2, 8191), seed=5)
    got, want = run_both(jax, device, lambda v: lax.approx_max_k(v, 7), x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(np.take_along_axis(x, got[1], axis=1), got[0])
