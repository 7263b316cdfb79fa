"""Compiles the Vulkan benchmark modules on the build machine (the GPU host needs no compiler).

    python3 bench/vulkan/build_modules.py OUT_DIR [TRIPLE]

Writes add_64m (two 8192x8192 f32), add_16m (4096x4096), add_4, matmul_f32 and matmul_f16 (4096^3) for the
vulkan-spirv target; TRIPLE defaults to hopper-h100-linux (float16 arithmetic, 1024 invocations).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyree.compiler import CompileOptions, compile_str


def add(shape: tuple[int, ...]) -> str:
    ty = f"tensor<{'x'.join(map(str, shape))}xf32>"
    return f"""
    func.func @add(%a: {ty}, %b: {ty}) -> {ty} {{
      %r = arith.addf %a, %b : {ty}
      return %r : {ty}
    }}"""


def matmul(n: int, dtype: str) -> str:
    ty = f"tensor<{n}x{n}x{dtype}>"
    return f"""
    func.func @mm(%a: {ty}, %b: {ty}) -> {ty} {{
      %zero = arith.constant 0.0 : {dtype}
      %e = tensor.empty() : {ty}
      %init = linalg.fill ins(%zero : {dtype}) outs(%e : {ty}) -> {ty}
      %r = linalg.matmul ins(%a, %b : {ty}, {ty}) outs(%init : {ty}) -> {ty}
      return %r : {ty}
    }}"""


MODULES = {
    "add_64m": add((8192, 8192)),
    "add_16m": add((4096, 4096)),
    "add_4": add((1, 4)),
    "matmul_f32": matmul(4096, "f32"),
    "matmul_f16": matmul(4096, "f16"),
}


def main(out: Path, triple: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    options = CompileOptions(target_backends=["vulkan-spirv"], vulkan_target=triple)
    for name, text in MODULES.items():
        (out / f"{name}.vmfb").write_bytes(compile_str(text, options))
        print(f"{out / name}.vmfb")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "hopper-h100-linux")
