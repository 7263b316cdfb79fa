"""Dynamic modules against static ones on llvm-cpu (issue 29 item 5): one module whose dims are
run-time sizes, called at several sizes, against a module compiled for each of those sizes.

    python bench/cpu/dynamic_vs_static.py [--only matmul,softmax] [--seconds 3] [--device local-task]

Workloads are MLIR (matmul, layernorm, elementwise), ONNX graphs imported with ``import_onnx``
(softmax, conv) or a torch module imported with ``import_torch`` (transformer): the dynamic one
with ``?`` or named dims, the static one with those dims filled in. matmul: all of M, N, K at
run time; softmax and layernorm: rows and columns; conv: 3x3, 16 -> 32 channels on 32x32,
batch at run time; transformer: tests/models' GPT-2 block, batch at run time, sequence static;
elementwise: an add of one run-time length. Each size's two modules run on the same
device-resident inputs, their results compared, then timed call+wait, alternating short batches
of calls for ``--seconds``; the table gives the minimum per call of each (the machine is
shared: the minimum is the run least disturbed) and their ratio. At the smallest sizes the
difference is the dynamic module's extra host time per call.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def onnx_model(nodes, inputs, outputs, initializers=()):
    from onnx import TensorProto, helper
    vi = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))
    graph = helper.make_graph(nodes, "main", [vi(*i) for i in inputs], [vi(*o) for o in outputs],
                              list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def fill(dims, sizes: dict):
    return [sizes[d] if isinstance(d, str) and sizes is not None else d for d in dims]


def dim(name: str, sizes) -> str:
    return "?" if sizes is None else str(sizes[name])


def empty(values: list[str], sizes) -> str:
    """``tensor.empty``'s operands: the dims' SSA values where they are run-time sizes."""
    return ", ".join(values) if sizes is None else ""


def matmul(sizes):
    M, N, K = (dim(d, sizes) for d in "MNK")
    return f"""
func.func @main(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<{M}x{K}xf32>
  %n = tensor.dim %b, %c1 : tensor<{K}x{N}xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty({empty(["%m", "%n"], sizes)}) : tensor<{M}x{N}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %r = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>)
                     outs(%f : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  return %r : tensor<{M}x{N}xf32>
}}"""


def layernorm(sizes):
    """Over the last dim, eps 1e-5, with a scale and a bias; the row length is counted by a
    reduction (no size-to-float cast in MLIR's shape arithmetic)."""
    R, C = dim("R", sizes), dim("C", sizes)
    x, row, col = f"tensor<{R}x{C}xf32>", f"tensor<{R}xf32>", f"tensor<{C}xf32>"
    return f"""
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: {x}, %g: {col}, %b: {col}) -> {x} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = tensor.dim %x, %c0 : {x}
  %c = tensor.dim %x, %c1 : {x}
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e = tensor.empty({empty(["%r"], sizes)}) : {row}
  %z = linalg.fill ins(%zero : f32) outs(%e : {row}) -> {row}
  %sum, %cnt = linalg.generic {{indexing_maps = [#map, #row, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%x : {x}) outs(%z, %z : {row}, {row}) {{
  ^bb0(%v: f32, %a: f32, %k: f32):
    %a2 = arith.addf %v, %a : f32
    %k2 = arith.addf %k, %one : f32
    linalg.yield %a2, %k2 : f32, f32
  }} -> ({row}, {row})
  %var = linalg.generic {{indexing_maps = [#map, #row, #row, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%x, %sum, %cnt : {x}, {row}, {row}) outs(%z : {row}) {{
  ^bb0(%v: f32, %s: f32, %k: f32, %a: f32):
    %mu = arith.divf %s, %k : f32
    %d = arith.subf %v, %mu : f32
    %d2 = arith.mulf %d, %d : f32
    %a2 = arith.addf %d2, %a : f32
    linalg.yield %a2 : f32
  }} -> {row}
  %e2 = tensor.empty({empty(["%r", "%c"], sizes)}) : {x}
  %y = linalg.generic {{indexing_maps = [#map, #row, #row, #row, #col, #col, #map],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%x, %sum, %cnt, %var, %g, %b : {x}, {row}, {row}, {row}, {col}, {col}) outs(%e2 : {x}) {{
  ^bb0(%v: f32, %s: f32, %k: f32, %q: f32, %gg: f32, %bb: f32, %o: f32):
    %mu = arith.divf %s, %k : f32
    %d = arith.subf %v, %mu : f32
    %vr = arith.divf %q, %k : f32
    %ve = arith.addf %vr, %eps : f32
    %rs = math.rsqrt %ve : f32
    %n = arith.mulf %d, %rs : f32
    %sc = arith.mulf %n, %gg : f32
    %o2 = arith.addf %sc, %bb : f32
    linalg.yield %o2 : f32
  }} -> {x}
  return %y : {x}
}}"""


def elementwise(sizes):
    N = dim("N", sizes)
    t = f"tensor<{N}xf32>"
    return f"""
func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : {t}
  %e = tensor.empty({empty(["%n"], sizes)}) : {t}
  %r = linalg.add ins(%a, %b : {t}, {t}) outs(%e : {t}) -> {t}
  return %r : {t}
}}"""


def softmax(sizes):
    from onnx import helper
    dims = fill(("R", "C"), sizes)
    return onnx_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", dims)], [("y", dims)])


def conv(sizes):
    from onnx import helper, numpy_helper
    w = np.random.default_rng(1).standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1
    batch = fill(("N",), sizes)
    return onnx_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                      [("x", batch + [16, 32, 32])], [("y", batch + [32, 32, 32])],
                      [numpy_helper.from_array(w, "w")])


