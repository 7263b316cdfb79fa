"""Long reductions with few outputs, split in two: partial folds, then a fold of the partials.

Every backend's reduction template gives one output to one workgroup (or one thread), and its
contraction templates one tile of outputs to one workgroup. A sum of 10M elements to one scalar, a
max over a 50257-wide vocabulary for 32 rows, or a 32x1000 matmul with K = 2048 (31 tiles) then
runs on a few of a GPU's multiprocessors (far slower than PyTorch), or on one core of a CPU. An
associative fold (``acc = acc <op> f``, ``kernel.fold_pattern``) becomes:

- a partial Generic: the first reduction loop (extent N) split into S chunks of C elements as
  a new outermost parallel loop ``s`` and a reduction loop ``c``, folding ``f`` at ``s * C + c``
  into an ``(outputs..., S)`` tensor in the fold's own dtype, which the final fold reads
  contiguously; for a contraction ``s`` is a batch loop of an ``(S, outputs...)`` tensor, so the
  matmul templates (tensor cores included) still take it;
- a final Generic with the original results: folds the S partials, then applies the original
  init and epilogue, so its users and fused epilogues are unchanged.

Where N is the only reduction loop, C = floor(N / S) and the final fold also takes the N - S * C
(< S) elements past the whole chunks, one at each s behind a guard: the partial fold then reads
whole chunks with no guard, which the CPU folds as plain vectors (a guard per element had kept
its 10M-element sum scalar). Otherwise C = ceil(N / S) and the last chunk folds the identity past
N.

A plain fold is split when it has fewer than ``FEW_OUTPUTS`` outputs and at least
``LONG_REDUCTION`` reduced elements, into about ``TARGET_PARTIALS`` partial outputs of at least
``MIN_CHUNK`` elements (the fold's identity past N). A contraction (``f`` a product whose operands
each miss a parallel loop the other reads) is split when it makes fewer than ``FEW_TILES`` tiles of
``TILE_OUTPUTS`` outputs and K is at least ``LONG_K``, into chunks of at least ``MIN_K_CHUNK`` that
divide K exactly (a guard would keep it off the tensor cores). For a module whose every target is a
GPU a product with K below ``LONG_K`` (or f16/bf16 operands, counted in ``TENSOR_TILE_OUTPUTS``
tiles, at any K) is split only with at most ``GPU_MOST_TILES`` tiles; below ``LONG_K`` from
``GPU_LONG_K`` on, in chunks of ``GPU_MIN_K_CHUNK`` (``GPU_VECTOR_K_CHUNK`` for a matrix-vector
product, m or n below ``GPU_MIN_SIDE``; ``GPU_TENSOR_K_CHUNK`` for a tensor-core product with K
for two of those): a small product's K loop runs one step after another on
a few multiprocessors, so even K = 256 is worth spreading; on a CPU each split costs a dispatch
and a pass over the partials. Floats are reassociated, as every parallel reduction already does.
"""

from __future__ import annotations

import dataclasses
import math

from pyree.compiler.flow.convolution import IMPLICIT_PATCHES
from pyree.compiler.flow.narrow_floats import NARROW, widen
from pyree.compiler.flow.rewrite import affine_value, compose, drop_unread, remap_loops
from pyree.compiler.flow.versions import by_size
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Load,
    LoopIndex,
    Result,
    Select,
    fold_identity,
    fold_pattern,
    fold_product,
    is_float,
    is_row_kernel,
    itemsize,
    reads_along_outputs,
    walk,
)
from pyree.compiler.sizes import Size, compare, num_elements, opaque
from pyree.compiler.tensor_program import (
    Function,
    Generic,
    Op,
    Value,
    View,
    defined_by,
    has_run_time_sizes,
    index_sizes,
    is_line_walk,
    size_values,
    sources_of,
)

