"""The flow pipeline is one flat list of named passes (flow/passes.py): its order, what the targets
change in it, and a test file in tests/flow/ named after each pass's module."""

from __future__ import annotations

from pathlib import Path

from pyree.compiler.flow.passes import FORM_REGIONS, PASS_NAMES, flow_passes, form_regions

REGIONS = [p.name for p in FORM_REGIONS]


def test_the_order():
    cpu_regions = [p.name for p in form_regions(gpu=False)]
    assert [p.name for p in flow_passes(gpu=False, implicit_gemm=False)] == [
        "scatter-argument-windows", "settle-empty-loops", "split-arg-folds", "fold-channel-affine", "rewrite-convolutions", *cpu_regions, "expand-scatter-loops", "split-reductions",
        *cpu_regions,
        "widen-narrow-floats", "read-slabs"]
    assert REGIONS == ["fold-constants", "fold-constant-gathers", "fold-views", "fuse-regions",
                       "collapse-loops"]
    assert cpu_regions == ["fold-constants", "fold-constant-gathers", "fold-views",
                           "narrow-broadcasts", "fuse-regions", "collapse-loops"]


def test_implicit_gemm_targets_end_with_inline_patches_then_read_slabs_and_names_are_listed_once():
    passes = flow_passes(gpu=True, implicit_gemm=True)
    assert [p.name for p in passes[-2:]] == ["inline-patches", "read-slabs"]
    with_attention = flow_passes(gpu=True, implicit_gemm=True, attention=True)
    assert [p.name for p in with_attention] == [p.name for p in passes[:-1]] + ["fuse-attention", "split-unfused-products", "read-slabs"]
    names = list(dict.fromkeys(p.name for p in with_attention))
    assert list(PASS_NAMES) == names[:names.index("fuse-regions")] + ["narrow-broadcasts"] \
        + names[names.index("fuse-regions"):]


def test_every_pass_has_a_test_file_named_after_its_module():
    here = Path(__file__).parent
    for p in [*flow_passes(gpu=True, implicit_gemm=True, attention=True),
              *flow_passes(gpu=False, implicit_gemm=False)]:
        module = getattr(p.run, "func", p.run).__module__.rsplit(".", 1)[-1]
        assert (here / f"test_{module}.py").exists(), f"pass {p.name}: no tests/flow/test_{module}.py"
