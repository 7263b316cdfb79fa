"""llvm-cpu f32 GEMM kernels alone, A/B across code versions in one timing process (issue 31 item 5).

    python bench/cpu/gemm.py build TAG [--cpu x86-64-v3] [--model resnet18] [--work /tmp/pyree_gemm]
    python bench/cpu/gemm.py time TAG [TAG...] [--threads 1] [--rounds 7] [--only r18] [--work ...]

``build`` compiles the shapes below with the pyree on the path (run it once per worktree or
commit) and stores each shared object under TAG; ``time`` loads every TAG's objects with ctypes
(tests/codegen/llvm_cpu's harness calls, no runtime) and times them in turns per round, so
machine noise hits every version alike. Prints per shape and tag the best call over all rounds
(3 calls a round; on a shared machine noise only adds time), in ms and GFLOP/s, and checks
each result against numpy. One thread is timed in CPU time (``time.thread_time``): on this
shared 2-core VM the wall clock also counts the time other processes hold the core. Shapes: ResNet-18's
conv GEMMs (M x N x K, filter x im2col patches, NCHW), MobileNet v2's largest 1x1 convolutions,
a bias + relu epilogue and square matmuls. With ``--model``, the set is a whole model's distinct
kernels instead (bench/models_cpu.py exports it; built and timed as above, totals weighted by
uses).
"""

from __future__ import annotations

import argparse
import ctypes
import math
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "codegen" / "llvm_cpu"))

# (name, M, N, K, bias + relu)
SHAPES = [
    ("r18 layer1 3x3", 64, 3136, 576, True),
    ("r18 layer2 3x3", 128, 784, 1152, True),
    ("r18 layer3 3x3", 256, 196, 2304, True),
    ("r18 layer4 3x3", 512, 49, 4608, True),
    ("r18 conv1 7x7", 64, 12544, 147, True),
    ("mnv2 1x1 expand", 96, 12544, 16, False),
    ("mnv2 1x1 project", 24, 3136, 144, False),
    ("mnv2 1x1 1280", 1280, 49, 320, True),
    ("square 512", 512, 512, 512, False),
    ("odd 67x131x97", 67, 131, 97, True),
]


def build(tag: str, cpu: str, work: Path, model: str = "") -> None:
    from llvmcpu_harness import Compiled, matmul

    if model:
        kernels, uses = model_kernels(model)
    else:
        kernels, uses = [matmul(M, N, K, bias=epi, relu=epi) for _, M, N, K, epi in SHAPES], None
    compiled = Compiled(kernels, cpu)
    exports = [(compiled.export(k).symbol, compiled.export(k).workgroupCount) for k in range(len(kernels))]
    bindings = [[(b.dtype, tuple(b.shape)) for b in k.bindings] for k in kernels]
    work.mkdir(parents=True, exist_ok=True)
    (work / f"{tag}.pkl").write_bytes(pickle.dumps({"so": compiled.so, "exports": exports, "cpu": cpu,
                                                    "names": [k.name for k in kernels],
                                                    "bindings": bindings, "uses": uses}))
    print(f"{tag}: {len(kernels)} kernels for {cpu}, {len(compiled.so)} bytes")


def model_kernels(name: str):
    """The distinct kernels of model ``name``'s fused program and how often each runs, as
    bench/models_cpu.py's ``--profile`` forms them (no partial-fold split: indicative)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from models_cpu import export
    from pyree.compiler.flow.convolution import rewrite_convolutions
    from pyree.compiler.flow.kernels import KernelTable, outline
    from pyree.compiler.flow.passes import form_dispatch_regions
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Generic

    mlir = export(name, Path("/tmp/pyree_models_cpu"))[0]
    function = form_dispatch_regions(rewrite_convolutions(import_mlir(mlir.read_text()).functions[0]))
    table, uses = KernelTable(), []
    for op in function.ops:
        if isinstance(op, Generic):
            uses.append(table.add(outline(op, f"{op.origin.split('+')[0]} {op.loop_ranges}")))
    return table.kernels, uses


def time_model(tags: list[str], rounds: int, work: Path) -> None:
    """Each kernel of a ``build --model`` set alone on one thread (CPU time, best call), per
    tag in turns; the model's total counts each kernel as often as the program runs it."""
    from pyree.compiler.kernel import DTYPES

    data = {t: pickle.loads((work / f"{t}.pkl").read_bytes()) for t in tags}
    libs = {t: Library(work / f"{t}.pkl") for t in tags}
    first = data[tags[0]]
    rng = np.random.default_rng(0)
    totals = {t: 0.0 for t in tags}
    rows = []
    for k, shapes in enumerate(first["bindings"]):
        buffers = [_aligned(rng.standard_normal(shape).astype(DTYPES[dtype])
                            if np.issubdtype(DTYPES[dtype], np.floating) else np.zeros(shape, DTYPES[dtype]))
                   for dtype, shape in shapes]
        state = _state(buffers)[0]
        best = {t: float("inf") for t in tags}
        for _ in range(rounds):
            for t in tags:
                fn, count = libs[t].fns[k]
                for _ in range(3):
                    t0 = time.thread_time()
                    fn(ctypes.byref(state), 0, count)
                    best[t] = min(best[t], time.thread_time() - t0)
        uses = first["uses"].count(k)
        for t in tags:
            totals[t] += best[t] * uses
        rows.append((best[tags[0]] * uses, k, uses, best))
    for _, k, uses, best in sorted(rows, reverse=True)[:12]:
        print(f"  x{uses:<2} {first['names'][k][:58]:58} " +
              " ".join(f"{best[t] * 1e3 * uses:8.3f}" for t in tags))
    print("  total ms, one thread: " + " ".join(f"{t} {totals[t] * 1e3:.2f}" for t in tags))


