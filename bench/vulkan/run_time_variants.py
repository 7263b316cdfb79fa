"""Which run-time dim costs a Vulkan matmul its time: one product compiled with every subset of
M, N and K as run-time sizes, each timed at the same call size on one device.

    python bench/vulkan/run_time_variants.py build DIR [--sizes 7x13x5,127x255x129]
    python3 bench/vulkan/run_time_variants.py run DIR          # on the GPU host (device_setup.sh)

Device µs per call from pyree's trace (kernels and fills), median of 5 rounds of 50 calls,
the variants interleaved round by round; each result checked against numpy first.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MATMUL = """func.func @mm(%a: tensor<{ta}>, %b: tensor<{tb}>) -> tensor<{tc}> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<{ta}>
  %n = tensor.dim %b, %c1 : tensor<{tb}>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty({dims}) : tensor<{tc}>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{tc}>) -> tensor<{tc}>
  %r = linalg.matmul ins(%a, %b : tensor<{ta}>, tensor<{tb}>) outs(%f : tensor<{tc}>) -> tensor<{tc}>
  return %r : tensor<{tc}>
}}
"""
ROUNDS, CALLS = 5, 50


def source(size: tuple[int, int, int], run_time: str) -> str:
    """The product at ``size`` (m, k, n) with the dims named in ``run_time`` ("mkn") as ``?``."""
    m, k, n = (("?" if d in run_time else str(v)) for d, v in zip("mkn", size))
    dims = ", ".join(v for v, d in (("%m", m), ("%n", n)) if d == "?")
    return MATMUL.format(ta=f"{m}x{k}xf32", tb=f"{k}x{n}xf32", tc=f"{m}x{n}xf32", dims=dims)


def variants() -> list[str]:
    return ["".join(c) for r in range(4) for c in itertools.combinations("mkn", r)]


def build(out: Path, sizes: list[tuple[int, int, int]], target: str) -> None:
    from pyree.compiler import CompileOptions, compile_str
    out.mkdir(parents=True, exist_ok=True)
    options = CompileOptions(target_backends=["vulkan-spirv"], vulkan_target=target)
    for size in sizes:
        for v in variants():
            name = f"{'x'.join(map(str, size))}_{v or 'static'}.vmfb"
            (out / name).write_bytes(compile_str(source(size, v), options))
    (out / "sizes.json").write_text(json.dumps(sizes))


def run(folder: Path) -> None:
    import pyree.runtime as rt
    sys.path.insert(0, str(ROOT / "bench" / "gpu"))
    from dynamic_vs_static import traced_kernel_times
    device = rt.get_device("vulkan")
    rng = np.random.default_rng(0)
    for m, k, n in json.loads((folder / "sizes.json").read_text()):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        args = [rt.asdevicearray(device, x) for x in (a, b)]
        calls = {}
        for v in variants():
            module = rt.load_module((folder / f"{m}x{k}x{n}_{v or 'static'}.vmfb").read_bytes(),
                                    device=device)
            got = module["mm"](*args).to_host()
            np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
            calls[v or "static"] = lambda f=module["mm"], xs=args: f(*xs).wait()
        times = {v: [] for v in calls}
        for _ in range(ROUNDS):
            for v, call in calls.items():
                times[v].append(sum(traced_kernel_times(call, CALLS).values()))
        print(f"{m}x{k}x{n}: " + ", ".join(f"{v} {np.median(t):.2f}" for v, t in times.items()),
              flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=["build", "run"])
    p.add_argument("folder", type=Path)
    p.add_argument("--sizes", default="7x13x5,127x255x129,1x256x256,7x256x256")
    p.add_argument("--target", default="", help="--iree-vulkan-target (default: the baseline)")
    args = p.parse_args()
    if args.step == "build":
        build(args.folder, [tuple(map(int, s.split("x"))) for s in args.sizes.split(",")],
              args.target)
    else:
        run(args.folder)


if __name__ == "__main__":
    main()
