"""CPU-only: the wgmma template stages static f16/bf16 products through the tensor memory
accelerator (codegen/cuda/tma.py): which products take it, that each such kernel keeps the
cp.async path for operands whose addresses are not 16-byte multiples, and that ptxas assembles
them without spills. The values are checked on a GPU (tests/drivers/cuda/test_cuda_gpu.py's
cases.py at sm_90a; BENCHMARKS.md, "Nineteenth session")."""

from __future__ import annotations

import re

import kernel_zoo as zoo
import pyree.runtime as rt
from ptx_modules import assemble_verbose
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target
from test_cuda_contraction import entry_text

BULK = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"


def _entries(kernels, arch="sm_90a", mode="strict"):
    ptx, launches = generate_ptx(kernels, resolve_target(arch, mode))
    return ptx, [entry_text(ptx, name) for name, _ in launches], [launch for _, launch in launches]


def test_static_16_bit_products_take_the_tensor_memory_accelerator(ptxas, tmp_path):
    """B as [n, k] copies one box a stage for each operand; B as [k, n] one per 64-column atom
    of the tile; rows 58 bytes apart (k = 29) or a batch keep cp.async alone. A kernel that takes it makes its two maps in the kernel
    (tensormap.replace), waits on a stage's mbarrier, and keeps the cp.async loop for a dispatch
    whose operands do not start on 16 bytes."""
    kernels = [zoo.linear(512, 11008, 4096, "f16"), zoo.linear(640, 2304, 768, "bf16", b_nk=False),
               zoo.linear(37, 53, 29, "f16"), zoo.linear(129, 256, 72, "f16", batch=3)]
    ptx, entries, launches = _entries(kernels)
    assert [BULK in e for e in entries] == [True, True, False, False]
    for e in entries[:2]:
        assert e.count("tensormap.cp_fenceproxy.global.shared::cta") == 2
        assert "mbarrier.try_wait.parity.shared::cta.b64" in e and "cp.async.cg.shared.global" in e
    bn = [launch.grid[0] for launch in launches[:2]]
    assert bn == [-(-11008 // 192), -(-2304 // 128)]   # n192: A + B; n128: A + two B atoms
    # copies written: the prologue's S - 2 stages (5 of n192's, 7 of n128's) and the refill's
    assert [e.count(BULK) for e in entries[:2]] == [2 * (3 + 1), 3 * (5 + 1)]
    assert launches[0].shared_memory_bytes == 5 * (128 * 128 + 192 * 128) + 1024 + 1024
    log = assemble_verbose(ptxas, ptx, "sm_90a", tmp_path)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] * len(kernels)


def test_tf32_and_other_archs_keep_cp_async():
    """TF32 rounds each staged chunk in shared memory before wgmma reads it, so it stays on
    cp.async; sm_90 (no wgmma) has no tensor memory accelerator path at all."""
    _, entries, _ = _entries([zoo.linear(2048, 2048, 192, "f32")], "sm_90a", "tf32")
    assert "wgmma.mma_async" in entries[0] and BULK not in entries[0]
    _, entries, _ = _entries([zoo.linear(512, 11008, 4096, "f16")], "sm_90")
    assert "tensormap" not in entries[0] and "cp.async.cg.shared.global" in entries[0]


BROADCAST_ROW = """
#a = affine_map<(m, n, k) -> (k)>
#b = affine_map<(m, n, k) -> (n, k)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @main(%x: tensor<256xf16>, %w: tensor<512x256xf16>) -> tensor<256x512xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x512xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<256x512xf32>) -> tensor<256x512xf32>
  %r = linalg.generic {indexing_maps = [#a, #b, #c],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<256xf16>, tensor<512x256xf16>) outs(%f : tensor<256x512xf32>) {
  ^bb0(%p: f16, %q: f16, %acc: f32):
    %pe = arith.extf %p : f16 to f32
    %qe = arith.extf %q : f16 to f32
    %m = arith.mulf %pe, %qe : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<256x512xf32>
  return %r : tensor<256x512xf32>
}
"""


def test_a_broadcast_row_keeps_cp_async():
    """A read by every row alike (stride 0 along m) has no tensor map (a map's rows must follow
    each other): the product stays on wgmma, staged by cp.async."""
    module = rt.read_module(compile_str(BROADCAST_ROW, CompileOptions(target_backends=["cuda"],
                                                                      cuda_target="sm_90a")))
    (executable,) = module.tree.executables
    ptx = bytes(module.bytes_of(executable.cuda.ptx)).decode()
    assert "wgmma.mma_async" in ptx and "cp.async.cg.shared.global" in ptx and BULK not in ptx
