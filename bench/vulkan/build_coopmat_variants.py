"""Builds the GEMM cases of bench/kernels/cases.py once per cooperative-matrix tiling variant
(codegen/spirv/coopmat.py's constants overridden in this process), for a sweep on the GPU host:

    python3 bench/vulkan/build_coopmat_variants.py OUT [--variants NAME,..] [--cases RE,..]

Writes OUT/<variant>/ as bench/kernels/build_modules.py does, for the "gemm" suite and the
"llm" suite's prefill GEMMs; run each with bench/kernels/run_suite.py --device vulkan.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = {   # name: coopmat.py constants
    "base": {},
    "bk64": {"BK": 64},
    "sg2x4": {"SUBGROUPS": (2, 4)},
    "t128x256": {"TILE": (128, 256), "SUBGROUPS": (2, 4)},
    "pad0": {"PAD": 0},
    "skinny128": {"SKINNY_BK": 128, "SMALLEST_HALVED": 32},
    "skinny256": {"SKINNY_BK": 256, "SMALLEST_HALVED": 32},
    "skinny128h16": {"SKINNY_BK": 128, "SMALLEST_HALVED": 16},
    "skinny64h64": {"SKINNY_BK": 64},
}
SUITES = (("gemm", ""), ("llm", "proj_prefill,c_fc_prefill,batch"))

CHILD = """
import runpy, sys
import pyree.compiler.codegen.spirv.coopmat as coopmat
for name, value in {overrides!r}.items():
    assert hasattr(coopmat, name), name
    setattr(coopmat, name, value)
sys.argv = {argv!r}
runpy.run_path({script!r}, run_name="__main__")
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--cases", default="", help="regexes of case keys (default: the suites')")
    args = p.parse_args()
    status = 0
    for name in args.variants.split(","):
        for suite, cases in SUITES:
            argv = ["build_modules.py", str(args.out / name), "--backend", "vulkan-spirv",
                    "--target", "hopper-h100-linux", "--suite", suite,
                    "--cases", args.cases or cases]
            script = str(HERE.parent / "kernels" / "build_modules.py")
            code = CHILD.format(overrides=VARIANTS[name], argv=argv, script=script)
            status |= subprocess.run([sys.executable, "-c", code]).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