FEW_OUTPUTS = 256
LONG_REDUCTION = 16384
TARGET_PARTIALS = 512
MIN_CHUNK = 1024
# The unit is the SIMT template's largest tile (128 x 128), not its smallest: a product with fewer
# than FEW_TILES of those (f32 1000x700, K = 1500: 48) ran on small tiles well below the FMA rate,
# with some SMs doing two; split five ways it runs 240 large tiles (BENCHMARKS.md).
TILE_OUTPUTS = 128 * 128
FEW_TILES = 132      # a Hopper-class GPU's multiprocessor count: fewer tiles leave some idle
LONG_K = 1024
MIN_K_CHUNK = 256
# GPT-2's 128x256 @ 256x256 linear ran on only 32 SIMT blocks of 8 K steps each (BENCHMARKS.md):
# split in 64-deep chunks, each block makes a quarter of the steps (4 at the SIMT tile's 16-deep
# steps). Only below LONG_K: f32 1000x1500 @ 1500x700, split 6 ways in 250-deep chunks instead of
# 5 in 300, was slower.
GPU_LONG_K = 256
GPU_MIN_K_CHUNK = 64
# ... while at least half the multiprocessors have a tile: the partials' pass then costs more than
# the idle ones would add (a 3x3 f16 conv, batch 8, 64 channels at 56x56: 98 tiles, K = 576; its
# GEMM and fold split 3 ways took twice as long as the whole GEMM; BENCHMARKS.md). Tensor-core
# products (f16 or bf16 operands) count their templates' 128 x 64 tiles, at any K: GPT-2's context
# product, 12 x 1024x1024 @ 1024x64 (96 tiles), was also faster whole than split 4 ways.
GPU_MOST_TILES = FEW_TILES // 2
TENSOR_TILE_OUTPUTS = 128 * 64
# A tensor-core product's chunk is at least three of its templates' 64-deep steps where K has room
# for two such chunks: ResNet-18's f16 3x3 convolutions at batch 1 (64 channels, 56x56: 25 tiles,
# K = 576) were slower split 9 ways (one step each) than whole, and slower per call than split 3
# ways (BENCHMARKS.md). GPT-2's K = 256 keeps 64-deep chunks. In a cuda module a matmul (its
# operands not a convolution's patches) with such a K below LONG_K and at least
# GPU_TENSOR_WHOLE_TILES tiles stays whole: GPT-2's f16 linears of 64-256 rows with K = 768 ran
# whole in 0.5-1.0x the time split in 192-deep chunks took from 24 tiles on, on wgmma and
# mma.sync alike; at 12 wgmma gained 0.9 us whole and mma.sync lost 0.3, at 6 mma.sync lost
# 1.1 us (BENCHMARKS.md, seventeenth session). K = 3072 still gained from the split. (Vulkan's
# and rocm's templates were not measured so; they split as before.)
GPU_TENSOR_K_CHUNK = 192
GPU_TENSOR_WHOLE_TILES = 12
# A matrix-vector product (m or n below this) in longer chunks: the GPU templates read its K per
# column with a few multiply-adds per element (common/llvm_gpu/matmul_gemv.py), so a 128-deep chunk is ~16
# loads per thread, while 64-deep chunks double the partials. (On the 32x32 SIMT tile, before the
# matrix-vector template, a 1x768 @ 768x3072 product split 12 ways was slower than whole.)
GPU_MIN_SIDE = 16
GPU_VECTOR_K_CHUNK = 128
# A product with at most GPU_GEMV_ROWS rows (or columns) runs the matrix-vector template
# (common/llvm_gpu/matmul_gemv.py, its ROWS), whose block reads 16 bytes a thread: 8 columns of a
# matrix contiguous along k (a warp a column), else 128 bytes of a row (one cache line, 64 f16
# columns), 32 slices of K. It is split until it makes GPU_VECTOR_BLOCKS blocks, two per
# multiprocessor, in chunks that still give every lane of a column a vector (32 x 16 bytes along
# k) or every slice of rows a few (GPU_VECTOR_MIN_ROWS along n). Whole, GPT-2's 768-deep decode
# products (36 to 48 blocks) took 5 us each in the decode step, split 2.0-3.2 us plus a 1.1 us
# fold of the partials; with their weights in L2 (one product timed alone, again and again)
# whole and split had run alike (BENCHMARKS.md).
GPU_GEMV_ROWS = 4
# A contraction with a run-time extent has a version per band of sizes whose static split
# differs (``_by_size``), at most this many: each is one or two kernels more to compile.
MAX_VERSIONS = 4
# GPU column folds (``_column_splits``): partial outputs to aim for (an H200 holds ~270K
# threads), the fewest rows a chunk, the fewest chunks worth a second dispatch.
GPU_COLUMN_THREADS = 65536
GPU_COLUMN_CHUNK = 64
GPU_COLUMN_MIN_SPLITS = 4
GPU_VECTOR_BLOCKS = 2 * FEW_TILES
# The chunk counts a GPU contraction with a run-time K is split into (``_run_time_k``), each a
# version of its own: two or three kernels more to compile.
RUN_TIME_K_SPLITS = (4, 2)
GPU_VECTOR_MIN_ROWS = 64
# On cuda a matrix-vector product whose matrix column (K elements) is at most this many bytes
# stays whole: the template then narrows its blocks to fill the GPU and has each thread's loads
# of K in flight at once (matmul_gemv.py's MIN_BLOCKS, UNROLL), which in the decode step beat
# the split and its fold (a kernel of ~2.5 us launch and latency) for every product of GPT-2's
# and LLaMA's small shapes: GPT-2 f16 0.53 -> 0.505 ms a token, LLaMA 0.61 -> 0.50
# (BENCHMARKS.md, forty-fifth session). Longer columns split as above (a thread's loads would
# come in several rounds on fewer blocks; not measured).
GPU_VECTOR_WHOLE_BYTES = 8 * 1024