class Library:
    def __init__(self, path: Path):
        from llvmcpu_harness import KERNEL_FN

        data = pickle.loads(path.read_bytes())
        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(data["so"])
            f.flush()
            self.lib = ctypes.CDLL(f.name)
        self.fns = [(KERNEL_FN((s.decode() if isinstance(s, bytes) else s, self.lib)), count)
                    for s, count in data["exports"]]


def _aligned(like) -> np.ndarray:
    """A 4 KiB-aligned f32 copy of ``like`` (or a NaN array of that shape)."""
    shape = like if isinstance(like, tuple) else like.shape
    raw = np.empty(math.prod(shape) + 1024, np.float32)
    start = (-raw.ctypes.data % 4096) // 4
    a = raw[start:start + math.prod(shape)].reshape(shape)
    a[...] = np.nan if isinstance(like, tuple) else like
    return a


def _state(buffers):
    from llvmcpu_harness import DispatchState

    n = len(buffers)
    ptrs = (ctypes.c_void_p * n)(*[b.ctypes.data for b in buffers])
    lens = (ctypes.c_uint64 * n)(*[b.nbytes for b in buffers])
    consts = (ctypes.c_uint32 * 1)()
    return DispatchState(ptrs, lens, n, 0, consts), (ptrs, lens, consts)


def _run(fn, count, state, threads):
    if threads == 1:
        fn(ctypes.byref(state), 0, count)
        return
    from concurrent.futures import ThreadPoolExecutor

    chunk = -(-count // threads)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda s: fn(ctypes.byref(state), s, min(count, s + chunk)), range(0, count, chunk)))


def time_tags(tags: list[str], threads: int, rounds: int, work: Path, only: str = "") -> None:
    libs = {t: Library(work / f"{t}.pkl") for t in tags}
    rng = np.random.default_rng(0)
    print(f"{'shape':18} {'M x N x K':>18} " + " ".join(f"{t:>18}" for t in tags))
    for s, (name, M, N, K, epi) in enumerate(SHAPES):
        if only and only not in name:
            continue
        a = rng.standard_normal((M, K), dtype=np.float32)
        b = rng.standard_normal((K, N), dtype=np.float32)
        bias = rng.standard_normal(N, dtype=np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        if epi:
            ref = np.maximum(ref + bias, 0)
        # One set of buffers, 4 KiB-aligned, for every tag: identical code ran up to 1.5x
        # apart on buffers of its own (placement: pages, cache sets), which hid the changes.
        out = _aligned((M, N))
        buffers = [_aligned(a), _aligned(b)] + ([_aligned(bias)] if epi else []) + [out]
        state = _state(buffers)[0]
        best = {t: [] for t in tags}
        for r in range(rounds):
            for t in tags:
                fn, count = libs[t].fns[s]
                calls = []
                for _ in range(3):
                    clock = time.thread_time if threads == 1 else time.perf_counter
                    t0 = clock()
                    _run(fn, count, state, threads)
                    calls.append(clock() - t0)
                best[t].append(min(calls))
                if r == 0:
                    err = float(np.max(np.abs(out - ref)) / max(1e-30, np.max(np.abs(ref))))
                    assert err < 1e-5, (name, t, err)
                    out[...] = np.nan
        cells = []
        for t in tags:
            ms = min(best[t]) * 1e3
            cells.append(f"{ms:8.3f} {2 * M * N * K / ms / 1e6:5.1f} GF/s")
        print(f"{name:18} {f'{M}x{N}x{K}':>18} " + " ".join(f"{c:>18}" for c in cells), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["build", "time"])
    p.add_argument("tags", nargs="+")
    p.add_argument("--cpu", default="x86-64-v3")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--work", default="/tmp/pyree_gemm")
    p.add_argument("--only", default="", help="shapes whose name contains this")
    p.add_argument("--model", default="", help="build: a model's kernels (resnet18, mobilenet_v2)")
    args = p.parse_args()
    work = Path(args.work)
    if args.mode == "build":
        build(args.tags[0], args.cpu, work, args.model)
    elif pickle.loads((work / f"{args.tags[0]}.pkl").read_bytes()).get("uses"):
        time_model(args.tags, args.rounds, work)
    else:
        time_tags(args.tags, args.threads, args.rounds, work, args.only)


if __name__ == "__main__":
    main()
