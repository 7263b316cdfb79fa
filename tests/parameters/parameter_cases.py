"""The model the parameter tests compile -- a two-layer MLP at odd sizes whose weights are
``util.global``s -- its numpy reference, and running the tools as a user does."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

BATCH, IN, HIDDEN, OUT = 3, 7, 13, 5
SHAPES = {"w1": (IN, HIDDEN), "b1": (HIDDEN,), "w2": (HIDDEN, OUT), "b2": (OUT,)}


def weights(rng: np.random.Generator, special: bool = True) -> dict[str, np.ndarray]:
    """Fresh random f32 weights; with ``special``, -0.0 in every weight and NaN, -inf, +inf
    in ``b2`` (where each reaches one output column, leaving the others finite)."""
    w = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    if special:
        w["w1"][1, 2] = w["w2"][6, 3] = w["b1"][5] = w["b2"][0] = -0.0
        w["b2"][1], w["b2"][3], w["b2"][4] = np.nan, -np.inf, np.inf
    return w


def reference(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    x, w = x.astype(np.float64), {k: v.astype(np.float64) for k, v in w.items()}
    with np.errstate(all="ignore"):
        hidden = np.maximum(x @ w["w1"] + w["b1"], 0.0)
        return hidden @ w["w2"] + 2.0 * w["b2"]


def _type(key: str) -> str:
    return "tensor<" + "x".join(map(str, SHAPES[key])) + "xf32>"


def mlp_mlir(initializers: dict[str, str]) -> str:
    """The MLP with ``util.global private @k = <initializers[k]> : type`` for every weight.
    ``b2`` reaches the output as ``b2 * 2`` (an elementwise op of a constant on a constant)."""
    globals_ = "\n".join(f"  util.global private @{k} = {v} : {_type(k)}"
                         for k, v in initializers.items())
    loads = "\n".join(f"    %{k} = util.global.load @{k} : {_type(k)}" for k in SHAPES)
    par2 = '["parallel", "parallel"]'
    return f"""module @mlp {{
{globals_}
  func.func @main(%x: tensor<{BATCH}x{IN}xf32>) -> tensor<{BATCH}x{OUT}xf32> {{
{loads}
    %z = arith.constant 0.0 : f32
    %two = arith.constant dense<2.0> : tensor<{OUT}xf32>
    %e1 = tensor.empty() : tensor<{BATCH}x{HIDDEN}xf32>
    %f1 = linalg.fill ins(%z : f32) outs(%e1 : tensor<{BATCH}x{HIDDEN}xf32>) -> tensor<{BATCH}x{HIDDEN}xf32>
    %m1 = linalg.matmul ins(%x, %w1 : tensor<{BATCH}x{IN}xf32>, {_type("w1")}) outs(%f1 : tensor<{BATCH}x{HIDDEN}xf32>) -> tensor<{BATCH}x{HIDDEN}xf32>
    %h = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = {par2}}} ins(%m1, %b1 : tensor<{BATCH}x{HIDDEN}xf32>, {_type("b1")}) outs(%e1 : tensor<{BATCH}x{HIDDEN}xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      %r = arith.maximumf %s, %z : f32
      linalg.yield %r : f32
    }} -> tensor<{BATCH}x{HIDDEN}xf32>
    %e2 = tensor.empty() : tensor<{BATCH}x{OUT}xf32>
    %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<{BATCH}x{OUT}xf32>) -> tensor<{BATCH}x{OUT}xf32>
    %m2 = linalg.matmul ins(%h, %w2 : tensor<{BATCH}x{HIDDEN}xf32>, {_type("w2")}) outs(%f2 : tensor<{BATCH}x{OUT}xf32>) -> tensor<{BATCH}x{OUT}xf32>
    %b2x = arith.mulf %b2, %two : {_type("b2")}
    %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = {par2}}} ins(%m2, %b2x : tensor<{BATCH}x{OUT}xf32>, {_type("b2")}) outs(%e2 : tensor<{BATCH}x{OUT}xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      linalg.yield %s : f32
    }} -> tensor<{BATCH}x{OUT}xf32>
    return %y : tensor<{BATCH}x{OUT}xf32>
  }}
}}
"""


def dense(array: np.ndarray) -> str:
    return f'dense<"0x{array.tobytes().hex().upper()}">'


def dense_mlir(w: dict[str, np.ndarray]) -> str:
    """The MLP with its weights inline (``dense`` initializers)."""
    return mlp_mlir({k: dense(v) for k, v in w.items()})


def parameter_mlir(scopes: dict[str, str]) -> str:
    """The MLP with every weight ``#stream.parameter.named`` in the scope ``scopes`` gives it
    ("" for the ``<"key">`` form)."""
    return mlp_mlir({k: f'#stream.parameter.named<"{s}"::"{k}">' if s
                     else f'#stream.parameter.named<"{k}">' for k, s in scopes.items()})


def assert_matches(result: np.ndarray, x: np.ndarray, w: dict[str, np.ndarray]) -> None:
    np.testing.assert_allclose(result, reference(x, w), rtol=1e-5, atol=1e-5, equal_nan=True)


def numpy_safetensors(path, tensors: dict[str, np.ndarray], dtype: str = "F32") -> None:
    """A safetensors file written with numpy alone, the header padded to 8 bytes as the
    safetensors package pads it (so the data is not 64-byte aligned)."""
    import json
    import struct

    header, offset = {}, 0
    for key, array in tensors.items():
        header[key] = {"dtype": dtype, "shape": list(array.shape),
                       "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for array in tensors.values():
            f.write(np.ascontiguousarray(array).tobytes())


def run(tool: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m`` the tool (``pyree.runtime.tools.run_module``, ``pyree.compiler.tools.compile``)."""
    return subprocess.run([sys.executable, "-m", tool, *args], capture_output=True, text=True,
                          timeout=300)


def assert_clean_error(proc: subprocess.CompletedProcess, fragments: list[str]) -> str:
    """Exit 1, one ``error:`` line naming every fragment, no traceback; the line."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
