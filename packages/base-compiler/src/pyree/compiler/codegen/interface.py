"""The one shape every code generator has (after Triton's ``BaseBackend.add_stages``).

A backend resolves its target from the options, picks a template per kernel in a fixed priority
order (every template module answers ``plan(kernel, target)``, then ``emit``s with that plan),
and compiles the kernels through named stages, each producing an artefact (llvm-cpu: LLVM
IR, optimized IR, assembly, objects, the shared object; cuda: LLVM IR, PTX, cubin). The module
keeps the last artefact; ``--iree-hal-dump-executable-*-to`` writes every artefact of that same
run (``executable_files.py``), so the dumped files are exactly the code the module holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Artefact:
    """One stage's output: ``suffix`` names its file after the module's stem, IREE's spelling
    (``system_elf_x86_64.codegen.ll``); ``kind`` is the dump flag that writes it."""

    suffix: str
    kind: str  # "intermediates" or "binaries"


# Called by a backend with each artefact it produced: the artefact's suffix, then its text or bytes
# (a list of them when the stage ran as several LLVM modules, one per part).
Keep = Callable[[str, object], None]


def keep_nothing(suffix: str, data: object) -> None:
    """The ``Keep`` of a compile that dumps nothing."""


@dataclass(frozen=True)
class Backend:
    """What the compiler knows of a target: the ``--iree-hal-target-backends`` name, the target
    it resolves from the options, its stages' artefacts in order, and properties the earlier
    stages ask about. ``compile_executable(kernels, options, builder, keep)`` returns the
    module's executable, whose export k runs kernels[k]; payload bytes go through
    ``builder.add_data`` and every artefact through ``keep``."""

    name: str
    resolve_target: Callable
    # Template modules in priority order: each has ``plan(kernel, target)`` (its decisions for a
    # kernel it takes, else None) and ``emit(..., plan)`` (llvm-cpu: the plan's own ``emit``); the
    # last takes every kernel (``choose``).
    templates: tuple
    artefacts: tuple[Artefact, ...]
    compile_executable: Callable
    # Contraction templates that stage operand tiles from any expression of the loops, so that a
    # convolution's patches are gathered into the tiles instead of copied (flow/implicit_gemm.py).
    implicit_gemm: bool = False
    # Kernels whose sizes are known only at run time (``sizes.Size`` parameters read from push
    # constants); a target without them refuses a function with dynamic dims by name.
    run_time_sizes: bool = False
    # Whether the target the options resolve to computes in f64, and its math functions (exp,
    # pow, ...) in f64: pipeline.py demotes a module's inner f64 to f32 for one that cannot.
    float64: Callable = lambda options: True
    float64_math: Callable = lambda options: True
    # A template that compiles softmax attention (``kernel.Attention``) as one kernel, so that
    # flow/attention.py replaces the score, softmax and product chain by one op.
    fused_attention: bool = False
    # For the target the options resolve to, a predicate on an outlined attention kernel with
    # run-time sizes (a prompt's length): whether a template of it takes that kernel; None where
    # none takes any. flow/attention.py forms such an op only where it holds, else the chain stays.
    run_time_attention: Callable = lambda options: None
    # Kernels with a scatter result (``kernel.Scatter``): atomic read-modify-writes at computed
    # places, so that input/scatter.py lowers a scatter over its updates, not over its output.
    scatter_atomics: bool = False
    # The element dtypes its scatter template combines atomically; None: every dtype. A scatter
    # of another dtype stays the fold (input/scatter.py) on every target of the module.
    scatter_atomic_dtypes: frozenset[str] | None = None
    # Its matrix products with a side below 16 (flow/split_reduction.py, ``GPU_MIN_SIDE``) run on
    # the tiled templates whether that side is static or known per call, as no static-only
    # matrix-vector template takes them: versions chosen by size then follow the static split
    # plan down to one row (cuda's and rocm's take the plan at 16 rows below that).
    small_sides_tiled: bool = False
    # Templates that walk a line on one core: its ranks by sorting it (``kernel.LineSort``), its
    # scan as one running fold (``kernel.LineScan``), so that input/sort_scan.py sorts, takes
    # top-k's and scans in O(n log n) and O(n) per line instead of the counting, merging and
    # blocked Generics that spread over a GPU's threads.
    line_walks: bool = False
    # What one dispatch costs in a module's command stream, relative to cuda's (about 2.7 µs for
    # a small kernel on the H200, in CUDA-graph replay; NVIDIA's Vulkan driver took about four
    # times that): input/sort_scan.py weighs many small Generics against fewer long ones by it.
    dispatch_cost: float = 1.0


def scatter_dtypes(backends) -> frozenset[str] | None:
    """The dtypes that every one of ``backends`` scatters atomically; None: every dtype."""
    sets = [b.scatter_atomic_dtypes for b in backends if b.scatter_atomic_dtypes is not None]
    return frozenset.intersection(*sets) if sets else None


def choose(templates: tuple, kernel, target):
    """(template, plan) of the first template in ``templates`` whose ``plan`` takes ``kernel``."""
    for template in templates:
        plan = template.plan(kernel, target)
        if plan is not None:
            return template, plan
    raise AssertionError(f"no template takes kernel {kernel.name}")  # the last takes every kernel
