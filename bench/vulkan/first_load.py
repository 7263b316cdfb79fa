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
Each process times ``load_module`` (and inside it the SPIR-V checks and the pipelines) and
the first call up to its result in numpy; results must equal the first run's bit for bit.
Prints medians; ``--json FILE`` keeps every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import pyree.runtime as rt
from pyree.hal.vulkan import executable as E
from pyree.runtime.hal.ffi import ffi
spent = {"check_s": 0.0, "pipelines_s": 0.0}

def timed(name, method):
    def wrapper(*args):
        start = time.perf_counter()
        try:
            return method(*args)
        finally:
            spent[name] += time.perf_counter() - start
    return wrapper

E.ExecutableCache._check = timed("check_s", E.ExecutableCache._check)
E.ExecutableCache._cached_pipelines = timed("pipelines_s",
                                             E.ExecutableCache._cached_pipelines)
module_path, device, params, out = sys.argv[1:5]
t1 = time.perf_counter()
module = rt.load_module(module_path, device=device, parameters=[params] if params else None)
t2 = time.perf_counter()
function = module[module.function_names[0]]
rng = np.random.default_rng(7)
inputs = [rng.uniform(0, 1, a["shape"]).astype(a["dtype"]) for a in json.loads(sys.argv[5])]
results = function(*inputs)
results = results if isinstance(results, tuple) else (results,)
host = [r.to_host() for r in results]
t3 = time.perf_counter()
np.savez(out, *host)
stats = ffi.from_handle(module.device._vt.self).executables.stats
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_call_s": t3 - t2, **spent,
                  **stats}))
"""

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
    proc = subprocess.run([sys.executable, "-c", CHILD, str(module), device, params, str(out),
                           json.dumps(shapes)], capture_output=True, text=True, env=env)
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
    print(f"{'module':34s} {'variant':15s} {'to result':>9s} {'load':>7s} {'check':>7s} "
          f"{'pipes':>7s} {'1st call':>8s} {'driver':>7s}  pipelines hits seeded written  (ms)")
    with tempfile.TemporaryDirectory() as work:
        for module in args.modules:
            samples = bench(module, args.device, args.runs, Path(work))
            everything[module.name] = samples
            for variant, rows in samples.items():
                med = {k: statistics.median(r[f"{k}_s"] for r in rows) * 1e3
                       for k in ("load", "check", "pipelines", "first_call")}
                driver = statistics.median(r["creation_ns"] for r in rows) / 1e6
                last = rows[-1]
                print(f"{module.name[:34]:34s} {variant:15s} "
                      f"{statistics.median(r['load_s'] + r['first_call_s'] for r in rows) * 1e3:9.1f} "
                      f"{med['load']:7.1f} {med['check']:7.1f} {med['pipelines']:7.1f} "
                      f"{med['first_call']:8.1f} {driver:7.1f}  {last['pipelines']:9d} "
                      f"{last['hits']:4d} {last['seeded']:6d} {last['written']:7d}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
