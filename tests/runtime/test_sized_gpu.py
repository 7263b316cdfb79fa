"""Per-dispatch workgroup counts on the GPU drivers (hal.h revision 5), and recordings per size:
a compiled elementwise add made into a function with run-time sizes whose one dispatch runs
``w`` workgroups, ``w`` bound from an extra argument's length. All of the kernel's workgroups
compute every element (checked against numpy); half of them compute exactly half (the rest stays
as the call cleared it: 0); none compute nothing. Sizes alternate call after call, queued without
waits, so a recording (on CUDA, a graph) made for one size that replayed for another shows.
Vulkan runs on lavapipe in CI; the CUDA case runs on the GPU host (``-m cuda``)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str

from .module_factory import expr, sized, sym, symbol
from .module_mutations import _pack, _unpack

ADD = """func.func @add(%a: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<4096xf32> {
  %e = tensor.empty() : tensor<4096xf32>
  %r = linalg.add ins(%a, %b : tensor<4096xf32>, tensor<4096xf32>)
                  outs(%e : tensor<4096xf32>) -> tensor<4096xf32>
  return %r : tensor<4096xf32>
}"""
I8 = 5


def _device(driver: str) -> str:
    info = next((d for d in rt.list_drivers() if d.name == driver), None)
    if info is None or not info.available:
        pytest.skip(f"no {driver} device: {info.reason if info else 'driver not installed'}")
    return driver


def _sized_add(target: str) -> tuple[bytes, int]:
    """The add with its dispatch's workgroup count (w, 1, 1), w the length of a third i8
    argument; and the kernel's own count of workgroups."""
    tree, segment = _unpack(compile_str(ADD, target_backends=[target]))
    (executable,) = tree.executables
    (export,) = (executable.spirv or executable.cuda or executable.rocm).exports
    assert export.gridSize[1:] == [1, 1]
    (f,) = tree.functions
    (command,) = f.commands
    f.symbols = [symbol("w", 0, export.gridSize[0])]
    f.arguments.append(sized(I8, sym(0)))
    command.dispatch.workgroupCount = [expr(sym(0)), expr([0, 1]), expr([0, 1])]
    return _pack(tree, segment), export.gridSize[0]


@pytest.mark.parametrize("driver, target", [
    pytest.param("vulkan", "vulkan-spirv", marks=pytest.mark.vulkan),
    pytest.param("cuda", "cuda", marks=pytest.mark.cuda),
])
def test_each_size_runs_its_own_workgroup_count(driver, target):
    device = _device(driver)
    data, grid = _sized_add(target)
    module = rt.load_module(data, device=device)
    rng = np.random.default_rng()
    a, b = (rng.uniform(1, 2, 4096).astype(np.float32) for _ in range(2))  # a + b is never 0
    sizes = [grid, grid // 2, grid, 0, grid // 2, 1, grid, grid // 2] * 3
    calls = [(w, module.add(a, b, np.zeros(w, np.int8))) for w in sizes]
    for w, result in calls:
        out = result.to_host()
        computed = out == a + b
        assert computed.sum() == 4096 * w // grid, (w, computed.sum())
        assert np.all(computed | (out == 0)), w
    # one recording per size, the most recent last
    assert [s["w"] for s in module.add.recorded_sizes] == list(dict.fromkeys(sizes[::-1]))[::-1]
