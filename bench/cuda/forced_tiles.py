"""One contraction case of bench/kernels compiled with each wgmma tile width forced, to compare
them on the GPU host with bench/kernels/run_suite.py (each variant is a suite "case" folder):

    python3 bench/cuda/wgmma_tiles.py OUT_DIR CASE_REGEX

writes OUT_DIR/n<width>/ (a module and manifest per width, as bench/kernels/build_modules.py does).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(out: Path, cases: str) -> None:
    for width in (256, 128, 64):
        code = (f"import pyree.compiler.codegen.cuda.matmul_wgmma as W; "
                f"W.TILES = tuple(t for t in W.TILES if t.bn == {width}); "
                f"import runpy, sys; sys.argv = ['build', '{out / f'n{width}'}', '--target', 'sm_90a', "
                f"'--cases', '{cases}']; "
                f"runpy.run_path('{ROOT / 'bench/kernels/build_modules.py'}', run_name='__main__')")
        subprocess.run([sys.executable, "-c", code], check=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
