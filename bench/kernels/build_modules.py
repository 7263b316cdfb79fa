"""Compiles the cases of cases.py on this CPU-only machine, for a GPU host (or for the CPU smoke run):

    python3 bench/kernels/build_modules.py OUT_DIR [--backend cuda] [--target sm_90a] [--cases RE,..]
                                           [--suite issue11|llm]

Writes ``OUT_DIR/<case key>.vmfb`` and ``OUT_DIR/manifest.json``: per case its name, function,
inputs, the number of kernel launches (dispatch commands) in the compiled function, import and
compile seconds, or the error that stopped it. A failed case stays in the manifest with its error
(and is printed), so the suite reports it instead of losing it; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import pyree.runtime as rt
from pyree.compiler import CompileOptions, compile_str, import_torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cases  # noqa: E402

FUNCTION = "main"
DISPATCH = 0  # CommandKind.dispatch (schemas/module.fbs)


def kernel_launches(vmfb: bytes) -> int:
    """Dispatch commands in the module's function: the kernels one call launches (no loops here)."""
    function = rt.read_module(vmfb).tree.functions[0]
    return sum(c.kind == DISPATCH for c in function.commands or [])


def options(backend: str, target: str) -> CompileOptions:
    if backend == "cuda":
        return CompileOptions(target_backends=["cuda"], cuda_target=target)
    if backend == "vulkan-spirv":
        return CompileOptions(target_backends=[backend], vulkan_target=target)
    return CompileOptions(target_backends=[backend])


def build(case: cases.Case, out: Path, compile_options: CompileOptions) -> dict:
    entry: dict = {"name": case.name, "function": FUNCTION,
                   "inputs": [i.spelling for i in case.inputs]}
    try:
        t0 = time.perf_counter()
        mlir = import_torch(case.module(), *case.make_inputs(0, "cpu"), function_name=FUNCTION)
        entry["import_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        vmfb = compile_str(mlir, compile_options, source_name=f"<{case.key}>")
        entry["compile_s"] = round(time.perf_counter() - t0, 2)
        (out / f"{case.key}.vmfb").write_bytes(vmfb)
        entry["kernels"] = kernel_launches(vmfb)
    except Exception as e:  # noqa: BLE001 -- every failure is recorded, whatever raised it
        stage = "compile" if "import_s" in entry else "import"
        entry["error"] = f"{stage}: {type(e).__name__}: {e}".strip()[:4000]
        traceback.print_exc(limit=3)
    return entry


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--backend", default="cuda", choices=["cuda", "llvm-cpu", "vulkan-spirv"])
    p.add_argument("--target", help="cuda target (default sm_90a: wgmma on H100), or the "
                   "vulkan-spirv target (--iree-vulkan-target, e.g. hopper-h100-linux; default "
                   "the baseline)")
    p.add_argument("--cases", default="", help="comma-separated regexes of case keys (default all)")
    p.add_argument("--suite", default="issue11", choices=sorted(cases.SUITES))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.target is None:
        args.target = "sm_90a" if args.backend == "cuda" else ""
    compile_options = options(args.backend, args.target)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    if manifest.get("backend", args.backend) != args.backend:
        raise SystemExit(f"{args.out} holds {manifest['backend']} modules; use another folder")
    manifest.update(backend=args.backend, target=args.target if args.backend != "llvm-cpu" else "")
    built = manifest.setdefault("cases", {})
    for case in cases.select(args.cases, args.suite):
        (args.out / f"{case.key}.vmfb").unlink(missing_ok=True)  # never leave a stale module
        entry = build(case, args.out, compile_options)
        built[case.key] = entry
        manifest_path.write_text(json.dumps(manifest, indent=1))
        if "error" in entry:
            print(f"FAILED {case.key}: {entry['error'].splitlines()[0]}", flush=True)
        else:
            print(f"built  {case.key}: {entry['kernels']} kernels, import {entry['import_s']} s, "
                  f"compile {entry['compile_s']} s", flush=True)
    failed = [key for key, entry in built.items() if "error" in entry]
    print(f"{len(built) - len(failed)} of {len(built)} cases built; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
