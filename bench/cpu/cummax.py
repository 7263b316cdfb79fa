"""torch.cummax along rows on local-task against PyTorch's CPU, compile time too (BENCHMARKS.md:
thirty-sixth session, the log-step chain that once took minutes to compile; forty-ninth, the
scans of importers/torch_scans.py).

    python bench/cpu/cummax.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pyree.runtime as rt
import torch
from pyree.compiler import compile_torch

warnings.filterwarnings("ignore")


class CumMax(torch.nn.Module):
    def forward(self, x):
        return torch.cummax(x, 1)


def main() -> None:
    for shape in [(500, 4000), (8, 4000), (500, 64)]:
        x = torch.randn(*shape)
        start = time.perf_counter()
        module = rt.load_module(compile_torch(CumMax(), x), device="local-task")["main"]
        compile_s = time.perf_counter() - start
        args = x.numpy()
        [a.to_host() for a in module(args)]
        pyree, torch_ms = [], []
        for _ in range(5):
            start = time.perf_counter()
            [a.to_host() for a in module(args)]
            pyree.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            CumMax()(x)
            torch_ms.append((time.perf_counter() - start) * 1e3)
        p, t = np.median(pyree), np.median(torch_ms)
        print(f"{shape}: compile {compile_s:.1f} s, pyree {p:.2f} ms, PyTorch {t:.2f} ms ({p / t:.0f}x)")


if __name__ == "__main__":
    main()
