"""Kernels with run-time sizes against the same program compiled for one size, and PyTorch, on
an NVIDIA GPU: matmul, softmax, layernorm, an elementwise op, a convolution (dynamic batch) and a
transformer encoder block (dynamic sequence) at five sizes each, odd ones among them; and f16
linear layers whose rows alone are run-time (``LINEAR``: a prefill's, on tensor cores).

    python3 bench/gpu/dynamic_vs_static.py build OUT_DIR [--target sm_90|hopper-h100-linux]
    python3 bench/gpu/dynamic_vs_static.py run OUT_DIR [--mode graph]       # GPU host
    (both take --ops a,b to do only those ops, and --backend vulkan-spirv for Vulkan)

``build`` writes each op once with run-time dims and once per size with static ones (softmax,
layernorm, conv and block imported from PyTorch with one dynamic dim, ``DYNAMIC_DIM``), and
compiles them for cuda.
``run`` loads them on the GPU, checks every output against PyTorch in float64 (a wrong result is
marked WRONG and gets no speed), and times each with fresh device-resident inputs (a pool of
``POOL`` input sets, rotated): GPU kernel time per call through CUPTI (torch.profiler, which sees
pyree's launches and PyTorch's alike: bench/models/profile_kernels.py), median of ``CALLS``
calls, for the dynamic module, the static one and PyTorch eager; PyTorch with CUDA events too
(bench/gpu_timing.py). On Vulkan (``--backend vulkan-spirv``), which CUPTI does not see, a
module's device time is what pyree's trace reads from the driver's timestamps around each
command (``rt.trace``: the same for both modules). The host columns are the median wall time
of a call and its wait, and the median time until a call returns (its wait not timed: the
host's own work). Prints a table; ``--json`` writes the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
POOL = 4
CALLS = 50
SIZES = {
    "elementwise": [(1, 1), (7, 13), (257, 1031), (1031, 4099), (4096, 4096)],
    "matmul": [(1, 1, 1), (7, 13, 5), (127, 255, 129), (509, 1021, 257), (1024, 1024, 1024)],
    "softmax": [(1, 1001), (7, 1001), (131, 1001), (1031, 1001), (8191, 1001)],
    "layernorm": [(1, 1023), (7, 1023), (131, 1023), (1031, 1023), (8191, 1023)],
    "conv": [(1, 32, 28, 28), (3, 32, 28, 28), (8, 32, 28, 28), (17, 32, 28, 28), (64, 32, 28, 28)],
    "block": [(1, 1, 256), (1, 7, 256), (1, 64, 256), (1, 129, 256), (1, 512, 256)],
    "block_f16": [(1, 1, 256), (1, 7, 256), (1, 64, 256), (1, 129, 256), (1, 512, 256)],
    # (m, k, n): GPT-2's qkv projection and LLaMA-7B's gate projection, m a prompt's length
    "linear_f16": [(1, 768, 2304), (7, 768, 2304), (128, 768, 2304), (333, 768, 2304),
                   (1024, 768, 2304), (2047, 768, 2304)],
    "linear_f16_wide": [(128, 4096, 11008), (509, 4096, 11008), (2048, 4096, 11008)],
    # GPT-2's other linears at short prompts, where the static module splits K
    # (flow/split_reduction.py) and the dynamic one cannot
    "linear_f16_proj": [(64, 768, 768), (128, 768, 768), (256, 768, 768)],
    "linear_f16_fc1": [(64, 768, 3072), (128, 768, 3072), (256, 768, 3072)],
    "linear_f16_fc2": [(64, 3072, 768), (128, 3072, 768), (256, 3072, 768)],
}
LINEAR = ("linear_f16", "linear_f16_wide", "linear_f16_proj", "linear_f16_fc1",
          "linear_f16_fc2")  # f16 operands, f32 results, only m at run time
DYNAMIC_DIM = {"conv": 0, "softmax": 0, "layernorm": 0, "block": 1, "block_f16": 1}
HALF = (*LINEAR, "block_f16")  # f16 inputs
# The row of softmax and layernorm is static in their dynamic module too: torch.export guards a
# run-time row with comparisons of sizes (arith.cmpi), which pyree does not take yet.

ELEMENTWISE = """
func.func @f(%a: tensor<{t}>, %b: tensor<{t}>) -> tensor<{t}> {{{dims}
  %e = tensor.empty({m_n}) : tensor<{t}>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
      affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : tensor<{t}>, tensor<{t}>) outs(%e : tensor<{t}>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %z = arith.mulf %x, %y : f32
    %w = arith.addf %z, %x : f32
    linalg.yield %w : f32
  }} -> tensor<{t}>
  return %r : tensor<{t}>
}}
"""
MATMUL = """
func.func @mm(%a: tensor<{ta}>, %b: tensor<{tb}>) -> tensor<{tc}> {{{dims}
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty({m_n}) : tensor<{tc}>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{tc}>) -> tensor<{tc}>
  %r = linalg.matmul ins(%a, %b : tensor<{ta}>, tensor<{tb}>) outs(%f : tensor<{tc}>) -> tensor<{tc}>
  return %r : tensor<{tc}>
}}
"""
DIMS = """
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<{ta}>
  %n = tensor.dim %b, %c1 : tensor<{tb}>"""


def shapes(op: str, size: tuple) -> list[tuple]:
    """The argument shapes of ``op`` at ``size``."""
    if op == "matmul" or op in LINEAR:
        m, k, n = size
        return [(m, k), (k, n)]
    return [size, size] if op == "elementwise" else [size]


def mlir(op: str, size: tuple | None) -> str:
    """``op`` at ``size`` (static), or with every dim run-time (``size`` None; a linear op's
    rows alone)."""
    if op in LINEAR:
        m, k, n = size or ("?",) + SIZES[op][0][1:]
        dims = "" if size else "\n  %c0 = arith.constant 0 : index\n  %m = tensor.dim %a, %c0 : " \
            f"tensor<?x{k}xf16>"
        return MATMUL.format(ta=f"{m}x{k}xf16", tb=f"{k}x{n}xf16", tc=f"{m}x{n}xf32", dims=dims,
                             m_n="" if size else "%m")

    def ty(shape):
        return "x".join("?" if size is None else str(d) for d in shape) + "xf32"
    ta, tb = (ty(s) for s in shapes(op, size or (1,) * len(SIZES[op][0])))
    dims = DIMS.format(ta=ta, tb=tb) if size is None else ""
    m_n = "%m, %n" if size is None else ""
    if op == "elementwise":
        return ELEMENTWISE.format(t=ta, dims=dims, m_n=m_n)
    tc = ty((size[0], size[2]) if size else (1, 1))
    return MATMUL.format(ta=ta, tb=tb, tc=tc, dims=dims, m_n=m_n)


def program(op: str):
    """``op`` as a torch module: the reference of every op, and what softmax and layernorm are
    imported from."""
    import torch
    torch.manual_seed(0)  # the same weights where it is built and where it runs
    if op == "conv":
        return torch.nn.Sequential(torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU()).eval()
    if op in ("block", "block_f16"):
        block = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True).eval()
        return block.half() if op == "block_f16" else block
    functions = {"elementwise": lambda a, b: a * b + a, "matmul": lambda a, b: a @ b,
                 **{op: lambda a, b: a @ b for op in LINEAR},
                 "softmax": lambda a: torch.softmax(a, -1),
                 "layernorm": lambda a: torch.nn.functional.layer_norm(a, (a.shape[-1],))}

    class Unary(torch.nn.Module):
        def forward(self, a):
            return functions[op](a)

    class Binary(torch.nn.Module):
        def forward(self, a, b):
            return functions[op](a, b)

    return (Binary if len(shapes(op, SIZES[op][0])) == 2 else Unary)().eval()


def source(op: str, size: tuple | None) -> str:
    """MLIR of ``op``: written here (elementwise, matmul), or imported from PyTorch with one
    dynamic dim (``DYNAMIC_DIM``)."""
    if op in ("elementwise", "matmul", *LINEAR):
        return mlir(op, size)
    import torch
    from pyree.compiler import import_torch
    example = torch.randn(*(size or SIZES[op][2]))
    example = example.half() if op in HALF else example
    model = program(op)
    name = "src" if op.startswith("block") else "input" if op == "conv" else "a"
    dims = None if size else {name: {DYNAMIC_DIM[op]: torch.export.Dim("n", min=1, max=1 << 14)}}
    return import_torch(model, example, dynamic_shapes=dims)


def build(out: Path, target: str, ops: list[str], backend: str = "cuda") -> None:
    from pyree.compiler import CompileOptions, compile_str
    out.mkdir(parents=True, exist_ok=True)
    options = CompileOptions(target_backends=[backend], cuda_target=target) if backend == "cuda" \
        else CompileOptions(target_backends=[backend], vulkan_target=target)
    for op, sizes in SIZES.items():
        if op not in ops:
            continue
        (out / f"{op}_dynamic.vmfb").write_bytes(compile_str(source(op, None), options))
        for size in sizes:
            name = f"{op}_{'x'.join(map(str, size))}.vmfb"
            (out / name).write_bytes(compile_str(source(op, size), options))
        print(f"built {op}", flush=True)


def traced_kernel_times(run, calls: int) -> dict[str, float]:
    """Device microseconds of each kernel (and copy, fill) per call, from pyree's trace of
    ``calls`` calls of ``run`` (a pyree call and its wait), after 3 untimed ones."""
    import pyree.runtime as rt
    for _ in range(3):
        run()
    with rt.trace() as t:
        for _ in range(calls):
            run()
    t.summary()  # reads every device time
    per_name: dict[str, float] = {}
    for e in t.events:
        if e.lane[0] != "host":
            per_name[e.name] = per_name.get(e.name, 0.0) + (e.end_ns - e.begin_ns) / 1e3
    return {name: total / calls for name, total in per_name.items()}


def submit_us(fn, pool: list, calls: int) -> float:
    """Median microseconds until a call of ``fn`` returns, its wait left out of the time: the
    host's own work per call (sizes, buffers, command recording and submission), which the
    wall time of a call and its wait (``host_us``) mixes with the device's."""
    import time
    times = []
    for turn in range(calls + 3):
        args = pool[turn % len(pool)]
        begin = time.perf_counter_ns()
        result = fn(*args)
        times.append((time.perf_counter_ns() - begin) / 1e3)
        result.wait()
    return float(np.median(times[3:]))


