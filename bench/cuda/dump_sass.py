"""Disassembles the cubin of each .vmfb given (cuobjdump --dump-sass, on the GPU host) and counts
the matrix instructions: HGMMA is Hopper's wgmma, HMMA the mma.sync path.

    python3 bench/cuda/dump_sass.py OUT_DIR MODULE.vmfb...
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pyree.runtime.module import read_module


def main(out: Path, paths: list[Path]) -> None:
    for path in paths:
        module = read_module(path.read_bytes())
        (exe,) = module.tree.executables
        cubin = out / f"{path.stem}.cubin"
        cubin.write_bytes(bytes(module.bytes_of(exe.cuda.cubin)))
        sass = subprocess.run(["cuobjdump", "--dump-sass", str(cubin)], capture_output=True,
                              text=True, check=True).stdout
        (out / f"{path.stem}.sass").write_text(sass)
        counts = {op: len(re.findall(rf"\b{op}\.", sass)) for op in ("HGMMA", "HMMA", "LDSM", "FFMA")}
        print(f"{path.name} ({exe.cuda.cubinArch}): {counts}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]])
