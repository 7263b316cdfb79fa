"""Sweep of the GPU matrix-vector products' split-K rule (flow/split_reduction.py's
``GPU_VECTOR_BLOCKS``) and their template's unrolling
(common/llvm_gpu/matmul_gemv.py's ``UNROLL``): builds the LLM suite's decode products (at most 4
rows) once per variant into ``OUT/<variant>/``, each a build_modules.py folder that run_suite.py
times (``--profile`` for CUPTI's kernel times):

    python3 bench/kernels/gemv_split_sweep.py OUT [--target sm_90a]        (CPU machine)
    python3 bench/kernels/run_suite.py OUT/<variant> --suite llm --cases ... (GPU host)

``whole`` never splits; ``blocks528`` splits to twice the default's blocks; ``unroll8`` is the
default rule with eight loads in flight a thread instead of four. Timed alone, again and again,
a product's weights stay in L2 (50 MB) when they fit: run_suite.py's times then flatter the
kernels that make few blocks (whole GPT-2 products ran as fast as split ones there, twice as
slow in the decode step).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_modules  # noqa: E402
import cases  # noqa: E402
from pyree.compiler.codegen.common.llvm_gpu import matmul_gemv  # noqa: E402
from pyree.compiler.flow import split_reduction  # noqa: E402

VARIANTS = {  # name: {(module, attribute): value}
    "default": {},
    "whole": {(split_reduction, "GPU_VECTOR_BLOCKS"): 1},
    "blocks528": {(split_reduction, "GPU_VECTOR_BLOCKS"): 528},
    "unroll8": {(matmul_gemv, "UNROLL"): 8},
}
DECODE = [c for c in cases.LLM_CASES if c.inputs[0].shape[0] <= split_reduction.GPU_GEMV_ROWS
          and c.fn is not cases.argmax_last and len(c.inputs) == 2 and len(c.inputs[0].shape) == 2
          and len(c.inputs[1].shape) == 2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--target", default="sm_90a")
    args = p.parse_args()
    options = build_modules.options("cuda", args.target)
    for name, patch in VARIANTS.items():
        saved = {key: getattr(*key) for key in patch}
        for (module, attribute), value in patch.items():
            setattr(module, attribute, value)
        folder = args.out / name
        folder.mkdir(parents=True, exist_ok=True)
        manifest = {"backend": "cuda", "target": args.target, "cases": {}}
        for case in DECODE:
            manifest["cases"][case.key] = build_modules.build(case, folder, options)
            print(f"{name}: {case.key}: {manifest['cases'][case.key].get('kernels')} kernels")
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
        for (module, attribute), value in saved.items():
            setattr(module, attribute, value)
    print("cases:", ",".join(c.key for c in DECODE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