def host_us(run, calls: int) -> float:
    """Median wall microseconds of ``run`` (a call and its wait), after 3 untimed ones."""
    import time
    for _ in range(3):
        run()
    times = []
    for _ in range(calls):
        begin = time.perf_counter_ns()
        run()
        times.append((time.perf_counter_ns() - begin) / 1e3)
    return float(np.median(times))


def run(folder: Path, mode: str, json_out: str, ops: list[str], kernels: bool = False,
        backend: str = "cuda") -> None:
    import pyree.runtime as rt
    import torch
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench" / "models")]
    from gpu_timing import torch_ms
    from profile_kernels import kernel_times, table
    torch.backends.cuda.matmul.allow_tf32 = False
    vulkan = backend == "vulkan-spirv"
    device = rt.get_device("vulkan" if vulkan else f"cuda://0?command_buffer={mode}")
    times_of = traced_kernel_times if vulkan else kernel_times
    rng = np.random.default_rng(0)
    rows = []
    for op, sizes in SIZES.items():
        if op not in ops:
            continue
        model = program(op).to("cuda")
        dtype = np.float16 if op in HALF else np.float32
        dynamic = rt.load_module((folder / f"{op}_dynamic.vmfb").read_bytes(), device=device)
        for size in sizes:
            static = rt.load_module((folder / f"{op}_{'x'.join(map(str, size))}.vmfb").read_bytes(),
                                    device=device)
            pool = [[rng.standard_normal(s, dtype=np.float32).astype(dtype) for s in shapes(op, size)]
                    for _ in range(POOL)]
            on_torch = [[torch.from_numpy(a).cuda() for a in args] for args in pool]
            row = {"op": op, "size": "x".join(map(str, size))}
            for label, module in (("dynamic", dynamic), ("static", static)):
                fn = module[module.function_names[0]]
                args = [[rt.asdevicearray(device, a) for a in inputs] for inputs in pool]
                wrong = max(_error(fn(*a).to_host(), model, t) for a, t in zip(args, on_torch))
                row[f"{label}_err"] = wrong
                # an f16 block's result is f16 (2^-11 a rounding, through a softmax and norms)
                limit = 1e-2 if op == "block_f16" else 1e-4
                call = _rotating(fn, args, wait=True)
                times = {} if wrong > limit else times_of(call, CALLS)
                row[f"{label}_us"] = sum(times.values()) if times else None
                row[f"{label}_host_us"] = host_us(call, CALLS) if times else None
                row[f"{label}_submit_us"] = submit_us(fn, args, CALLS) if times else None
                row[f"{label}_kernels"] = times
                if kernels and times:
                    table(f"{op} {row['size']} {label}", times)
            with torch.no_grad():
                call = _rotating(model, on_torch)
                row["torch_us"] = sum(kernel_times(call, CALLS).values())
                row["torch_events_us"] = torch_ms(call, reps=CALLS) * 1e3
            rows.append(row)
            print(_line(row), flush=True)
    print(_table(rows))
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=1))


