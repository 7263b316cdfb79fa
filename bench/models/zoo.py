"""The torchvision model-zoo sweep (issue 26): every classification model whose fp32 weights are
under ~50 MB (torchvision's own list, tests/models/definitions.py ``zoo_models``), random seeded
weights, batch 1, 224x224, imported with pyree's torch importer and checked against PyTorch.

    python3 bench/models/zoo.py BUILD [--models a,b] [--targets llvm-cpu,cuda,vulkan-spirv]
    python3 bench/models/zoo.py BUILD --device=cuda,vulkan [--models a,b]   (or local-task)

The first form (the build machine; no GPU needed) compiles each model for every target into
``BUILD/<model>.<target>.vmfb`` with its weights exported to ``<params>/<model>.irpa``, runs the
llvm-cpu module on local-task, and records in ``BUILD/manifest.json`` the compile seconds per
target, the error and which ``state_dict`` tensor each archive key holds (zoo_weights.py). The
second form (a GPU host with torch, the runtime and the drivers; not the compiler's xDSL or
llvmlite) rebuilds each model, checks its weights checksum against the manifest, writes the
archive again from the model, and runs the prebuilt modules on those devices. Every run is a
process of its own (zoo_run.py) under ``--limit`` seconds.

The reference is the model in float64 on the CPU; relative error ``||out - ref|| / ||ref||``
must be <= 1e-4. PyTorch's own fp32 error against it is shown beside ours. Any failure (compile
error, crash, wrong answer) is a FAIL row and a non-zero exit: a bug, never a skip.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "models"))
import definitions  # noqa: E402
import zoo_weights  # noqa: E402
from bench_gpu import relative_error  # noqa: E402

TARGETS = ("llvm-cpu", "cuda", "vulkan-spirv")
DEVICE_TARGET = {"local-task": "llvm-cpu", "cuda": "cuda", "vulkan": "vulkan-spirv"}
LIMIT = 1e-4
SIZE = 224


def reference(model: torch.nn.Module, x: torch.Tensor) -> tuple[np.ndarray, float]:
    """(float64 output, PyTorch fp32's relative error against it)."""
    with torch.no_grad():
        fp32 = model(x).numpy()
        ref = model.double()(x.double()).numpy()
    model.float()
    return ref, relative_error(fp32, ref)


def run_module(device: str, module: Path, params: Path, x: np.ndarray, ref: np.ndarray,
               args) -> dict:
    """One module on one device in its own process: its timings and error, or its failure."""
    with tempfile.TemporaryDirectory() as tmp:
        np.save(f"{tmp}/x.npy", x)
        try:
            proc = subprocess.run([sys.executable, str(Path(__file__).with_name("zoo_run.py")),
                                   device, str(module), str(params), f"{tmp}/x.npy",
                                   f"{tmp}/y.npy", str(args.reps)], capture_output=True,
                                  text=True, timeout=args.limit)
        except subprocess.TimeoutExpired:
            return {"fail": f"{device}: no result within {args.limit:.0f} s"}
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            return {"fail": f"{device}: exit {proc.returncode}: {lines[-1] if lines else ''}"}
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["err"] = relative_error(np.load(f"{tmp}/y.npy"), ref)
    if not row["err"] <= LIMIT:
        row["fail"] = f"{device}: relative error {row['err']:.2e} > {LIMIT:.0e}"
    return row


def build(name: str, args, params: Path) -> dict:
    """Compiles ``name`` for every target and runs its llvm-cpu module on local-task."""
    from pyree.compiler import CompileOptions, compile_str, import_torch
    model = definitions.zoo_model(name)
    entry = {"params": definitions.zoo_models(float("inf"))[name],
             "checksum": definitions.weights_checksum(model), "compile_s": {}, "fails": []}
    t0 = time.perf_counter()
    mlir = import_torch(model, definitions.zoo_input(SIZE))
    entry["import_s"] = time.perf_counter() - t0
    archive = params / f"{name}.irpa"
    for target in args.targets.split(","):
        options = CompileOptions(target_backends=[target], cuda_target="sm_90",
                                 vulkan_target="hopper-h100-linux",
                                 export_parameters=str(archive))
        t0 = time.perf_counter()
        try:
            vmfb = compile_str(mlir, options, source_name=f"<torchvision {name}>")
        except Exception as e:  # noqa: BLE001 - every compile failure is a row of the table
            entry["fails"].append(f"{target}: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
            (args.build / f"{name}.{target}.vmfb").unlink(missing_ok=True)  # an older build's
            continue
        entry["compile_s"][target] = time.perf_counter() - t0
        (args.build / f"{name}.{target}.vmfb").write_bytes(vmfb)
    if entry["compile_s"]:
        try:
            entry["keys"] = zoo_weights.key_names(archive, model)
        except ValueError as e:
            entry["fails"].append(f"weights: {e}")
    if "llvm-cpu" in entry["compile_s"] and "keys" in entry:
        x = definitions.zoo_input(SIZE, seed=1)
        ref, entry["torch_err"] = reference(model, x)
        entry["local-task"] = run_module("local-task", args.build / f"{name}.llvm-cpu.vmfb",
                                         archive, x.numpy(), ref, args)
    return entry


def on_devices(name: str, info: dict, args, params: Path) -> dict:
    """Runs ``name``'s prebuilt modules on each of ``args.device``'s devices."""
    model = definitions.zoo_model(name)
    checksum = definitions.weights_checksum(model)
    if abs(checksum - info["checksum"]) > 1e-6 * info["checksum"]:
        return {"fail": f"weights differ from the build host's (checksum {checksum} against "
                        f"{info['checksum']}): torch builds the model differently here"}
    archive = params / f"{name}.irpa"
    zoo_weights.write_archive(archive, model, info["keys"])
    x = definitions.zoo_input(SIZE, seed=1)
    ref, torch_err = reference(model, x)
    rows = {"torch_err": torch_err}
    for device in args.device.split(","):
        module = args.build / f"{name}.{DEVICE_TARGET[device]}.vmfb"
        rows[device] = (run_module(device, module, archive, x.numpy(), ref, args)
                        if module.exists() else {"fail": f"{device}: no module {module.name}"})
    return rows


def fails(entry: dict) -> list[str]:
    found = list(entry.get("fails", []))
    if entry.get("fail"):
        found.append(entry["fail"])
    found += [v["fail"] for v in entry.values() if isinstance(v, dict) and v.get("fail")]
    return found


def progress(name: str, r: dict) -> str:
    """One line per model as it finishes, so that a run cut short still says what it saw."""
    runs = [f"{d} {v['err']:.1e}" + (f" {v['ms']:.2f} ms" if "ms" in v else "")
            for d, v in r.items() if isinstance(v, dict) and "err" in v]
    return f"{name}: {'FAIL' if fails(r) else 'pass'} {', '.join(runs)} {'; '.join(fails(r))}"


def print_table(results: dict, devices: list[str], compiled: list[str]) -> None:
    """A markdown table (BENCHMARKS.md takes it as printed); failures listed under it."""
    heads = ["model", "params (M)", *(f"{t} s" for t in compiled),
             *(f"{d} err" for d in devices), "torch fp32 err", *(f"{d} ms" for d in devices),
             "result"]
    print("| " + " | ".join(heads) + " |\n|" + "---|" * len(heads))
    for name, r in results.items():
        cells = [name, f"{r['params'] / 1e6:.2f}",
                 *(f"{r['compile_s'][t]:.1f}" if t in r.get("compile_s", {}) else "-"
                   for t in compiled),
                 *(f"{r[d]['err']:.1e}" if "err" in r.get(d, {}) else "-" for d in devices),
                 f"{r['torch_err']:.1e}" if "torch_err" in r else "-",
                 *(f"{r[d]['ms']:.2f}" if "ms" in r.get(d, {}) else "-" for d in devices),
                 "FAIL" if fails(r) else "pass"]
        print("| " + " | ".join(cells) + " |")
    failed = {name: fails(r) for name, r in results.items() if fails(r)}
    print(f"\n{len(results) - len(failed)}/{len(results)} models pass")
    for name, why in failed.items():
        for line in why:
            print(f"  {name}: {line}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", type=Path, help="the folder of modules and manifest.json")
    p.add_argument("--models", default="", help="comma-separated (default: every zoo model)")
    p.add_argument("--targets", default=",".join(TARGETS), help="what the build compiles for")
    p.add_argument("--device", default="",
                   help="run BUILD's prebuilt modules on these devices (cuda,vulkan,local-task) "
                        "instead of building them (which runs the llvm-cpu ones on local-task)")
    p.add_argument("--params", type=Path, help="folder of weight archives (default BUILD-params)")
    p.add_argument("--limit", type=float, default=180.0, help="seconds per module run")
    p.add_argument("--reps", type=int, default=10,
                   help="timed calls after the checked one (0: none, e.g. on lavapipe)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    params = args.params or args.build.with_name(args.build.name + "-params")
    params.mkdir(parents=True, exist_ok=True)
    manifest_path = args.build / "manifest.json"
    building = not args.device
    if building:
        args.build.mkdir(parents=True, exist_ok=True)
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    names = args.models.split(",") if args.models else list(
        definitions.zoo_models() if building else manifest)
    results = {}
    for name in names:
        if building:
            results[name] = manifest[name] = build(name, args, params)
            manifest_path.write_text(json.dumps(manifest, indent=1))
        else:
            results[name] = {"params": manifest[name]["params"],
                             **on_devices(name, manifest[name], args, params)}
        print(progress(name, results[name]), flush=True)
    devices = args.device.split(",") if args.device else ["local-task"]
    print_table(results, devices, args.targets.split(",") if building else [])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(fails(r) for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
