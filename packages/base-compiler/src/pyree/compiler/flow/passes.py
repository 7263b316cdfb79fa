"""The flow stage as one flat list of named passes, in the order they run.

Each pass is a function of a Function (a nested block runs as a function of its own, innermost
first: ``tensor_program.map_blocks``), so, as MLIR's pass manager does with a function pass, a
function goes through the whole list before the function around it; the IR can be printed after
any pass by name (``--pyree-print-ir-after=NAME``, ``--pyree-print-ir-after-all``). Region
formation runs twice: a split-K chunk walk, or a scatter's update loop in its unflattened
shape (``flow/scatter_loops.py``), can make a read through a view affine (``flow/views.py``),
and the data movement behind it then fuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pyree.compiler.flow.arg_folds import split_arg_folds
from pyree.compiler.flow.argument_windows import scatter_argument_windows
from pyree.compiler.flow.attention import fuse_attention, probability_products
from pyree.compiler.flow.broadcasts import narrow_broadcasts
from pyree.compiler.flow.channel_affine import fold_channel_affine
from pyree.compiler.flow.collapse import collapse_reductions
from pyree.compiler.flow.constant_folding import fold_constants
from pyree.compiler.flow.convolution import rewrite_convolutions
from pyree.compiler.flow.empty_loops import settle_empty_loops
from pyree.compiler.flow.gathers import fold_constant_gathers
from pyree.compiler.flow.implicit_gemm import inline_patches
from pyree.compiler.flow.narrow_floats import widen_narrow_floats
from pyree.compiler.flow.regions import fuse_regions
from pyree.compiler.flow.scatter_loops import expand_scatter_loops
from pyree.compiler.flow.slabs import read_slabs_through_views
from pyree.compiler.flow.split_reduction import split_reductions
from pyree.compiler.flow.versions import in_versions
from pyree.compiler.flow.views import fold_views_into_loads
from pyree.compiler.tensor_program import Function, Program, map_blocks


@dataclass(frozen=True)
class Pass:
    name: str  # what --pyree-print-ir-after takes
    run: Callable[[Function], Function]
    # Whether the pass handles ops whose shapes hold run-time sizes (``sizes.Size``); a
    # function with run-time sizes runs only such passes. Each decides only on what is provably
    # static (a filter's dims, a stride that divides, a static loop box) and leaves the rest;
    # inline-patches does not: only GPU targets run it, and they refuse run-time sizes.
    run_time_sizes: bool = False


def form_regions(gpu: bool) -> tuple[Pass, ...]:
    """Constants, constant gathers and views folded first, so that a view between two ops no
    longer keeps its value materialized; then fusion; last, each reduction's adjacent loops
    merged, so a convolution's GEMM has one m, one n and one reduction loop for every backend.
    Where a target is a CPU, arithmetic a broadcast would repeat is computed once per value
    (flow/broadcasts.py)."""
    return (
        Pass("fold-constants", fold_constants, run_time_sizes=True),
        Pass("fold-constant-gathers", fold_constant_gathers, run_time_sizes=True),
        Pass("fold-views", fold_views_into_loads, run_time_sizes=True),
        *([] if gpu else [Pass("narrow-broadcasts", narrow_broadcasts, run_time_sizes=True)]),
        Pass("fuse-regions", partial(fuse_regions, recompute_broadcasts=gpu),
             run_time_sizes=True),
        Pass("collapse-loops", collapse_reductions, run_time_sizes=True),
    )


FORM_REGIONS = form_regions(gpu=True)


def flow_passes(gpu: bool, implicit_gemm: bool, strict_floats: bool = False,
                tensor_f32: bool = False, attention: bool = False,
                run_time_attention: Callable | None = None,
                small_sides: bool = False) -> list[Pass]:
    """The flow pipeline. ``gpu``: every target is a GPU (split-K limits); ``implicit_gemm``:
    every target gathers a convolution's patches into its GEMM tiles (flow/implicit_gemm.py);
    ``tensor_f32``: f32 products run on the tensor-core templates too (cuda's TF32 modes: their
    convolutions gathered, their K split as 16-bit products'); ``strict_floats``: float folds
    stay whole (--iree-llvmcpu-reassociate-fp-reductions=false); ``attention``: every target
    compiles softmax attention as one kernel (flow/attention.py), and with run-time sizes too
    where ``run_time_attention`` (the target's templates' predicate on such a kernel) holds;
    ``small_sides``: every target runs a product's side below 16 on its tiled templates
    (``Backend.small_sides_tiled``)."""
    return [
        Pass("scatter-argument-windows", scatter_argument_windows, run_time_sizes=True),
        Pass("settle-empty-loops", settle_empty_loops, run_time_sizes=True),
        Pass("split-arg-folds", split_arg_folds, run_time_sizes=True),
        Pass("fold-channel-affine", fold_channel_affine, run_time_sizes=True),
        Pass("rewrite-convolutions", partial(rewrite_convolutions, implicit=implicit_gemm,
                                             f32=tensor_f32), run_time_sizes=True),
        *form_regions(gpu),
        Pass("expand-scatter-loops", expand_scatter_loops),
        Pass("split-reductions", partial(split_reductions, gpu=gpu, strict_floats=strict_floats,
                                         tensor_f32=tensor_f32, cuda=implicit_gemm,
                                         whole=probability_products if attention else None,
                                         small_sides=small_sides),
             run_time_sizes=True),
        *form_regions(gpu),
        Pass("widen-narrow-floats", widen_narrow_floats, run_time_sizes=True),
        *([Pass("inline-patches", inline_patches)] if implicit_gemm else []),
        *([Pass("fuse-attention", partial(fuse_attention, run_time=run_time_attention),
                run_time_sizes=True),
           # the products split-reductions kept whole for it that it did not take (a decode
           # step's P·V over its cache and its new row apart: 12 blocks over 1.5 MB), split now
           Pass("split-unfused-products", partial(
               split_reductions, gpu=gpu, strict_floats=strict_floats, tensor_f32=tensor_f32,
               cuda=implicit_gemm, small_sides=small_sides, only=probability_products),
                run_time_sizes=True)] if attention else []),
        Pass("read-slabs", read_slabs_through_views),
    ]


def _pass_names() -> tuple[str, ...]:
    """Every pass name, in pipeline order, each once: a GPU pipeline's, and narrow-broadcasts,
    which only CPU targets run, before fuse-regions."""
    names = list(dict.fromkeys(p.name for p in flow_passes(gpu=True, implicit_gemm=True,
                                                           attention=True)))
    names.insert(names.index("fuse-regions"), "narrow-broadcasts")
    return tuple(names)


PASS_NAMES = _pass_names()


def run_passes(function: Function, passes, after: Callable[[str, Function], None] | None = None
               ) -> Function:
    """``passes`` in order on ``function``; ``after(name, function)`` sees each result."""
    dynamic = bool(function.symbols)
    for p in passes:
        if dynamic and not p.run_time_sizes:
            continue
        function = p.run(in_versions(function, p.run))  # (versions an earlier pass made)
        if after is not None:
            after(p.name, function)
    return function


def run_flow(program: Program, passes: list[Pass],
             after: Callable[[str, Function], None] | None = None) -> Program:
    """``passes`` on every function of ``program`` and on every block nested in one."""
    return Program([map_blocks(f, lambda f: run_passes(f, passes, after))
                    for f in program.functions], program.name)


def form_dispatch_regions(function: Function) -> Function:
    """Region formation alone, on one function (what a flow test looks at)."""
    return run_passes(function, FORM_REGIONS)
