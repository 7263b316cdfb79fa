"""CPU-only: a top-k over a vocabulary (torch.topk of 50 of 32000, two counting passes,
input/sort_scan.py) picks each output as a plain fold of bits that the GPU spreads over a block,
not as one thread walking the whole line (which took 84 µs of a 165 µs call on the H200), and
the picked bits are the input's exactly (NaN payloads, -0.0), against PyTorch on local-task.
tests/drivers/cuda/test_cuda_sort.py runs the counting sorts on a GPU."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import torch  # CI installs it: a missing torch fails there, never skips
from pyree.compiler import CompileOptions, compile_str, import_torch


class TopK(torch.nn.Module):
    def forward(self, x):
        top = torch.topk(x, 50, dim=-1)
        return top.values, top.indices


def _mlir() -> str:
    return import_torch(TopK(), torch.zeros(1, 32000))


def test_each_picked_output_is_a_block_wide_fold():
    vmfb = compile_str(_mlir(), CompileOptions(target_backends=["cuda"], cuda_target="sm_90a"))
    (executable,) = rt.read_module(vmfb).tree.executables
    grids = {e.name.decode() if isinstance(e.name, bytes) else e.name: list(e.gridSize)[0]
             for e in executable.cuda.exports}
    picks = {name: grid for name, grid in grids.items() if "_sort_" in name and "x50x" in name}
    # the chunks' 64 x 50 candidates, then the 50 of the 3200: a block (or more) for each
    assert sorted(picks.values()) == [50, 3200], grids


def test_picked_bits_are_the_inputs():
    """A NaN with a payload (PyTorch's largest) comes back with its bits, -0.0 and +0.0 as they
    were; the rest as PyTorch picks them."""
    x = -1 - np.abs(np.random.default_rng(4).standard_normal((1, 32000))).astype(np.float32)
    x[0, 7], x[0, 9] = np.float32(-0.0), np.float32(0.0)
    x.view(np.uint32)[0, 11] = 0xFFC00123  # a negative quiet NaN with a payload
    module = rt.load_module(compile_str(_mlir(), CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    values, indices = (np.asarray(o.to_host()) for o in module["main"](x))
    with torch.no_grad():
        want_values, want_indices = TopK()(torch.from_numpy(x))
    assert values.view(np.uint32)[0, 0] == 0xFFC00123 and indices[0, 0] == 11
    assert sorted(values.view(np.uint32)[0, 1:3]) == [0x00000000, 0x80000000]
    np.testing.assert_array_equal(np.sort(values.view(np.uint32)), np.sort(want_values.numpy().view(np.uint32)))
    np.testing.assert_array_equal(np.sort(indices), np.sort(want_indices.numpy()))
