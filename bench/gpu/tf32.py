"""f32 models and a 4096^3 matmul on an NVIDIA GPU in pyree's three ``--pyree-cuda-f32-matmul``
modes (strict, tf32, 3xtf32) against PyTorch with TF32 on (its default for convolutions:
``torch.backends.cudnn.allow_tf32``, plus ``torch.backends.cuda.matmul.allow_tf32``) and off
(issue 31, item 2).

    python3 bench/gpu/tf32.py build OUT_DIR [--target sm_90a]     # CPU build machine
    python3 bench/gpu/tf32.py run OUT_DIR [--json OUT.json] [--kernels N]  # GPU host

``build`` imports ResNet-18, MobileNet v2 (torchvision, random weights from a seed) and an
encoder block (tests/models/definitions.py's ``gpt2_block``: attention + MLP, width 256, 128
tokens) and compiles each for cuda in the three modes, its weights exported and recorded as
a recipe (bench/models/zoo_weights.py: the GPU host writes the archive again from the seeded
model, so only the modules travel); the matmul likewise. ``run`` rebuilds the models, checks
their weights checksum, and for each: PyTorch's CUDA-graph replay timed with CUDA events with
TF32 off and on; pyree's time per call with calls queued back to back on its CUDA graph
(gpu_timing.pyree_ms, the measure bench/models/bench_gpu.py sets beside a graph replay);
medians of many runs; and each one's error against the model in float64 on the GPU,
``max |out - ref| / max |ref|``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "bench" / "models"), str(ROOT / "bench"),
                str(ROOT / "tests" / "codegen" / "cuda"), str(ROOT / "tests"),
                str(ROOT / "tests" / "drivers" / "cuda")]
MODES = ("strict", "tf32", "3xtf32")
MODELS = ("resnet18", "mobilenet_v2", "gpt2_block")
MATMUL = 4096
REPS = 200
KERNELS = 0  # --kernels: the longest kernels of each pyree module to print (CUPTI times)


def _model(name: str):
    import definitions
    factory, _, _, function = definitions.MODELS[name]
    return factory().eval(), definitions.example_input(name, seed=1), function


def build(out: Path, target: str, models=MODELS) -> None:
    import definitions
    import zoo_weights
    from cases import matmul
    from pyree.compiler import CompileOptions, compile_str, import_torch
    out.mkdir(parents=True, exist_ok=True)
    manifest = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            model, x, function = _model(name)
            mlir = import_torch(model, x, function_name=function)
            archive = Path(tmp) / f"{name}.irpa"
            options = CompileOptions(target_backends=["cuda"], cuda_target=target,
                                     export_parameters=str(archive))
            for mode in MODES:
                vmfb = compile_str(mlir, options, extra_args=[f"--pyree-cuda-f32-matmul={mode}"])
                (out / f"{name}.{mode}.vmfb").write_bytes(vmfb)
            manifest[name] = {"function": function, "checksum": definitions.weights_checksum(model),
                              "keys": zoo_weights.key_names(archive, model)}
            print(name, "built", flush=True)
    from tf32_cases import matmul as weight_matmul
    options = CompileOptions(target_backends=["cuda"], cuda_target=target)
    linear = weight_matmul(MATMUL, MATMUL, MATMUL, weight_nk=True).mlir  # b as [n, k]
    for mode in MODES:
        for name, mlir in (("matmul", matmul(MATMUL, MATMUL, MATMUL, "f32")), ("linear", linear)):
            (out / f"{name}.{mode}.vmfb").write_bytes(compile_str(
                mlir, options, extra_args=[f"--pyree-cuda-f32-matmul={mode}"]))
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _set_torch_tf32(on: bool) -> None:
    import torch
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def _graph_ms(fn) -> float:
    """PyTorch's ``fn`` captured in a CUDA graph (after warm-up on a side stream), replays timed
    by CUDA events, median."""
    import torch
    from gpu_timing import torch_ms
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        fn()
    return torch_ms(graph.replay, reps=REPS, warmup=10)


def _error(got, ref: np.ndarray) -> float:
    got = np.asarray(got, np.float64)
    return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))


def _measure(name: str, torch_fn, torch_out, pyree_call, ref: np.ndarray, folder: Path) -> dict:
    """One row: PyTorch off/on and pyree's three modes, time and error each."""
    from gpu_timing import pyree_ms
    row = {}
    for on in (False, True):
        _set_torch_tf32(on)
        key = "torch_tf32" if on else "torch_f32"
        row[key] = {"ms": _graph_ms(torch_fn), "err": _error(torch_out(), ref)}
    _set_torch_tf32(False)
    for mode in MODES:
        fn = pyree_call(folder / f"{name}.{mode}.vmfb")
        got = fn().to_host()
        row[mode] = {"ms": pyree_ms(fn, reps=REPS, warmup=10)[1], "err": _error(got, ref)}
        if KERNELS:
            _print_kernels(f"{name} {mode}", fn)
    return row


