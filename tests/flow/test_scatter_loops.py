"""expand-scatter-loops (flow/scatter_loops.py): a scatter whose updates and index tensors
torch-mlir flattened to one dim loops over their unflattened shape, so the index tensors a
graph computes (F.fold's aranges and broadcasts) fuse into the scatter's places instead of
being written as int64 tensors; a scatter without such a view passes unchanged. And
scatter_add's index column and updates, one two-result op from torch-mlir, fuse into the
scatter (flow/regions.py). Run against PyTorch."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pyree.runtime as rt
from importers.test_torch_less_common_forms import Fn
from pyree.compiler import CompileOptions, compile_str
from tooling import require_module

torch = require_module("torch")
require_module("torch_mlir")
HEADER = re.compile(r"// -----// IR after (\S+) //----- //\n")


def _imported(f, x) -> str:
    from pyree.compiler import import_torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_torch(Fn(f), x)


def test_fold_is_one_scatter_over_its_patches_and_a_crop():
    def f(t):
        return torch.nn.functional.fold(t, (9, 11), (3, 2), padding=(1, 0), stride=(1, 2))
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 5 * 6, 9 * 5))
                         .astype(np.float32))
    text = _imported(f, x)
    options = CompileOptions(target_backends=["llvm-cpu"])
    kernels = compile_str(text, options, extra_args=["--compile-to=executable-sources"]).decode()
    assert kernels.count("kernel @") == 2 and "xi64>" not in kernels, kernels
    scatter = re.search(r"kernel @\w*scatter\w* loops\(([^)]*)\)", kernels)
    assert scatter is not None and len(scatter.group(1).split(",")) >= 6, kernels
    got = rt.load_module(compile_str(text, options), device="local-task").main(x.numpy()).to_host()
    np.testing.assert_allclose(got, f(x).numpy(), rtol=1e-6, atol=1e-6)


def test_a_scatter_without_a_flattened_view_passes_unchanged(capsys):
    picks = [3, 0, 3, 1, 6, 3]

    def f(t):
        return t.index_add(0, torch.tensor(picks), torch.ones(6, 5))
    x = torch.zeros(7, 5)
    text = _imported(f, x)
    module = compile_str(text, CompileOptions(target_backends=["llvm-cpu"],
                                              print_ir_after=["collapse-loops",
                                                              "expand-scatter-loops"]))
    printed = capsys.readouterr().err
    parts = HEADER.split(printed)
    bodies = dict(zip(parts[1::2][:2], parts[2::2][:2]))
    assert list(bodies) == ["collapse-loops", "expand-scatter-loops"]
    assert bodies["collapse-loops"] == bodies["expand-scatter-loops"]
    got = rt.load_module(module, device="local-task").main(x.numpy()).to_host()
    np.testing.assert_array_equal(got, f(x).numpy())


def test_a_scatter_add_computes_its_places_and_updates_itself():
    """torch-mlir writes scatter_add's index column ([N, 1]) and updates in one two-result op:
    region formation splits it and inlines both into the scatter (flow/regions.py), so a
    histogram-style count reads only the data (no N-element int64 column, no ones)."""
    def f(t):
        places = (t.abs() * 7).long() % 50
        return torch.zeros(50, dtype=torch.int32).scatter_add(
            0, places, torch.ones_like(places, dtype=torch.int32))
    x = torch.from_numpy(np.random.default_rng(2).standard_normal(10007).astype(np.float32))
    text = _imported(f, x)
    options = CompileOptions(target_backends=["llvm-cpu"])
    kernels = compile_str(text, options, extra_args=["--compile-to=executable-sources"]).decode()
    assert kernels.count("kernel @") == 1 and "10007xi" not in kernels, kernels
    got = rt.load_module(compile_str(text, options), device="local-task").main(x.numpy()).to_host()
    np.testing.assert_array_equal(got, f(x).numpy())
