"""Each kernel's source ops (schema 1.4, Module.kernels): what fusion put into a dispatch region,
as "op @ file:line", through epilogues, inlined producers and row kernels, with a kernel that
identical regions share listing every region's ops."""

from __future__ import annotations

import re

from pyree.compiler import compile_str
from pyree.runtime.module import read_module

T = "tensor<64x64xf32>"


def _kernels(mlir: str) -> list[tuple[str, list[str]]]:
    tree = read_module(compile_str(mlir, target_backends=["llvm-cpu"],
                                   source_name="model.mlir")).tree
    return [(info.name, info.sources) for info in tree.kernels]


def _line(mlir: str, pattern: str, nth: int = 0) -> str:
    lines = [i + 1 for i, line in enumerate(mlir.splitlines()) if re.search(pattern, line)]
    return f"model.mlir:{lines[nth]}"


def test_an_epilogue_and_an_inlined_producer_join_the_roots_sources():
    mlir = f"""func.func @f(%x: {T}, %w: {T}, %b: {T}) -> ({T}, {T}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {T}
  %acc = linalg.fill ins(%zero : f32) outs(%e : {T}) -> {T}
  %m = linalg.matmul ins(%x, %w : {T}, {T}) outs(%acc : {T}) -> {T}
  %s = arith.addf %m, %b : {T}
  %t = math.exp %x : {T}
  %u = arith.mulf %t, %b : {T}
  return %s, %u : {T}, {T}
}}"""
    kernels = dict(_kernels(mlir))
    assert len(kernels) == 2
    matmul = next(s for name, s in kernels.items() if "matmul" in name)
    assert matmul == [f"linalg.matmul @ {_line(mlir, 'linalg.matmul')}",
                      f"arith.addf @ {_line(mlir, 'arith.addf')}"]  # the epilogue
    product = next(s for name, s in kernels.items() if "matmul" not in name)
    assert product == [f"arith.mulf @ {_line(mlir, 'arith.mulf')}",
                       f"math.exp @ {_line(mlir, 'math.exp')}"]  # the producer, inlined


def test_a_kernel_shared_by_identical_regions_lists_each_regions_ops():
    mlir = f"""func.func @f(%x: {T}, %w: {T}) -> {T} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {T}
  %acc = linalg.fill ins(%zero : f32) outs(%e : {T}) -> {T}
  %a = linalg.matmul ins(%x, %w : {T}, {T}) outs(%acc : {T}) -> {T}
  %b = math.tanh %a : {T}
  %c = linalg.matmul ins(%b, %w : {T}, {T}) outs(%acc : {T}) -> {T}
  %d = math.tanh %c : {T}
  return %d : {T}
}}"""
    (_, sources), = _kernels(mlir)
    assert sources == [f"linalg.matmul @ {_line(mlir, 'linalg.matmul', 0)}",
                       f"math.tanh @ {_line(mlir, 'math.tanh', 0)}",
                       f"linalg.matmul @ {_line(mlir, 'linalg.matmul', 1)}",
                       f"math.tanh @ {_line(mlir, 'math.tanh', 1)}"]


def test_a_row_kernel_lists_its_reductions_and_their_elementwise_ops():
    """softmax: max, exp, sum and divide in one row kernel."""
    r = "tensor<64xf32>"
    mlir = f"""func.func @f(%x: {T}) -> {T} {{
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : {r}
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : {r}) -> {r}
  %m = linalg.reduce ins(%x : {T}) outs(%m0 : {r}) dimensions = [1]
    (%in: f32, %acc: f32) {{
      %v = arith.maximumf %in, %acc : f32
      linalg.yield %v : f32
    }}
  %e2 = tensor.empty() : {T}
  %mb = linalg.broadcast ins(%m : {r}) outs(%e2 : {T}) dimensions = [1]
  %d = arith.subf %x, %mb : {T}
  %p = math.exp %d : {T}
  %s0 = linalg.fill ins(%zero : f32) outs(%e1 : {r}) -> {r}
  %s = linalg.reduce ins(%p : {T}) outs(%s0 : {r}) dimensions = [1]
    (%in: f32, %acc: f32) {{
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }}
  %sb = linalg.broadcast ins(%s : {r}) outs(%e2 : {T}) dimensions = [1]
  %y = arith.divf %p, %sb : {T}
  return %y : {T}
}}"""
    kernels = _kernels(mlir)
    everything = [source for _, sources in kernels for source in sources]
    for op in ("arith.subf", "math.exp", "arith.divf"):
        assert f"{op} @ {_line(mlir, op)}" in everything, (op, kernels)
    assert sum(s.startswith("linalg.reduce @ ") for s in everything) == 2, kernels
    assert len(kernels) < 4  # fused: fewer kernels than source ops
