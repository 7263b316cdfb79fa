"""Row kernels whose rows run along the outputs (a softmax over the first axis, a layernorm over
a middle one, a log-sum-exp over axis 0 with its normalized values): llvm-cpu folds their phases
over blocks of columns, each column's finished values kept for the next phase
(codegen/llvm_cpu/reduction.py ``_column_blocks``); they read the rows one element per column
before, at 0.08x PyTorch's CPU time for a 1024 x 1024 softmax over axis 0. Checked on every
device against float64 numpy at odd sizes, with NaN, infinities and -0 in the inputs."""

from __future__ import annotations

import numpy as np
import pytest
from comparisons import same_special_values
from jax_runs import DEVICES, run_both

jax = pytest.importorskip("jax")
jnp = jax.numpy


def softmax0(x):
    return jax.nn.softmax(x, axis=0)


def softmax1_of_3d(x):
    return jax.nn.softmax(x, axis=1)


def layernorm_middle(x):
    mean = jnp.mean(x, axis=1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5)


def logsumexp0_and_normalized(x):
    m = jnp.max(x, axis=0)
    s = jnp.log(jnp.sum(jnp.exp(x - m), axis=0)) + m
    return s, x - s


def reference(f, x):
    x = x.astype(np.float64)
    if f is softmax0 or f is softmax1_of_3d:
        axis = 0 if f is softmax0 else 1
        with np.errstate(invalid="ignore"):
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return [e / e.sum(axis=axis, keepdims=True)]
    if f is layernorm_middle:
        mean = x.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):
            return [(x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)]
    with np.errstate(invalid="ignore", over="ignore"):
        m = x.max(axis=0)
        s = np.log(np.exp(x - m).sum(axis=0)) + m
        return [s, x - s]


CASES = [
    (softmax0, (1024, 1024)), (softmax0, (37, 301)), (softmax0, (300, 5)), (softmax0, (1, 19)),
    (softmax1_of_3d, (3, 129, 67)), (layernorm_middle, (2, 333, 41)),
    (logsumexp0_and_normalized, (517, 33)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("f, shape", CASES, ids=[f"{f.__name__}-{'x'.join(map(str, s))}" for f, s in CASES])
def test_column_row_kernels_match_numpy(f, shape, device):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    if x.size > 8:  # a NaN column, an infinite one, a -0
        x.reshape(-1)[[0, 5, 7]] = [np.nan, np.inf, -0.0]
    got, _ = run_both(jax, device, f, x)
    for g, want in zip(got, reference(f, x)):
        assert g.shape == want.shape
        same_special_values(g, want)
        finite = np.isfinite(want)
        err = np.linalg.norm(g[finite] - want[finite]) / max(np.linalg.norm(want[finite]), 1e-30)
        assert err < 2e-6, err