def _print_kernels(title: str, fn) -> None:
    """``fn``'s kernels by GPU time (CUPTI, bench/models/profile_kernels.py), the longest
    ``KERNELS`` of them: where a mode gains or loses against another, layer by layer."""
    from profile_kernels import kernel_times
    times = kernel_times(lambda: fn().to_host(), 20)
    total = sum(times.values())
    print(f"-- {title}: {len(times)} kernels, {total:.1f} us", flush=True)
    for kernel, us in sorted(times.items(), key=lambda kv: -kv[1])[:KERNELS]:
        print(f"   {us:8.2f} us  {kernel[:110]}", flush=True)


def _model_row(name: str, info: dict, folder: Path, params: Path) -> dict:
    import definitions
    import pyree.runtime as rt
    import torch
    import zoo_weights
    model, x, function = _model(name)
    checksum = definitions.weights_checksum(model)
    if abs(checksum - info["checksum"]) > 1e-6 * info["checksum"]:
        raise SystemExit(f"{name}: weights differ from the build host's (checksum {checksum} "
                         f"against {info['checksum']})")
    archive = params / f"{name}.irpa"
    zoo_weights.write_archive(archive, model, info["keys"])
    with torch.no_grad():
        ref = model.double().cuda()(x.double().cuda()).cpu().numpy()
        model = model.float().cuda()
    xg = x.cuda()

    def torch_out():
        with torch.no_grad():
            return model(xg).cpu().numpy()

    def pyree_call(path: Path):
        module = rt.load_module(path, device="cuda", parameters=[str(archive)])
        f, xd = module[info["function"]], rt.asdevicearray(module.device, x.numpy())
        return lambda: f(xd)
    return _measure(name, lambda: model(xg), torch_out, pyree_call, ref, folder)


def _matmul_row(folder: Path, name: str = "matmul") -> dict:
    """a @ b, or for ``linear`` a @ b^T (b a linear layer's [n, k] weight, PyTorch's F.linear)."""
    import pyree.runtime as rt
    import torch
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((MATMUL, MATMUL)).astype(np.float32) for _ in range(2))
    ag, bg = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    right = bg.t() if name == "linear" else bg
    ref = (ag.double() @ right.double()).cpu().numpy()

    def pyree_call(path: Path):
        module = rt.load_module(path, device="cuda")
        f = module[module.function_names[0]]
        ad, bd = rt.asdevicearray(module.device, a), rt.asdevicearray(module.device, b)
        return lambda: f(ad, bd)
    return _measure(name, lambda: ag @ right, lambda: (ag @ right).cpu().numpy(), pyree_call, ref,
                    folder)


def run(folder: Path, json_out: str) -> None:
    import torch
    manifest = json.loads((folder / "manifest.json").read_text())
    rows = {}
    with tempfile.TemporaryDirectory() as params:
        for name, info in manifest.items():
            rows[name] = _model_row(name, info, folder, Path(params))
            print(name, json.dumps(rows[name]), flush=True)
    rows[f"matmul_{MATMUL}"] = _matmul_row(folder)
    if (folder / "linear.strict.vmfb").exists():
        rows[f"linear_{MATMUL}"] = _matmul_row(folder, "linear")
    print(f"\n{torch.cuda.get_device_name()}; ms per call (PyTorch: CUDA-graph replay; pyree: "
          f"calls queued on its CUDA graph); speed-up over PyTorch TF32; error vs float64")
    cols = ("torch_f32", "torch_tf32", *MODES)
    print(f"{'':16s}" + "".join(f"{c:>22s}" for c in cols))
    for name, row in rows.items():
        base = row["torch_tf32"]["ms"]
        cells = [f"{row[c]['ms']:7.3f} {base / row[c]['ms']:4.2f}x {row[c]['err']:7.1e}" for c in cols]
        print(f"{name:16s}" + "".join(f"{c:>22s}" for c in cells))
    flops = 2 * MATMUL ** 3
    for name in ("matmul", "linear"):
        if f"{name}_{MATMUL}" in rows:
            mm = rows[f"{name}_{MATMUL}"]
            print(f"{name} TFLOP/s: " + ", ".join(f"{c} {flops / mm[c]['ms'] / 1e9:.0f}" for c in cols))
    if json_out:
        Path(json_out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows},
                                             indent=1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("build", "run"))
    p.add_argument("folder", type=Path)
    p.add_argument("--target", default="sm_90a")
    p.add_argument("--json", default="")
    p.add_argument("--models", default=",".join(MODELS), help="the models to build (none: '')")
    p.add_argument("--kernels", type=int, default=0, help="run: print each module's N longest kernels")
    args = p.parse_args()
    global KERNELS
    KERNELS = args.kernels
    if args.what == "build":
        build(args.folder, args.target, [m for m in args.models.split(",") if m])
    else:
        run(args.folder, args.json)


if __name__ == "__main__":
    main()