def split_reductions(function: Function, gpu: bool = False, strict_floats: bool = False,
                     tensor_f32: bool = False, whole=None, cuda: bool = False,
                     small_sides: bool = False, only=None) -> Function:
    """``gpu``: every target of the module is a GPU (the K limits of contractions);
    ``strict_floats``: float folds are not split (they must fold in order); ``tensor_f32``: f32
    products run on the tensor-core templates (cuda's TF32 modes), so they split as 16-bit ones;
    ``whole(function)``: ops a later pass takes as they are (flow/attention.py); ``only(function)``:
    the ops to split, none other (those that pass left as they were); ``cuda``: every
    target is cuda, whose tensor-core templates' whole-K speed ``GPU_TENSOR_K_CHUNK`` cites;
    ``small_sides``: every target runs a side below ``GPU_MIN_SIDE`` on its tiled templates,
    static or not (``_by_size`` probes the fewest rows as they are)."""
    keep = whole(function) if whole is not None else set()
    taken = only(function) if only is not None else None
    patches = _patch_readers(function) if cuda else None
    bounds = {s.name: (s.min, s.max) for s in function.symbols}
    ops = [new for op in function.ops
           for new in ([op] if op in keep or (taken is not None and op not in taken)
                       else split_reduction(
               op, gpu, strict_floats, tensor_f32, patches is None or op in patches, bounds,
               small_sides, cuda))]
    return dataclasses.replace(function, ops=ops)


def _patch_readers(function: Function) -> set:
    """The ops that read a convolution's patches (``flow/convolution.py``'s im2col copies),
    directly or through views."""
    made_by = {id(v): op for op in function.ops for v in defined_by(op)}

    def patches(value) -> bool:
        op = made_by.get(id(value))
        if isinstance(op, View):
            return patches(op.source)
        return isinstance(op, Generic) and op.origin in (IMPLICIT_PATCHES, "im2col")
    return {op for op in function.ops if isinstance(op, Generic) and any(map(patches, op.inputs))}


def split_reduction(op: Op, gpu: bool = False, strict_floats: bool = False,
                    tensor_f32: bool = False, may_be_patches: bool = True,
                    by_size: dict | None = None, small_sides: bool = False,
                    cuda: bool = False) -> list[Op]:
    """``[op]``, or ``[partial, final]`` for a long fold with few outputs. ``may_be_patches``:
    ``op`` may be a convolution's GEMM, or a module for targets other than cuda's
    (``GPU_TENSOR_K_CHUNK``); ``cuda``: every target is cuda (``_gemv_sides``). A contraction
    with a run-time extent is split only with ``by_size`` (its function's symbol bounds:
    name -> (min, max)), into versions chosen per call (``_by_size``); else it stays whole:
    whether splitting pays is known only per call."""
    if not isinstance(op, Generic) or op.num_parallel == len(op.loop_ranges) \
            or is_row_kernel(op.outputs) or is_line_walk(op):
        return [op]
    if has_run_time_sizes(op):
        if by_size is None:
            return [op]
        if gpu and isinstance(op.loop_ranges[op.num_parallel], Size):
            return _run_time_k(op, by_size, strict_floats, tensor_f32)
        return _by_size(op, by_size, lambda probe: _splits(probe, gpu, strict_floats, tensor_f32,
                                                           may_be_patches, cuda), small_sides)
    splits = _splits(op, gpu, strict_floats, tensor_f32, may_be_patches, cuda)
    if splits < 2 and gpu:
        columns = _column_splits(op, strict_floats)
        if columns >= 2:
            return _split(op, columns, batch=True)
    return [op] if splits < 2 else _split(op, splits)


