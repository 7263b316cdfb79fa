"""The flow pipeline is one flat list of named passes (flow/passes.py): its order, what the targets
change in it, and a test file in tests/flow/ named after each pass's module."""

from __future__ import annotations

from pathlib import Path

from pyree.compiler.flow.passes import FORM_REGIONS, PASS_NAMES, flow_passes

REGIONS = [p.name for p in FORM_REGIONS]


def test_the_order():
    assert [p.name for p in flow_passes(gpu=False, implicit_gemm=False)] == [
        "scatter-argument-windows", "settle-empty-loops", "split-arg-folds", "fold-channel-affine", "rewrite-convolutions", *REGIONS, "expand-scatter-loops", "split-reductions",
        *REGIONS,
        "widen-narrow-floats", "read-slabs"]
    assert REGIONS == ["fold-constants", "fold-constant-gathers", "fold-views", "fuse-regions",
                       "collapse-loops"]


def test_implicit_gemm_targets_end_with_inline_patches_then_read_slabs_and_names_are_listed_once():
    passes = flow_passes(gpu=True, implicit_gemm=True)
    assert [p.name for p in passes[-2:]] == ["inline-patches", "read-slabs"]
    with_attention = flow_passes(gpu=True, implicit_gemm=True, attention=True)
    assert [p.name for p in with_attention] == [p.name for p in passes[:-1]] + ["fuse-attention", "split-unfused-products", "read-slabs"]
    assert list(PASS_NAMES) == list(dict.fromkeys(p.name for p in with_attention))


def test_every_pass_has_a_test_file_named_after_its_module():
    here = Path(__file__).parent
    for p in flow_passes(gpu=True, implicit_gemm=True, attention=True):
        module = getattr(p.run, "func", p.run).__module__.rsplit(".", 1)[-1]
        assert (here / f"test_{module}.py").exists(), f"pass {p.name}: no tests/flow/test_{module}.py"
