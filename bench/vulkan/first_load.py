"""Vulkan first load (issue 31, item 4): from ``load_module`` to the first result, in fresh
processes, with the on-disk pipeline cache empty and warm.

    python3 bench/vulkan/first_load.py MODULE.vulkan-spirv.vmfb ... [--runs 3] [--device vulkan]

Builds nothing: the modules were compiled elsewhere (e.g. build/zoo/*.vulkan-spirv.vmfb, whose
weights are external: a module's parameters get random values of their types and shapes here,
written once to a .safetensors beside the results). Per module and run, each a new process:

- ``cold 1 thread``: an empty pipeline-cache folder, PYREE_VULKAN_PIPELINE_THREADS=1 (one
  vkCreateComputePipelines call with every pipeline);
- ``cold N threads``: an empty folder, one thread per CPU (one call per pipeline);
- ``warm``: the folder the cold run filled;
- ``driver cache``: pyree's cache off, the driver's own disk cache (NVIDIA's
  __GL_SHADER_DISK_CACHE, Mesa's shader cache) on and warmed by one untimed process first.

The driver's own cache is off in every other row, so a warm row shows pyree's cache alone.
Each process (first_load_child.py) times ``load_module`` and each phase of it apart (device
start, module read and its checks, executable checks and pipelines, constants, functions),
the first call up to its result in numpy, and what came before (process start, imports);
"to result" is ``load_module`` to the first result, "total" the same from the parent's spawn,
"vk create" the driver's own pipeline-creation time (creation feedback). Results must equal
the first run's bit for bit. Prints one table of medians; ``--json FILE`` keeps every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = Path(__file__).with_name("first_load_child.py")

# The table's columns: heading, and the phases (first_load_child.py) whose seconds it sums.
COLUMNS = [("to result", ["to_result"]), ("spawn", ["spawn"]),
           ("numpy", ["import_numpy"]), ("rt import", ["import_runtime"]),
           ("vk import", ["import_driver"]),
           ("device", ["device"]), ("instance", ["instance"]), ("create", ["create"]),
           ("read", ["read"]), ("digest", ["digest"]), ("bounds", ["bounds"]),
           ("unpack", ["unpack"]), ("verify", ["verify"]), ("precheck", ["precheck"]),
           ("exe", ["executable"]),
           ("check", ["check"]), ("pipes", ["pipelines"]), ("consts", ["constants"]),
           ("params", ["parameters"]), ("funcs", ["functions"]), ("load", ["load"]),
           ("1st call", ["first_call"]), ("total", ["total"])]


def column(row: dict, phases: list[str]) -> float:
    """A column's milliseconds in one sample (a phase that never ran is 0)."""
    return sum(row.get(f"{p}_s", 0.0) for p in phases) * 1e3


VARIANTS = ("cold 1 thread", "cold N threads", "warm", "driver cache")


def argument_shapes(module_path: Path) -> list[dict]:
    """The first function's argument shapes and dtypes (static shapes only)."""
    import numpy as np
    from pyree.runtime.element_types import NAMES
    from pyree.runtime.vm.loaded_module import open_module
    function = open_module(module_path).tree.functions[0]
    out = []
    for arg in function.arguments:
        dims = [int(d) for d in arg.dims]
        if any(d < 0 for d in dims):
            sys.exit(f"{module_path}: argument with a dynamic shape; give a module with static "
                     "shapes")
        out.append({"shape": dims, "dtype": np.dtype(_NUMPY[NAMES[arg.elementType]]).str})
    return out


_NUMPY = {"f32": "float32", "f16": "float16", "f64": "float64", "i32": "int32", "i64": "int64",
          "i8": "int8", "ui8": "uint8", "i1": "bool"}