def _rotating(fn, pool: list, wait: bool = False):
    """A call of ``fn`` on the next input set of ``pool`` each time: fresh inputs per run, and
    (``wait``: a pyree call) done when it returns."""
    turn = [0]

    def call():
        turn[0] += 1
        result = fn(*pool[turn[0] % len(pool)])
        return result.wait() if wait else result
    return call


def _error(got: np.ndarray, model, args) -> float:
    """Relative L2 error of ``got`` against ``model`` in float64 on the GPU."""
    import copy

    import torch
    with torch.no_grad():  # the model's weights in float64 too
        reference = copy.deepcopy(model).double().to(args[0].device)
        want = reference(*[a.double() for a in args]).cpu().numpy()
    if got.shape != want.shape:
        return float("inf")
    scale = np.linalg.norm(want) or 1.0
    return float(np.linalg.norm(got - want) / scale)


def _us(v) -> str:
    return "WRONG" if v is None else f"{v:9.1f}"


def _line(r: dict) -> str:
    ratio = "" if r["dynamic_us"] is None or r["static_us"] is None \
        else f"{r['dynamic_us'] / r['static_us']:6.2f}"
    return (f"| {r['op']:11} | {r['size']:14} | {_us(r['dynamic_us'])} | {_us(r['static_us'])} | "
            f"{r['torch_us']:9.1f} | {r['torch_events_us']:9.1f} | {ratio:>6} | "
            f"{_us(r['dynamic_host_us'])} | {_us(r['static_host_us'])} | "
            f"{_us(r['dynamic_submit_us'])} | {_us(r['static_submit_us'])} |")