def transformer(sizes):
    """tests/models' GPT-2 block (width 128, 4 heads, sequence 64) through pyree's torch
    importer, the batch a ``torch.export.Dim`` in the dynamic one."""
    import torch
    from pyree.compiler import import_torch
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "models"))
    from definitions import gpt2_block
    block = gpt2_block(width=128, heads=4, seq=64)
    batch = 2 if sizes is None else sizes["B"]
    dynamic = None if sizes else {"x": {0: torch.export.Dim("batch", max=64)}}
    return import_torch(block, torch.randn(batch, 64, 128), dynamic_shapes=dynamic)


# name -> (graph factory, sizes to time)
WORKLOADS = {
    "matmul": (matmul, [dict(M=1, N=256, K=256), dict(M=7, N=61, K=129), dict(M=64, N=64, K=64),
                        dict(M=128, N=128, K=128), dict(M=257, N=255, K=253), dict(M=33, N=1000, K=100)]),
    "softmax": (softmax, [dict(R=1, C=1000), dict(R=1000, C=7), dict(R=64, C=1024),
                          dict(R=257, C=33), dict(R=4096, C=128)]),
    "layernorm": (layernorm, [dict(R=1, C=1000), dict(R=1000, C=7), dict(R=64, C=1024),
                              dict(R=257, C=33), dict(R=4096, C=128)]),
    "conv": (conv, [dict(N=1), dict(N=2), dict(N=3), dict(N=5), dict(N=8)]),
    "transformer": (transformer, [dict(B=1), dict(B=2), dict(B=3), dict(B=5), dict(B=8)]),
    "elementwise": (elementwise, [dict(N=1), dict(N=7), dict(N=1000), dict(N=100_003),
                                  dict(N=4_000_037)]),
}


def compile_model(model) -> bytes:
    """``model``: MLIR text, or an ONNX model to import."""
    from pyree.compiler import CompileOptions, compile_str, import_onnx
    mlir = model if isinstance(model, str) else import_onnx(model)  # MLIR text or ONNX
    return compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"], llvmcpu_target_cpu="host"))


def best_pair(a, b, seconds: float) -> tuple[float, float]:
    """Least time per call+wait of ``a`` and ``b``, alternating batches of ~2 ms."""
    a(), b()
    t = time.perf_counter()
    a()
    batch = max(1, int(2e-3 / max(time.perf_counter() - t, 1e-7)))
    best = [float("inf")] * 2
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        for k, fn in enumerate((a, b)):
            t = time.perf_counter()
            for _ in range(batch):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t) / batch)
    return best[0], best[1]


def caller(module, args):
    fn = module["main"] if "main" in module.function_names else module[module.function_names[0]]
    return lambda: fn(*args).wait(), lambda: fn(*args).to_host()


def main() -> None:
    import pyree.runtime as rt
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--device", default="local-task")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"device {args.device}; least time per call+wait over {args.seconds} s of alternating "
          "batches, microseconds")
    print(f"{'workload':12s} {'sizes':28s} {'dynamic':>10s} {'static':>10s} {'ratio':>6s}")
    for name in args.only.split(","):
        factory, cases = WORKLOADS[name]
        dynamic = rt.load_module(compile_model(factory(None)), device=args.device)
        for sizes in cases:
            static = rt.load_module(compile_model(factory(sizes)), device=args.device)
            fn = static[static.function_names[0]]
            host = [rng.standard_normal(t.shape).astype(t.dtype) for t in fn.argument_types]
            inputs = [rt.asdevicearray(static.device, x) for x in host]
            (dyn_call, dyn_get), (st_call, st_get) = caller(dynamic, inputs), caller(static, inputs)
            np.testing.assert_allclose(dyn_get(), st_get(), rtol=1e-4, atol=1e-4)
            t_dyn, t_st = best_pair(dyn_call, st_call, args.seconds)
            label = " ".join(f"{k}={v}" for k, v in sizes.items())
            print(f"{name:12s} {label:28s} {t_dyn * 1e6:10.1f} {t_st * 1e6:10.1f} {t_dyn / t_st:6.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