def random_parameters(module_path: Path, path: Path) -> bool:
    """Writes random values for the module's external parameters (one scope, safetensors);
    False when it has none."""
    import numpy as np
    from pyree.runtime.element_types import NAMES
    from pyree.runtime.vm.loaded_module import open_module
    header, blobs, offset = {}, [], 0
    rng = np.random.default_rng(0)
    for constant in open_module(module_path).tree.constants:
        p = constant.parameter
        if p is None:
            continue
        name, dims = NAMES[constant.type.elementType], [int(d) for d in constant.type.dims]
        if name not in ("f32", "f16") or p.scope:
            sys.exit(f"{module_path}: parameter {p.key!r} is {name} in scope {p.scope!r}; this "
                     "bench writes f32/f16 parameters of the empty scope")
        # positive and small: batch-norm variances stay valid and activations finite
        data = rng.uniform(0.01, 0.1, int(np.prod(dims))).astype(_NUMPY[name]).tobytes()
        header[p.key] = {"dtype": name.upper(), "shape": dims,
                         "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if not header:
        return False
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for blob in blobs:
            f.write(blob)
    return True


def sample(module: Path, device: str, params: str, shapes: list, out: Path, env: dict) -> dict:
    proc = subprocess.run([sys.executable, str(CHILD), str(module), device, params, str(out),
                           json.dumps(shapes), repr(time.time())], capture_output=True, text=True,
                          env=env)
    if proc.returncode:
        sys.exit(f"{module.name}: the load failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def environment(pipeline_cache: str, threads: str | None, driver_cache: str | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYREE_VULKAN_PIPELINE_THREADS", "PYREE_VULKAN_PIPELINE_CACHE")}
    env["PYREE_VULKAN_PIPELINE_CACHE"] = pipeline_cache
    if threads:
        env["PYREE_VULKAN_PIPELINE_THREADS"] = threads
    if driver_cache is None:   # the driver's own disk caches off
        env.update(__GL_SHADER_DISK_CACHE="0", MESA_SHADER_CACHE_DISABLE="true")
    else:
        env.update(__GL_SHADER_DISK_CACHE="1", __GL_SHADER_DISK_CACHE_PATH=driver_cache,
                   __GL_SHADER_DISK_CACHE_SKIP_CLEANUP="1", MESA_SHADER_CACHE_DIR=driver_cache,
                   MESA_SHADER_CACHE_DISABLE="false")
    return env


def same_results(a: Path, b: Path) -> bool:
    import numpy as np
    with np.load(a) as x, np.load(b) as y:
        return x.files == y.files and all(
            np.array_equal(x[k], y[k], equal_nan=True) for k in x.files)


def bench(module: Path, device: str, runs: int, work: Path) -> dict[str, list[dict]]:
    shapes = argument_shapes(module)
    params_path = work / f"{module.stem}.safetensors"
    params = str(params_path) if random_parameters(module, params_path) else ""
    samples: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    reference = work / f"{module.stem}.reference.npz"
    for _ in range(runs):
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            scratch = Path(scratch)
            pyree_cache, driver_cache = scratch / "pyree", scratch / "driver"
            cold1 = scratch / "cold1"
            plan = [("cold 1 thread", environment(str(cold1), "1", None)),
                    ("cold N threads", environment(str(pyree_cache), None, None)),
                    ("warm", environment(str(pyree_cache), None, None))]
            for variant, env in plan:
                out = scratch / f"{len(samples[variant])}.npz"
                samples[variant].append(sample(module, device, params, shapes, out, env))
                if not reference.exists():
                    out.replace(reference)
                elif not same_results(out, reference):
                    sys.exit(f"{module.name}: '{variant}' gave other results than the first run")
            env = environment("off", None, str(driver_cache))
            sample(module, device, params, shapes, scratch / "untimed.npz", env)
            samples["driver cache"].append(
                sample(module, device, params, shapes, scratch / "dc.npz", env))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="vulkan")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    everything = {}
    width = {h: max(len(h), 6) for h, _ in COLUMNS}
    print(f"{'module':20s} {'variant':14s} " + " ".join(f"{h:>{width[h]}s}" for h, _ in COLUMNS)
          + f" {'vk create':>9s}  pipelines hits seeded written  (ms, medians)")
    with tempfile.TemporaryDirectory() as work:
        for module in args.modules:
            samples = bench(module, args.device, args.runs, Path(work))
            everything[module.name] = samples
            for variant, rows in samples.items():
                last = rows[-1]
                cells = [f"{statistics.median(column(r, p) for r in rows):{width[h]}.1f}"
                         for h, p in COLUMNS]
                driver = statistics.median(r["creation_ns"] for r in rows) / 1e6
                print(f"{module.name.split('.')[0][:20]:20s} {variant:14s} {' '.join(cells)} "
                      f"{driver:9.1f}  {last['pipelines']:9d} {last['hits']:4d} "
                      f"{last['seeded']:6d} {last['written']:7d}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