def _column_splits(op: Generic, strict_floats: bool) -> int:
    """Chunks for a GPU column fold (``kernel.reads_along_outputs``: the GPU templates give it a
    thread per output, reading rows across neighbouring outputs) whose outputs are too few to
    fill the GPU that way: enough for about ``GPU_COLUMN_THREADS`` partial outputs of at least
    ``GPU_COLUMN_CHUNK`` rows, at least ``GPU_COLUMN_MIN_SPLITS`` (else 1). A mean over the
    middle dim of 1x4096x4096 (4096 outputs) ran 0.28x PyTorch on the H200, 0.09x on its Vulkan
    driver. The partials are laid out [s, outputs...] so that both kernels read and write
    along the outputs."""
    folds = fold_pattern(op.outputs)
    if folds is None or any(f.dtype == "i1" for _, f in folds) or (
            strict_floats and any(is_float(f.dtype) for _, f in folds)) or (
            len(folds) == 1 and is_contraction(folds[0], op.num_parallel)):
        return 1
    outputs = math.prod(op.loop_ranges[:op.num_parallel])
    extent = op.loop_ranges[op.num_parallel]
    if not outputs or not reads_along_outputs(op.num_parallel, len(op.loop_ranges), folds,
                                              lambda b: op.inputs[b].shape):
        return 1
    splits = min(GPU_COLUMN_THREADS // outputs, extent // GPU_COLUMN_CHUNK)
    return splits if splits >= GPU_COLUMN_MIN_SPLITS else 1


def _splits(op: Generic, gpu: bool, strict_floats: bool, tensor_f32: bool,
            may_be_patches: bool, cuda: bool = False) -> int:
    """How many chunks ``op``'s first reduction loop is split into (1: none), ``op`` static."""
    folds = fold_pattern(op.outputs)
    if folds is None or any(f.dtype == "i1" for _, f in folds) or (
            strict_floats and any(is_float(f.dtype) for _, f in folds)):
        return 1
    outputs = math.prod(op.loop_ranges[:op.num_parallel])
    extent = op.loop_ranges[op.num_parallel]
    contraction = len(folds) == 1 and is_contraction(folds[0], op.num_parallel)
    if contraction and gpu:
        rows, columns = _gemv_sides(op, folds[0][1])
        if rows <= GPU_GEMV_ROWS or (cuda and columns <= GPU_GEMV_ROWS):
            return vector_splits(op, folds[0][1], cuda)
    if contraction:
        narrow = gpu and _narrow_operands(folds[0][1], tensor_f32)
        tiles = -(-outputs // (TENSOR_TILE_OUTPUTS if narrow else TILE_OUTPUTS))
        if gpu and (narrow or extent < LONG_K) and tiles > GPU_MOST_TILES:
            return 1
        long_k, min_chunk = LONG_K, MIN_K_CHUNK
        if gpu and extent < LONG_K:
            vector = min(_side_extents(folds[0][1], op)) < GPU_MIN_SIDE
            long_k, min_chunk = GPU_LONG_K, GPU_VECTOR_K_CHUNK if vector else GPU_MIN_K_CHUNK
            if narrow and not vector and extent >= 2 * GPU_TENSOR_K_CHUNK:
                if not may_be_patches and tiles >= GPU_TENSOR_WHOLE_TILES:
                    return 1
                min_chunk = GPU_TENSOR_K_CHUNK
        if tiles >= FEW_TILES or extent < long_k:
            return 1
        most = min(-(-2 * FEW_TILES // tiles), extent // min_chunk)
        return max((d for d in range(2, most + 1) if extent % d == 0), default=1)
    if outputs >= FEW_OUTPUTS or math.prod(op.loop_ranges[op.num_parallel:]) < LONG_REDUCTION:
        return 1
    return min(-(-TARGET_PARTIALS // outputs), extent // MIN_CHUNK)


def _split(op: Generic, splits: int, batch: bool = False) -> list[Generic]:
    """[partial, final]: ``op``'s first reduction loop in ``splits`` chunks. A run-time
    extent is split in ``splits`` chunks of its ``splits``-th part: the caller's version holds
    only where ``splits`` divides it (``_run_time_k``). ``batch``: the partials laid out
    [s, outputs...], as a contraction's always are."""
    folds = fold_pattern(op.outputs)
    contraction = batch or (len(folds) == 1 and is_contraction(folds[0], op.num_parallel))
    extent = op.loop_ranges[op.num_parallel]
    if isinstance(extent, Size):
        chunk, rest, past = opaque("floordiv", extent, splits), 0, False
    elif len(op.loop_ranges) == op.num_parallel + 1 and extent % splits:
        chunk = extent // splits  # whole chunks; the final fold takes the rest
        rest, past = extent - splits * chunk, False
    else:
        chunk = -(-extent // splits)
        splits = -(-extent // chunk)
        rest, past = 0, splits * chunk > extent
    if any(f.dtype in NARROW for _, f in folds):  # f32 partials (flow/narrow_floats.py)
        op = widen(op)
        folds = fold_pattern(op.outputs)
    partial = _partial(op, folds, splits, chunk, contraction, past)
    return [partial, _final(op, folds, partial.results, splits, chunk, contraction, rest)]


def _by_size(op: Generic, bounds: dict, splits_of, small_sides: bool = False) -> list[Op]:
    """A contraction whose one run-time extent is a parallel loop's, as versions chosen per call
    (flow/versions.py): for each band of that extent's values over which ``splits_of`` (the
    static decision, ``_splits``) of ``op`` at that value is the same, that split (or ``op``
    whole), so a call runs what the static module compiled for its size would run, up to the
    tile each kernel picks per dispatch. Past ``MAX_VERSIONS`` bands, the first and the last two
    (the largest values: whole, and the fewest chunks) keep theirs and the second takes the
    bands between, with the most chunks any of them cuts (more than the static module would cut
    at some values, never fewer: on Vulkan the static plan has fewer chunks for 5-15 rows than
    for 1-4 or 16). A loop of an operand's side is probed at ``GPU_MIN_SIDE`` at least: below
    that the static module runs the matrix-vector template, which takes no run-time extent, and
    the tensor-core templates the versions run want the longer chunks' split; with
    ``small_sides`` (Vulkan, whose static
    module runs such a side on the tiled template too) up to ``GPU_GEMV_ROWS`` rows are probed
    as they are, so a decode's one row takes the static module's matrix-vector split. (From 5
    to 15 rows the static plan's longer chunks, ``GPU_VECTOR_K_CHUNK``, ran Vulkan's linears
    slower than the plan at 16 rows: BENCHMARKS.md, twenty-third session.)"""
    dims = [d for d, n in enumerate(op.loop_ranges) if isinstance(n, Size)]
    folds = fold_pattern(op.outputs)
    if len(dims) != 1 or dims[0] >= op.num_parallel or folds is None or len(folds) != 1 \
            or not is_contraction(folds[0], op.num_parallel) or size_values(op) \
            or index_sizes(op):
        return [op]  # (a size the kernel reads, a run-time offset: not probed)
    d, f = dims[0], folds[0][1]
    sides = _parallel_loops(f.a, op.num_parallel) ^ _parallel_loops(f.b, op.num_parallel)
    least = GPU_MIN_SIDE if d in sides else 1
    own = GPU_GEMV_ROWS if d in sides and small_sides else 0  # values probed as they are
    per_value = math.prod(n for k, n in enumerate(op.loop_ranges[:op.num_parallel]) if k != d)

    def splits_at(v: int) -> int:
        at = op.loop_ranges[:d] + (v if v <= own else max(v, least),) + op.loop_ranges[d + 1:]
        return splits_of(dataclasses.replace(op, loop_ranges=at))

    # the values where a tile count changes: the decision is the same between them
    starts = sorted({*range(1, GPU_MIN_SIDE + 2), *(t * unit // per_value + 1
                                                  for unit in (TILE_OUTPUTS, TENSOR_TILE_OUTPUTS)
                                                  for t in range(FEW_TILES + 2))})
    bands: list[list[int]] = []  # [first value, splits]
    for v in starts:
        splits = splits_at(v)
        if not bands or bands[-1][1] != splits:
            bands.append([v, splits])
    if all(splits < 2 for _, splits in bands):
        return [op]
    extent = op.loop_ranges[d]
    bands = [b for n, b in enumerate(bands) if n + 1 == len(bands)
             or compare("ge", extent, bands[n + 1][0], bounds) is not True]
    bands = [b for n, b in enumerate(bands) if n == 0 or compare("lt", extent, b[0], bounds)
             is not True]
    if len(bands) > MAX_VERSIONS:  # the second band takes those up to the last two, and the
        between = bands[MAX_VERSIONS - 3:-2]  # most chunks any of them cuts
        bands = bands[:MAX_VERSIONS - 3] + [[between[0][0], max(s for _, s in between)]] \
            + bands[-2:]

    def version(splits: int) -> list[Op]:
        return _split(op, splits) if splits >= 2 else [dataclasses.replace(op)]

    if len(bands) == 1:
        return version(bands[0][1])
    chosen = [(compare("lt", extent, bands[n + 1][0], bounds), version(splits))
              for n, (_, splits) in enumerate(bands[:-1])]
    return [by_size(op.results, chosen, version(bands[-1][1]), op.location)]


def _run_time_k(op: Generic, bounds: dict, strict_floats: bool, tensor_f32: bool) -> list[Op]:
    """A GPU contraction whose K (its one reduction loop) is a run-time extent, as versions
    chosen per call (flow/versions.py): split in ``s`` chunks of K / s where the static rule
    (``_splits``, from ``LONG_K`` on) would cut it at least ``s`` ways and s divides the call's
    K, for s in ``RUN_TIME_K_SPLITS``; else whole. The chunk is a run-time size, so the partial
    product reads k = s * (K / s) + c through a run-time coefficient, which the SIMT templates
    address and the tensor-core ones do not stage: a product they take (f16, bf16, TF32) stays
    whole. At 1024^3 f32 with every dim at run time the whole product ran 111 us where the
    static module's 4 chunks ran 84 (64 tiles of 128 x 128 on 132 multiprocessors;
    BENCHMARKS.md, twenty-second session)."""
    p = op.num_parallel
    folds = fold_pattern(op.outputs)
    if len(op.loop_ranges) != p + 1 or folds is None or len(folds) != 1 \
            or not is_contraction(folds[0], p) or folds[0][1].dtype == "i1" \
            or (strict_floats and is_float(folds[0][1].dtype)) or size_values(op) \
            or index_sizes(op) or _narrow_operands(folds[0][1], tensor_f32):
        return [op]
    extent = op.loop_ranges[p]
    tiles = opaque("ceildiv", num_elements(op.loop_ranges[:p]), TILE_OUTPUTS)
    chosen = []
    for splits in RUN_TIME_K_SPLITS:
        # the static rule's most chunks, min(ceil(2 * FEW_TILES / tiles), K // MIN_K_CHUNK),
        # is at least ``splits``, with fewer than FEW_TILES tiles
        most_tiles = min(FEW_TILES - 1, -(-2 * FEW_TILES // (splits - 1)) - 1)
        held = [compare("ge", extent, max(LONG_K, splits * MIN_K_CHUNK), bounds),
                compare("le", tiles, most_tiles, bounds),
                compare("eq", opaque("mod", extent, splits), 0, bounds)]
        if False in held:
            continue
        condition = math.prod(int(h) if isinstance(h, bool) else h for h in held)
        chosen.append((condition, _split(op, splits)))
        if condition == 1:
            break
    if not chosen:
        return [op]
    if chosen[-1][0] == 1:  # holds for every size: the last version
        *chosen, (_, rest) = chosen
        if not chosen:
            return rest
    else:
        rest = [dataclasses.replace(op)]
    return [by_size(op.results, chosen, rest, op.location)]


def is_contraction(fold, num_parallel: int) -> bool:
    """``acc += a * b`` where a and b each miss a parallel loop the other reads (a matmul's m, n)."""
    f = fold_product(fold)
    if f is None:
        return False
    a, b = (_parallel_loops(side, num_parallel) for side in (f.a, f.b))
    return bool(a - b) and bool(b - a)


def has_contraction(op: Generic) -> bool:
    """Whether one of ``op``'s folds is a contraction (``is_contraction``)."""
    folds = fold_pattern(op.outputs)
    return folds is not None and any(is_contraction(f, op.num_parallel) for f in folds)


def vector_splits(op: Generic, f: Binary, cuda: bool = False) -> int:
    """The chunks a GPU matrix-vector product's K is split into: the fewest (dividing K) that
    give ``GPU_VECTOR_BLOCKS`` blocks of the matrix-vector template; none on cuda for a column
    of at most ``GPU_VECTOR_WHOLE_BYTES``."""
    extent, k = op.loop_ranges[op.num_parallel], op.num_parallel
    x, y = _factors(op, f)
    rows, columns = _gemv_sides(op, f)
    matrix = y
    if rows > GPU_GEMV_ROWS:  # the template swaps m and n: X is the matrix
        matrix, columns, rows = x, rows, columns
    loads = [e for e in walk(matrix) if isinstance(e, Load)]
    k_major = any(e.index and e.index[-1].coeffs[k] == 1 for e in loads)
    size = max(1, min((itemsize(e.dtype) for e in loads), default=4))
    if cuda and isinstance(extent, int) and extent * size <= GPU_VECTOR_WHOLE_BYTES:
        return 1
    per_block = 8 if k_major else max(1, 128 // size)
    batch = math.prod(op.loop_ranges[:op.num_parallel]) // max(1, rows * columns)
    blocks = max(1, -(-columns // per_block) * batch)
    wanted = -(-GPU_VECTOR_BLOCKS // blocks)
    least_chunk = 32 * max(1, 16 // size) if k_major else GPU_VECTOR_MIN_ROWS
    most = extent // least_chunk
    if wanted < 2 or most < 2:
        return 1
    fits = [d for d in range(2, most + 1) if extent % d == 0]
    return min((d for d in fits if d >= wanted), default=max(fits, default=1))


def _factors(op: Generic, f: Binary) -> tuple[Expr, Expr]:
    """A contraction's X and Y as the GPU templates see them: Y reads the last parallel loop."""
    n = op.num_parallel - 1
    return (f.a, f.b) if n in _parallel_loops(f.b, op.num_parallel) else (f.b, f.a)


def _gemv_sides(op: Generic, f: Binary) -> tuple[int, int]:
    """A contraction's m and n as the GPU templates see them: the extents of the parallel loops
    only X reads and only Y reads. The matrix-vector template takes m up to
    ``GPU_GEMV_ROWS``, or such an n (its m and n swapped; measured on cuda only, so the split
    counts on it only there: a batched f32 matrix times a vector, bij,bj->bi, split 4 ways
    for a tiled template ran at 0.22x PyTorch on the H200)."""
    x, y = (_parallel_loops(side, op.num_parallel) for side in _factors(op, f))
    return (math.prod(op.loop_ranges[d] for d in x - y),
            math.prod(op.loop_ranges[d] for d in y - x))


def _narrow_operands(f: Binary, tensor_f32: bool = False) -> bool:
    """Both factors are f16 (bf16) loads extended to f32, or with ``tensor_f32`` f32 loads: what
    the tensor-core templates take."""
    if tensor_f32 and all(isinstance(side, Load) and side.dtype == "f32" for side in (f.a, f.b)):
        return True
    return all(isinstance(side, Cast) and side.op == "fpext" and isinstance(side.x, Load)
               and side.x.dtype in ("f16", "bf16") for side in (f.a, f.b))


def _side_extents(f: Binary, op: Generic) -> tuple[int, int]:
    """A contraction's m and n: the extents of the parallel loops only one operand reads."""
    a, b = (_parallel_loops(side, op.num_parallel) for side in (f.a, f.b))
    return math.prod(op.loop_ranges[d] for d in a - b), math.prod(op.loop_ranges[d] for d in b - a)


def _parallel_loops(e, num_parallel: int) -> set[int]:
    loops = set()
    for node in walk(e):
        if isinstance(node, Load):
            loops |= {d for ix in node.index for d, c in enumerate(ix.coeffs) if c != 0 and d < num_parallel}
        elif isinstance(node, LoopIndex) and node.dim < num_parallel:
            loops.add(node.dim)
    return loops


def _unit(n: int, d: int, const: int = 0) -> AffineExpr:
    return AffineExpr.loop(n, d, const=const)


def _partial(op: Generic, folds, splits: int, chunk, batch: bool, past: bool) -> Generic:
    """Loops (s, parallel... | c, other reductions...); result k[s, ...] (``batch``, a
    contraction's batch of products) or k[..., s] (so the final fold reads its partials
    contiguously) folds its chunk; ``past``: the last chunk runs past the extent."""
    n, p = len(op.loop_ranges), op.num_parallel
    new = n + 1
    loop_map = [_unit(new, d + 1) for d in range(n)]  # s is loop 0; c takes r0's place
    loop_map[p] = AffineExpr(tuple(chunk if d == 0 else int(d == p + 1) for d in range(new)))
    position = affine_value(loop_map[p])
    index = tuple(_unit(new, d) for d in range(p + 1))
    shape = (splits,) + tuple(op.loop_ranges[:p])
    if not batch:
        index, shape = index[1:] + index[:1], shape[1:] + shape[:1]
    results, outputs = [], []
    for k, (fold, f) in enumerate(folds):
        identity = Const(fold_identity(fold, f.dtype), f.dtype)
        moved = remap_loops(f, tuple(loop_map), new, lambda b: b)
        if past:
            inside = Compare("lt", position, Const(op.loop_ranges[p], "index"))
            moved = Select(inside, moved, identity, f.dtype)
        results.append(Value(f.dtype, shape))
        outputs.append(Result(k, index, Binary(fold, Acc(k, f.dtype), moved, f.dtype), identity))
    return drop_unread(Generic(
        inputs=list(op.inputs), results=results, outputs=tuple(outputs),
        loop_ranges=(splits,) + tuple(op.loop_ranges[:p]) + (chunk,) + tuple(op.loop_ranges[p + 1:]),
        num_parallel=p + 1, location=op.location, origin=f"{op.origin} (partial folds)",
        sources=sources_of(op)))


def _final(op: Generic, folds, partials: list[Value], splits: int, chunk,
           batch: bool, rest: int) -> Generic:
    """Folds the partials over s; init and epilogue as before, at the reduction's first index.
    The ``rest`` elements past the whole chunks (fewer than ``splits``) fold in here, one at
    each s."""
    n, p = len(op.loop_ranges), op.num_parallel
    new = p + 1
    at_start = tuple(_unit(new, d) if d < p else AffineExpr((0,) * new) for d in range(n))
    base = len(op.inputs)

    def move(e, loop_map=at_start):
        return None if e is None else remap_loops(e, loop_map, new, lambda b: b)

    outputs = []
    for k, ((fold, f), r) in enumerate(zip(folds, op.outputs)):
        index = tuple(_unit(new, d) for d in range(p + 1))
        term = Load(base + k, index[p:] + index[:p] if batch else index, f.dtype)
        if rest > 0:
            past = at_start[:p] + (_unit(new, p, splits * chunk),)
            inside = Compare("lt", LoopIndex(p), Const(rest, "index"))
            tail = Select(inside, move(f, past), Const(fold_identity(fold, f.dtype), f.dtype), f.dtype)
            term = Binary(fold, term, tail, f.dtype)
        outputs.append(Result(r.binding, tuple(compose(ix, at_start, new) for ix in r.index),
                              Binary(fold, Acc(k, f.dtype), term, f.dtype),
                              move(r.init), move(r.epilogue)))
    return drop_unread(Generic(
        inputs=list(op.inputs) + list(partials), results=list(op.results), outputs=tuple(outputs),
        loop_ranges=tuple(op.loop_ranges[:p]) + (splits,),
        num_parallel=p, location=op.location, origin=op.origin, sources=sources_of(op)))
