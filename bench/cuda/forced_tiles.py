"""Cases of bench/kernels compiled with each tile of one cuda matmul template forced, to compare
the widths on the GPU host with bench/kernels/run_suite.py (one suite folder per variant):

    python3 bench/cuda/forced_tiles.py wgmma OUT_DIR CASE_REGEX    (OUT_DIR/n256, n128, n64)
    python3 bench/cuda/forced_tiles.py simt OUT_DIR CASE_REGEX     (OUT_DIR/t128, t64, t32)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# template -> (variant folder, code that restricts the template to that tile)
VARIANTS = {
    "wgmma": [(f"n{w}", "import pyree.compiler.codegen.cuda.matmul_wgmma as T; "
                        f"T.TILES = tuple(t for t in T.TILES if t.bn == {w})") for w in (256, 128, 64)],
    "simt": [(f"t{t}", "import pyree.compiler.codegen.cuda.matmul as T; "
                       f"T.TILINGS = tuple(t for t in T.TILINGS if t.bm == {t})") for t in (128, 64, 32)],
}


def main(template: str, out: Path, cases: str) -> None:
    for name, restrict in VARIANTS[template]:
        code = (f"{restrict}; import runpy, sys; "
                f"sys.argv = ['build', '{out / name}', '--target', 'sm_90a', '--cases', '{cases}']; "
                f"runpy.run_path('{ROOT / 'bench/kernels/build_modules.py'}', run_name='__main__')")
        subprocess.run([sys.executable, "-c", code], check=True)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3])
