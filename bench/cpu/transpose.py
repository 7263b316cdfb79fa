"""Transposes and other copy-like elementwise kernels on local-task against PyTorch (issue 31 item 5).

    python bench/cpu/transpose.py [--rounds 9] [--only NAME ...] [--threads 2]

Each case is one pyree module (llvm-cpu, default variants) and one PyTorch expression that writes a
fresh contiguous result (``x.t().contiguous()`` for a transpose). Rounds alternate pyree and
PyTorch, so both see the same machine (this VM is shared and noisy); medians per side, and the
median of the per-round ratios (PyTorch time / pyree time: above 1 is pyree faster). Each call
allocates its result on both sides; pyree's time runs until the result is ready. Results are
checked against PyTorch once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import pyree.runtime as rt
import torch
from pyree.compiler import compile_str

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                "i8": torch.int8, "i64": torch.int64}


def ty(shape, dtype):
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def permute_case(shape, perm, dtype="f32"):
    out = [shape[p] for p in perm]
    src = f"""func.func @main(%a: {ty(shape, dtype)}) -> {ty(out, dtype)} {{
  %e = tensor.empty() : {ty(out, dtype)}
  %r = linalg.transpose ins(%a : {ty(shape, dtype)}) outs(%e : {ty(out, dtype)}) permutation = {list(perm)}
  return %r : {ty(out, dtype)}
}}"""
    return src, [(shape, dtype)], lambda a: a.permute(*perm).contiguous()


def add_case(shape, other, dtype="f32"):
    """a + b, b broadcast along the leading dims when ``other`` is shorter."""
    rank, orank = len(shape), len(other)
    loops = ", ".join(f"d{i}" for i in range(rank))
    ident = f"affine_map<({loops}) -> ({loops})>"
    maps = f"affine_map<({loops}) -> ({', '.join(f'd{i}' for i in range(rank - orank, rank))})>"
    src = f"""func.func @main(%a: {ty(shape, dtype)}, %b: {ty(other, dtype)}) -> {ty(shape, dtype)} {{
  %e = tensor.empty() : {ty(shape, dtype)}
  %r = linalg.generic {{indexing_maps = [{ident}, {maps}, {ident}],
      iterator_types = [{', '.join(['"parallel"'] * rank)}]}}
      ins(%a, %b : {ty(shape, dtype)}, {ty(other, dtype)}) outs(%e : {ty(shape, dtype)}) {{
    ^bb0(%x: {dtype}, %y: {dtype}, %o: {dtype}):
      %s = arith.addf %x, %y : {dtype}
      linalg.yield %s : {dtype}
  }} -> {ty(shape, dtype)}
  return %r : {ty(shape, dtype)}
}}"""
    return src, [(shape, dtype), (other, dtype)], lambda a, b: a + b


def transpose_add_case(n, dtype="f32"):
    """x.T + y, the transpose fused into the add (PyTorch's result in y's layout: ``a.t() + b``
    alone takes a's)."""
    t = ty((n, n), dtype)
    src = f"""func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>,
      affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : {t}, {t}) outs(%e : {t}) {{
    ^bb0(%x: {dtype}, %y: {dtype}, %o: {dtype}):
      %s = arith.addf %x, %y : {dtype}
      linalg.yield %s : {dtype}
  }} -> {t}
  return %r : {t}
}}"""
    return src, [((n, n), dtype), ((n, n), dtype)], lambda a, b: torch.add(a.t(), b, out=torch.empty_like(b))


CASES = {
    "transpose 4096x4096 f32": permute_case((4096, 4096), (1, 0)),
    "transpose 4096x4096 f16": permute_case((4096, 4096), (1, 0), "f16"),
    "transpose 4096x4096 bf16": permute_case((4096, 4096), (1, 0), "bf16"),
    "transpose 4096x4096 i8": permute_case((4096, 4096), (1, 0), "i8"),
    "transpose 4096x4096 i64": permute_case((4096, 4096), (1, 0), "i64"),
    "transpose 4095x4097 f32": permute_case((4095, 4097), (1, 0)),
    "NCHW->NHWC 8x64x56x56 f32": permute_case((8, 64, 56, 56), (0, 2, 3, 1)),
    "NHWC->NCHW 8x56x56x64 f32": permute_case((8, 56, 56, 64), (0, 3, 1, 2)),
    "x.T + y 4096x4096 f32": transpose_add_case(4096),
    "add 4096x4096 f32": add_case((4096, 4096), (4096, 4096)),
    "broadcast add 4096x4096 + 4096 f32": add_case((4096, 4096), (4096,)),
}


def random(shape, dtype, rng):
    if dtype in ("i8", "i64"):
        return torch.from_numpy(rng.integers(-100, 100, size=shape).astype(np.dtype(dtype.replace("i", "int"))))
    return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).to(TORCH_DTYPES[dtype])


def to_numpy(t):
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def interleaved(ours, theirs, rounds: int) -> tuple[list[float], list[float]]:
    """ms per call of each, alternating, after one warm-up call each."""
    ours(), theirs()
    mine, ref = [], []
    for _ in range(rounds):
        for call, out in ((ours, mine), (theirs, ref)):
            start = time.perf_counter()
            call()
            out.append((time.perf_counter() - start) * 1e3)
    return mine, ref


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} cores={os.cpu_count()} torch={torch.__version__} "
          f"threads={args.threads} load={os.getloadavg()[0]:.2f}")
    print(f"{'case':38} {'pyree ms':>9} {'torch ms':>9} {'torch/pyree':>12}")
    for name, (src, specs, reference) in CASES.items():
        if args.only and not any(o in name for o in args.only):
            continue
        module = rt.load_module(compile_str(src, target_backends=["llvm-cpu"]), device="local-task")
        fn = module["main"]
        inputs = [random(shape, dtype, rng) for shape, dtype in specs]
        device = [rt.asdevicearray(module.device, to_numpy(x)) for x in inputs]
        got, want = fn(*device).to_host(), to_numpy(reference(*inputs))
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), name

        mine, ref = interleaved(lambda fn=fn, device=device: fn(*device).wait(),
                                lambda reference=reference, inputs=inputs: reference(*inputs), args.rounds)
        ratio = statistics.median(r / m for m, r in zip(mine, ref))
        print(f"{name:38} {statistics.median(mine):9.1f} {statistics.median(ref):9.1f} {ratio:11.2f}x",
              flush=True)
    print(f"# load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
