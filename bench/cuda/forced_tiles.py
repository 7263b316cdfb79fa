"""Cases of bench/kernels compiled with one of the compiler's choices forced, to compare the
variants on the GPU host with bench/kernels/run_suite.py (one suite folder per variant):

    python3 bench/cuda/forced_tiles.py wgmma OUT_DIR CASE_REGEX [SUITE]  (OUT_DIR/n256, n224, ... n64)
    python3 bench/cuda/forced_tiles.py simt OUT_DIR CASE_REGEX     (OUT_DIR/t128x128, t128x64, ...)
    python3 bench/cuda/forced_tiles.py rows OUT_DIR CASE_REGEX     (OUT_DIR/rows16)
    python3 bench/cuda/forced_tiles.py simt_f16 OUT_DIR CASE_REGEX (OUT_DIR/simt)
    python3 bench/cuda/forced_tiles.py epilogue OUT_DIR CASE_REGEX (OUT_DIR/unfused)
    python3 bench/cuda/forced_tiles.py wgmma_probe OUT_DIR CASE_REGEX [SUITE] (OUT_DIR/nowgmma, ...)

The SIMT variants include rectangular tiles the chooser does not offer, to see whether any shape
would gain from them. The ``rows`` variant splits a reduction only below 16 outputs instead
of ``split_reduction.FEW_OUTPUTS``: a few long rows then stay one row kernel of one block per row.
``simt_f16`` turns the tensor-core templates off, so f16/bf16 products run on the SIMT tiles.
``epilogue`` keeps elementwise ops with tanh, erf or exp out of a reduction's epilogue (GELU then
runs as its own kernel after the matmul, as in PyTorch).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]



def _patched(module: str, old: str, new: str) -> str:
    """Code that re-executes ``module``'s source with ``old`` replaced by ``new`` (once)."""
    return (f"import inspect, {module} as T; src = inspect.getsource(T); "
            f"assert src.count({old!r}) == 1, {old!r}; "
            f"exec(compile(src.replace({old!r}, {new!r}), T.__file__, 'exec'), T.__dict__)")


# template -> (variant folder, code that restricts the template to that tile)
VARIANTS = {
    "wgmma": [(f"n{w}", "import pyree.compiler.codegen.cuda.matmul_wgmma as T; "
                        f"T.TILES = tuple(t for t in T.TILES if t.bn == {w})") for w in range(256, 63, -32)],
    "simt": [(f"t{bm}x{bn}", "import pyree.compiler.codegen.common.llvm_gpu.matmul as T; "
                             f"T.TILINGS = (T.Tiling({bm}, {bn}, 8, {tm}, {tn}),)")
             for bm, bn, tm, tn in ((128, 128, 8, 8), (128, 64, 8, 4), (64, 128, 4, 8),
                                    (64, 64, 4, 4), (32, 32, 2, 2))],
    "simt_f16": [("simt", "import pyree.compiler.codegen.cuda.matmul_wgmma as W, "
                          "pyree.compiler.codegen.cuda.matmul_mma as M; "
                          "W.plan = M.plan = lambda *args: None")],
    "epilogue": [("unfused", "import pyree.compiler.flow.regions as R, pyree.compiler.kernel as K; "
                             "R._fuse_epilogue = lambda r, c, j, f=R._fuse_epilogue: None if any("
                             "isinstance(e, K.Unary) and e.op in ('tanh', 'erf', 'exp') "
                             "for o in c.outputs for e in K.walk(o.value)) else f(r, c, j)")],
    # Diagnostic probes that leave a part of the wgmma main loop out (wrong results: time them
    # with run_suite.py --time-wrong): its tensor-core work, its cp.async loads after the
    # prologue, its barrier; or wait for each tile's wgmma before the next (wait0).
    "wgmma_probe": [(name, _patched("pyree.compiler.codegen.cuda.matmul_wgmma", old, new))
                    for name, old, new in (
        ("nowgmma", "accs = _wgmma(fn, t.bn, mma_dtype, 0 if b.k_major else 1, da, db, accs)", "pass"),
        ("noloads", 'fn.if_then(fn.op(f"icmp ult i64 {ahead}, {num_k}"),', 'fn.if_then("false",'),
        ("nobarrier", "fn.barrier()\n        stage =", "stage ="),
        ("wait0", "_wait(fn, 1, accs)", "_wait(fn, 0, accs)"))],
    "rows": [(f"rows{n}", "import pyree.compiler.flow.split_reduction as S; "
                          f"S.FEW_OUTPUTS = {n}") for n in (16,)],
}


def main(template: str, out: Path, cases: str, suite: str = "issue11") -> None:
    for name, restrict in VARIANTS[template]:
        code = (f"{restrict}; import runpy, sys; "
                f"sys.argv = ['build', '{out / name}', '--target', 'sm_90a', '--cases', '{cases}', "
                f"'--suite', '{suite}']; "
                f"runpy.run_path('{ROOT / 'bench/kernels/build_modules.py'}', run_name='__main__')")
        subprocess.run([sys.executable, "-c", code])  # a variant the template refuses fails alone


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], *sys.argv[4:5])
