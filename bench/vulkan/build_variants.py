"""Builds workgroup-size variants of the 64M f32 add's elementwise shader for ``diagnose_add.py``
(which needs no compiler on the GPU host), each SPIR-V checked with spirv-val where it exists.

    python3 bench/vulkan/build_variants.py OUT_DIR [TRIPLE]

Writes OUT_DIR/<variant>.vmfb (the whole module), OUT_DIR/<variant>.spv (its shader) and
OUT_DIR/variants.json ({variant: {export, grid, block, binding_min_lengths, target}}).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.spirv import vectorized

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "vulkan"))
from spirv_modules import spirv_binaries  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_modules import add  # noqa: E402

# name -> invocations per workgroup (vectorized.BLOCK); "b256" is the default template.
VARIANTS = {"b256": 256, "b128": 128, "b512": 512, "b1024": 1024}


def main(out: Path, triple: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    options = CompileOptions(target_backends=["vulkan-spirv"], vulkan_target=triple)
    saved = vectorized.BLOCK
    table = {}
    try:
        for name, block in VARIANTS.items():
            vectorized.BLOCK = block
            vmfb = compile_str(add((8192, 8192)), options)
            (out / f"{name}.vmfb").write_bytes(vmfb)
            ((code, spirv),) = spirv_binaries(vmfb)
            (export,) = spirv.exports
            path = out / f"{name}.spv"
            path.write_bytes(code)
            if shutil.which("spirv-val"):
                subprocess.run(["spirv-val", "--target-env", "vulkan1.2", str(path)], check=True)
            table[name] = {"export": export.name.decode(), "grid": [int(g) for g in export.gridSize],
                           "block": [int(b) for b in export.blockSize],
                           "binding_min_lengths": [int(b.minLength) for b in export.bindings],
                           "target": spirv.target.decode()}
            print(name, table[name]["grid"], table[name]["block"], len(code), "bytes")
    finally:
        vectorized.BLOCK = saved
    (out / "variants.json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "hopper-h100-linux")
