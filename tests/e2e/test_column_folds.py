"""Column folds (tests/column_fold_cases.py) on every device against float64 numpy: a GPU module
splits the ones with few outputs into partials laid out [s, outputs...]; NaN, infinities and -0
among the inputs, odd extents (the final fold takes the rows past the whole chunks)."""

from __future__ import annotations

import numpy as np
import pytest
from column_fold_cases import CASES, matches
from jax_runs import DEVICES, module_for


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_column_folds_match_numpy(name, device):
    case = CASES[name]
    inputs = case.inputs(np.random.default_rng(2))
    got = np.asarray(module_for(case.program, device)["main"](*inputs).to_host())
    matches(got, case.reference(*inputs))


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_modules_split_column_folds_with_few_outputs(name):
    """Two Generics after the pass for GPU targets (the partials [s, outputs...]), one for the
    CPU's: the CPU's fold is no slower whole."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flow"))
    from pass_runs import after_pass, generics

    case = CASES[name]
    gpu = [g for g in generics(after_pass(case.program, "split-reductions", gpu=True))
           if g.num_parallel < len(g.loop_ranges)]
    assert len(gpu) == (2 if case.splits_on_gpu else 1)
    if case.splits_on_gpu:
        partial = gpu[0]
        splits = partial.loop_ranges[0]
        assert partial.results[0].shape[0] == splits >= 4  # [s, outputs...]
    cpu = [g for g in generics(after_pass(case.program, "split-reductions"))
           if g.num_parallel < len(g.loop_ranges)]
    assert len(cpu) == 1
