"""Elementwise kernels (no reduction loops): one thread per ``V`` consecutive innermost elements.

``V`` is 16 bytes over the widest element type (4 x f32, 8 x f16) when the innermost range allows.
Accesses that are contiguous and V-aligned in that loop become one 16-byte vector load/store; a
uniform branch checks at run time that those binding pointers are 16-byte aligned and otherwise
takes the scalar copy of the body, so an odd binding offset is slower, never wrong.
"""

from __future__ import annotations

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div, linearize
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, storage_type
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.sizes import (
    Size,
    compare,
    is_static,
    num_elements,
    opaque,
    select,
    substitute,
)

BLOCK = 256
MAX_GRID = 65535  # blocks of a grid-stride kernel (emit_strided)
MIN_GROUPS = 131072  # about half the threads an H200 holds


def vector_width(kernel: K.Kernel) -> int:
    """16 bytes of the widest type a thread's lanes read or write apart: a binding read at the
    same element by every lane (an i64 position or an f32 bias along an outer dim) does not
    narrow the group (a decode step's f16 cache, written under a select of its i64 row numbers,
    ran two lanes a thread at half the copy bandwidth), as long as the groups stay at least
    ``MIN_GROUPS``: a small kernel's latency wants the threads (a GRU's 64x512 gates and
    grid_sample's 262144 gathered points each ran slower in half as many)."""
    par = kernel.parallel_ranges
    if not par:
        return 1
    inner = len(par) - 1
    apart = {r.binding for r in kernel.results} | {
        e.binding for r in kernel.results for e in K.walk(r.value)
        if isinstance(e, K.Gather) or (isinstance(e, K.Load) and any(
            not (is_static(ix.coeffs[inner]) and ix.coeffs[inner] == 0) for ix in e.index))}
    narrow = _fitting(16 // max(K.itemsize(b.dtype) for b in kernel.bindings), par[-1])
    width = _fitting(16 // max(K.itemsize(kernel.bindings[b].dtype) for b in apart), par[-1])
    elements = num_elements(par)
    while width > narrow and (not is_static(elements) or elements // width < MIN_GROUPS):
        width //= 2
    return width


def _fitting(width: int, last) -> int:
    """``width`` halved until it divides the innermost extent ``last``."""
    while width > 1 and last % width:
        width //= 2
    return max(width, 1)


def plan(kernel: K.Kernel, target) -> tuple[int, ...]:
    """The parallel ranges: the last template, it takes every kernel."""
    return kernel.parallel_ranges


def emit(module: Module, kernel: K.Kernel, name: str, plan: tuple[int, ...]) -> Launch:
    par = kernel.parallel_ranges
    n = len(par)
    width = vector_width(kernel)
    groups = int(np.prod(par, dtype=np.int64)) // width
    loops = range(n)
    lin = {}  # (binding, index) -> Linear
    for e in _loads(kernel):
        lin[(e.binding, e.index)] = linearize(kernel.bindings[e.binding], e.index, n)
    for r in kernel.results:
        lin[(r.binding, r.index)] = linearize(kernel.bindings[r.binding], r.index, n)
    vectorizable = {key for key, l in lin.items()
                    if width > 1 and l.contiguous(n - 1, width, loops)}

    fn = Function(module)
    g = A.global_thread_id(fn)

    fn.if_then(fn.op(f"icmp ult i64 {g}, {groups}"),
               lambda: _group(fn, kernel, g, par[:-1] + (par[-1] // width,) if n else par, width,
                              lin, vectorizable))
    block = min(BLOCK, ceil_div(groups, 32) * 32)
    module.add_kernel(name, A.kernel_params(kernel), fn, block_size=block)
    return Launch((ceil_div(groups, block), 1, 1), (block, 1, 1))


def emit_strided(module: Module, kernel: K.Kernel, name: str, fn: Function, sizes) -> Launch:
    """A kernel with run-time sizes (``sizes``: its ``size_values.SizeValues``; ``fn``: its body
    so far): one thread per group of ``vector_width`` elements, in a grid-stride loop over a
    grid of at most ``MAX_GRID`` blocks, so that any extent fits the grid and an empty one
    launches nothing. A group's accesses are vectors where they are contiguous and aligned to
    the group (as ``emit``'s). Where the innermost range is a run-time size, a dispatch whose
    innermost range the group divides takes the groups, any other one element a thread: both
    bodies are in the kernel, behind a branch every thread takes alike, and the grid is the
    chosen one's."""
    par = kernel.parallel_ranges
    n = len(par)
    total = num_elements(par)
    linear = {}
    for b, index in [*((e.binding, e.index) for e in _loads(kernel)),
                     *((r.binding, r.index) for r in kernel.results)]:
        linear.setdefault((b, index), linearize(kernel.bindings[b], index, n))
    lin = {key: A.emitted(l, sizes) for key, l in linear.items()}
    ranges = tuple(sizes(r) for r in par)
    width = (vector_width(kernel) if is_static(par[-1]) else _widest(kernel)) if n else 1
    if width == 1:
        grid = _grid(total)
        fn.loop(A.global_thread_id(fn), str(sizes(total)), fn.op(f"mul i64 {sizes(grid)}, {BLOCK}"),
                lambda i: _group(fn, kernel, i, ranges, 1, lin, set()))
        module.add_kernel(name, A.kernel_params(kernel, sizes), fn, block_size=BLOCK)
        return Launch((grid, 1, 1), (BLOCK, 1, 1))
    groups = num_elements(par[:-1]) * opaque("floordiv", par[-1], width)
    vectorizable = {key for key, l in linear.items() if _aligned_groups(l, n, width, par[-1])}
    row_groups = ranges[:-1] + (sizes(opaque("floordiv", par[-1], width)),)
    if is_static(par[-1]):
        grid = _grid(groups)
        fn.loop(A.global_thread_id(fn), str(sizes(groups)), fn.op(f"mul i64 {sizes(grid)}, {BLOCK}"),
                lambda i: _group(fn, kernel, i, row_groups, width, lin, vectorizable))
    else:
        even = compare("eq", opaque("mod", par[-1], width), 0)
        grid = _grid(select(even, groups, total))
        stride = fn.op(f"mul i64 {sizes(grid)}, {BLOCK}")
        start = A.global_thread_id(fn)
        vec, scal, done = fn.new_label("groups"), fn.new_label("elements"), fn.new_label("done")
        fn.cbr(fn.op(f"icmp ne i64 {sizes(even)}, 0"), vec, scal)
        fn.label(vec)
        fn.loop(start, str(sizes(groups)), stride,
                lambda i: _group(fn, kernel, i, row_groups, width, lin, vectorizable))
        fn.br(done)
        fn.label(scal)
        fn.loop(start, str(sizes(total)), stride,
                lambda i: _group(fn, kernel, i, ranges, 1, lin, set()))
        fn.br(done)
        fn.label(done)
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, block_size=BLOCK)
    return Launch((grid, 1, 1), (BLOCK, 1, 1))


def _grid(count):
    return opaque("min", opaque("ceildiv", count, BLOCK), MAX_GRID)


def _widest(kernel: K.Kernel) -> int:
    """Elements per group: 16 bytes of the widest element."""
    return max(1, 16 // max(K.itemsize(b.dtype) for b in kernel.bindings))


def _aligned_groups(l, n: int, width: int, last) -> bool:
    """Whether an access's group is ``width`` consecutive elements at a multiple of ``width``
    for every group: unit stride along the innermost loop, every other stride and the offset
    static multiples of ``width``, or, where the innermost range ``last`` is a symbol that the
    groups divide, multiples of it."""
    names = sorted(last.symbols()) if not is_static(last) else []
    symbol = names[0] if len(names) == 1 and last == Size.symbol(names[0]) else None

    def divides(c) -> bool:
        if is_static(c):
            return c % width == 0
        return symbol is not None and substitute(c, {symbol: 0}) == 0
    return is_static(l.coeffs[n - 1]) and l.coeffs[n - 1] == 1 and divides(l.const) and all(
        divides(c) for d, c in enumerate(l.coeffs) if d != n - 1)


def _group(fn: Function, kernel: K.Kernel, g: str, ranges: tuple, width: int, lin: dict,
           vectorizable: set) -> None:
    """Group ``g``'s ``width`` elements (``ranges``: the parallel ranges, the last counted in
    groups): vectors where every vectorizable binding is 16-byte aligned (a
    uniform branch), else the same body with scalar accesses."""
    if ranges:
        idx = A.decompose(fn, g, ranges)
        idx[-1] = fn.op(f"mul i64 {idx[-1]}, {width}") if width > 1 else idx[-1]
    else:
        idx = []
    if not vectorizable:
        _body(fn, kernel, idx, width, lin, set())
        return
    aligned = "true"
    for b in sorted({b for b, _ in vectorizable}):
        addr = fn.op(f"ptrtoint ptr addrspace(1) %b{b} to i64")
        mask = width * K.itemsize(kernel.bindings[b].dtype) - 1
        ok = fn.op(f"icmp eq i64 {fn.op(f'and i64 {addr}, {mask}')}, 0")
        aligned = fn.op(f"and i1 {aligned}, {ok}")
    vec, scal, done = fn.new_label("vec"), fn.new_label("scalar"), fn.new_label("join")
    fn.cbr(aligned, vec, scal)
    fn.label(vec)
    _body(fn, kernel, idx, width, lin, vectorizable)
    fn.br(done)
    fn.label(scal)
    _body(fn, kernel, idx, width, lin, set())
    fn.br(done)
    fn.label(done)


def _vector_load(fn: Function, cache: dict, lin: dict, idx: list[str], width: int, key,
                 dtype: str) -> str:
    """The vector at ``key`` = (binding, index) for the group at ``idx``, loaded once where
    ``cache`` (the lowering's current scope) does not hold it yet."""
    slot = ("vector", *key)
    if slot not in cache:
        ptr = A.element_ptr(fn, f"%b{key[0]}", dtype, A.offset(fn, lin[key], idx))
        cache[slot] = fn.op(f"load <{width} x {storage_type(dtype)}>, ptr addrspace(1) {ptr}, "
                            f"align {width * K.itemsize(dtype)}")
    return cache[slot]


def _loads(kernel: K.Kernel):
    for r in kernel.results:
        for e in K.walk(r.value):
            if isinstance(e, K.Load):
                yield e


def _body(fn: Function, kernel: K.Kernel, idx: list[str], width: int, lin: dict,
          vectorized: set) -> None:
    """The lanes' values one after another, then the stores. A vectorized load is one vector
    load that every lane extracts its element from; it is kept in the lowering's cache (under
    ``("vector", binding, index)``), which a Select that branches copies for each arm, so a
    vector loaded inside an arm is used only there, and the next lane starts from the vectors
    loaded outside every branch. A shared table of vectors had let a later lane use a load made
    inside an earlier lane's branch, which does not dominate it (a concat's arms, ShuffleNet v2:
    "Instruction does not dominate all uses")."""
    lanes, carried = [], {}
    for lane in range(width):
        loop = idx[:-1] + [fn.op(f"add i64 {idx[-1]}, {lane}")] if idx else []
        current: list[ScalarLowering] = []

        def load(e: K.Load, loop=loop, lane=lane, current=current):
            key = (e.binding, e.index)
            if key in vectorized:
                v = fn.op(f"extractelement <{width} x {storage_type(e.dtype)}> "
                          f"{_vector_load(fn, current[0].cache, lin, idx, width, key, e.dtype)}, "
                          f"i32 {lane}")
                return fn.op(f"icmp ne i8 {v}, 0") if e.dtype == "i1" else v
            ptr = A.element_ptr(fn, f"%b{e.binding}", e.dtype, A.offset(fn, lin[key], loop))
            return A.load(fn, ptr, e.dtype)

        lower = ScalarLowering(fn, load, lambda d, loop=loop: loop[d], location=kernel.location,
                               kernel=kernel)
        current.append(lower)
        lower.cache.update(carried)
        lanes.append([lower(r.value) for r in kernel.results])
        carried = {k: v for k, v in lower.cache.items() if isinstance(k, tuple)}

    for k, r in enumerate(kernel.results):
        dtype = kernel.bindings[r.binding].dtype
        key = (r.binding, r.index)
        if key in vectorized:
            st = storage_type(dtype)
            vec = "undef"
            for lane in range(width):
                v = lanes[lane][k]
                if dtype == "i1":
                    v = fn.op(f"zext i1 {v} to i8")
                vec = fn.op(f"insertelement <{width} x {st}> {vec}, {st} {v}, i32 {lane}")
            ptr = A.element_ptr(fn, f"%b{r.binding}", dtype, A.offset(fn, lin[key], idx))
            fn.raw(f"store <{width} x {st}> {vec}, ptr addrspace(1) {ptr}, "
                   f"align {width * K.itemsize(dtype)}")
        else:
            for lane in range(width):
                loop = idx[:-1] + [fn.op(f"add i64 {idx[-1]}, {lane}")] if idx else []
                ptr = A.element_ptr(fn, f"%b{r.binding}", dtype, A.offset(fn, lin[key], loop))
                A.store(fn, ptr, dtype, lanes[lane][k])
