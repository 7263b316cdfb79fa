"""Whole programs from the frontends IREE's guides start from, with inputs and the framework's own
outputs: JAX (``jax.jit(f).lower(...).as_text()``: StableHLO, as JAX prints it) and torch-mlir's
TOSA (``torch_mlir.fx.export_and_import(..., output_type="tosa")``). tests/frontends runs them on
local-task and Vulkan (lavapipe in CI) and, from modules built by build_modules.py on the CPU
machine, on the GPU host's cuda and vulkan."""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Program:
    name: str
    mlir: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    rtol: float = 2e-5
    atol: float = 2e-5


def jax_programs() -> list[Program]:
    import jax
    import jax.numpy as jnp
    from jax import lax
    jax.config.update("jax_platforms", "cpu")
    rng = np.random.default_rng(0)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w1, b1, w2, b2, w3 = normal(37, 64, scale=0.2), normal(64), normal(64, 48, scale=0.2), \
        normal(48), normal(48, 10, scale=0.2)

    def mlp(x):
        h = jax.nn.gelu(x @ w1 + b1)
        h = jax.nn.relu(h @ w2 + b2)
        return jax.nn.log_softmax(h @ w3)

    k1, k2, dense = normal(3, 3, 3, 8, scale=0.3), normal(3, 3, 8, 12, scale=0.2), \
        normal(12, 7, scale=0.3)

    def cnn(img):  # NHWC, HWIO
        dims = ("NHWC", "HWIO", "NHWC")
        y = lax.conv_general_dilated(img, k1, (2, 2), "SAME", dimension_numbers=dims)
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        y = lax.conv_general_dilated(y, k2, (1, 1), ((2, 2), (2, 2)), rhs_dilation=(2, 2),
                                     dimension_numbers=dims)
        y = jnp.mean(jnp.tanh(y), axis=(1, 2))
        return jax.nn.softmax(y @ dense)

    mix = normal(16, 16, scale=0.25)

    def refine(v, x):
        """A loop whose trip count is a device result (argmax of v), with real work inside."""
        steps = jnp.argmax(v)
        return lax.fori_loop(0, steps, lambda i, h: jnp.tanh(h @ mix + x) * (1.0 + 0.01 * i), x)

    programs = [("jax_mlp", mlp, [normal(5, 37)]),
                ("jax_cnn", cnn, [normal(2, 33, 29, 3)]),
                ("jax_while", refine, [np.arange(9, dtype=np.float32) % 7, normal(3, 16)])]
    out = []
    for name, f, inputs in programs:
        expected = jax.jit(f)(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        out.append(Program(name, jax.jit(f).lower(*inputs).as_text(), inputs,
                           [np.asarray(e) for e in expected]))
    return out


def tosa_programs() -> list[Program]:
    import torch
    from torch_mlir import fx
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
    from definitions import MODELS, example_input
    out = []
    for name in ("mlp", "small_cnn"):
        factory = MODELS[name][0]
        model, x = factory(), example_input(name)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            text = str(fx.export_and_import(model, x, output_type="tosa"))
            expected = model(x).numpy()
        out.append(Program(f"tosa_{name}", text, [x.numpy()], [expected], 1e-4, 1e-4))
    return out


def all_programs() -> list[Program]:
    return jax_programs() + tosa_programs()


def check(program: Program, outputs) -> None:
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert len(outputs) == len(program.expected), program.name
    for got, want in zip(outputs, program.expected):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype, program.name
        np.testing.assert_allclose(got, want, rtol=program.rtol, atol=program.atol,
                                   err_msg=program.name)