def _table(rows: list[dict]) -> str:
    head = ("| op          | size           | dynamic us | static us | torch us | torch ev us "
            "| dyn/st | dynamic host us | static host us | dynamic submit us | static submit us |"
            "\n|---|---|---|---|---|---|---|---|---|---|---|")
    return "\n".join([head, *(_line(r) for r in rows)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("build", "run"))
    p.add_argument("folder", type=Path)
    p.add_argument("--target", help="cuda's (default sm_90) or vulkan-spirv's "
                   "(--iree-vulkan-target, e.g. hopper-h100-linux; default the baseline)")
    p.add_argument("--mode", default="graph", choices=("direct", "stream", "graph"))
    p.add_argument("--json", default="")
    p.add_argument("--ops", default=",".join(SIZES), help="comma-separated ops of SIZES")
    p.add_argument("--kernels", action="store_true", help="print each module's kernel times")
    p.add_argument("--backend", default="cuda", choices=("cuda", "vulkan-spirv"))
    args = p.parse_args()
    ops = args.ops.split(",")
    if args.command == "build":
        target = args.target or ("sm_90" if args.backend == "cuda" else "")
        build(args.folder, target, ops, args.backend)
    else:
        run(args.folder, args.mode, args.json, ops, args.kernels, args.backend)


if __name__ == "__main__":
    main()
