"""Hopper's tensor memory accelerator (sm_90a) for the wgmma template: 2-D tiles copied global ->
shared by one thread (``cp.async.bulk.tensor``), into the 128-byte swizzle wgmma's descriptors
read, with out-of-range elements zero-filled, each stage's arrival counted in bytes on an
mbarrier.

A copy names a tensor map, a 128-byte descriptor of the operand (address, extents, row stride,
box, swizzle) that must sit in global, constant or parameter memory. The kernel writes its own:
zeroed in shared memory, each field set with ``tensormap.replace``, copied to global memory with
the release fence of the tensor-map proxy (as Triton's device-side descriptors are made), so the
runtime, its drivers and the module format need nothing new. The copy in global memory is a slot
of a module global indexed by the multiprocessor (``%smid``): a wgmma block takes most of a
multiprocessor's shared memory, so one runs there at a time, and a loaded CUDA module serves one
pyree device (hal-cuda's executable cache is the device's), whose one stream runs one kernel at a
time, whichever threads submit (were two blocks of one dispatch to share a slot, past
``SLOTS`` multiprocessors, they write the same bytes: a map describes the whole operand). An
operand whose address is not 16-byte aligned takes the cp.async path instead (``ready``), in
every block alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module

SLOTS = 256              # multiprocessor ids with a slot (an H100/H200 has 132)
MAP_BYTES = 128
SCRATCH_BYTES = 1024     # shared memory past the stages: the maps being made, then mbarriers
SWIZZLE_128B, U16, ZERO_FILL = 3, 1, 0


@dataclass(frozen=True)
class Map:
    """A 2-D operand tile: ``inner`` (contiguous) x ``outer`` elements of 2 bytes, rows ``stride``
    bytes apart, starting at ``offset`` elements into binding ``binding``; boxes of
    ``box_inner`` x ``box_outer``."""
    binding: int
    offset: int
    inner: int
    outer: int
    stride: int
    box_inner: int
    box_outer: int


def _asm(fn: Function, text: str, args: list[tuple[str, str]]) -> None:
    """Inline PTX, kept where it is written (``convergent``): LLVM otherwise may copy a
    warp-wide instruction (``.sync.aligned``) into a branch that only some threads take (it
    once copied a cluster barrier into thread 0's, and the blocks waited for ever)."""
    constraints = ["r" if t == "i32" else "l" for t, _ in args]
    fn.inline_asm("void", text, ",".join(constraints + ["~{memory}"]), args, convergent=True)


def base_address(fn: Function, m: Map) -> str:
    """The operand's first element as an i64 global address."""
    ptr = fn.op(f"getelementptr i8, ptr addrspace(1) %b{m.binding}, i64 {2 * m.offset}")
    return fn.op(f"ptrtoint ptr addrspace(1) {ptr} to i64")


def ready(fn: Function, maps: list[Map]) -> str:
    """i1, alike for every block of the dispatch: the maps can be used (their operands start on
    16-byte multiples)."""
    ok = "true"
    for m in maps:
        low = fn.op(f"and i64 {base_address(fn, m)}, 15")
        ok = fn.op(f"and i1 {ok}, {fn.op(f'icmp eq i64 {low}, 0')}")
    return ok


def addresses(fn: Function, module: Module, name: str, count: int) -> list[str]:
    """The generic i64 addresses of this multiprocessor's slots for ``count`` maps of kernel
    ``name`` (a module global of ``SLOTS`` x ``count`` maps)."""
    table = module.device_array(f"{name}_maps", SLOTS * count * MAP_BYTES, MAP_BYTES)
    slot = fn.op(f"and i32 {fn.special('smid')}, {SLOTS - 1}")
    smid = fn.op(f"zext i32 {slot} to i64")
    out = []
    for j in range(count):
        at = fn.op(f"add i64 {fn.op(f'mul i64 {smid}, {count * MAP_BYTES}')}, {j * MAP_BYTES}")
        ptr = fn.op(f"getelementptr i8, ptr addrspace(1) {table}, i64 {at}")
        out.append(fn.op(f"ptrtoint ptr {fn.op(f'addrspacecast ptr addrspace(1) {ptr} to ptr')} to i64"))
    return out


def make(fn: Function, maps: list[Map], addrs: list[str], scratch: str, warp: str, lane: str) -> None:
    """Writes ``maps`` (warp 0) at ``addrs``. ``scratch``: an i32 shared address with
    ``MAP_BYTES`` per map, 128-byte aligned. The block must pass a barrier before any copy
    reads them; the copying thread then acquires them (``acquire``)."""

    def zero():  # 16 bytes a lane
        at = fn.op(f"add i32 {scratch}, {fn.op(f'shl i32 {lane}, 4')}")
        ptr = fn.op(f"inttoptr i32 {at} to ptr addrspace(3)")
        fn.raw(f"store <4 x i32> zeroinitializer, ptr addrspace(3) {ptr}, align 16")

    def write():
        fn.if_then(fn.op(f"icmp ult i32 {lane}, {len(maps) * MAP_BYTES // 16}"), zero)
        _asm(fn, "bar.warp.sync -1;", [])

        def fields():
            for j, m in enumerate(maps):
                s = fn.op(f"add i32 {scratch}, {j * MAP_BYTES}")
                set_ = [("global_address", "b64", None, ("i64", base_address(fn, m))),
                        ("rank", "b32", None, "1"),
                        ("box_dim", "b32", 0, str(m.box_inner)), ("box_dim", "b32", 1, str(m.box_outer)),
                        ("global_dim", "b32", 0, str(m.inner)), ("global_dim", "b32", 1, str(m.outer)),
                        ("global_stride", "b64", 0, str(m.stride)),
                        ("element_stride", "b32", 0, "1"), ("element_stride", "b32", 1, "1"),
                        ("elemtype", "b32", None, str(U16)), ("interleave_layout", "b32", None, "0"),
                        ("swizzle_mode", "b32", None, str(SWIZZLE_128B)),
                        ("fill_mode", "b32", None, str(ZERO_FILL))]
                for field, width, ordinal, value in set_:
                    where = "" if ordinal is None else f"{ordinal}, "
                    op = f"tensormap.replace.tile.{field}.shared::cta.b1024.{width} [$0], {where}"
                    if isinstance(value, tuple):
                        _asm(fn, op + "$1;", [("i32", s), value])
                    else:
                        _asm(fn, op + f"{value};", [("i32", s)])
        fn.if_then(fn.op(f"icmp eq i32 {lane}, 0"), fields)
        _asm(fn, "bar.warp.sync -1;", [])
        for j, g in enumerate(addrs):
            s = fn.op(f"add i32 {scratch}, {j * MAP_BYTES}")
            _asm(fn, "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu"
                     f".sync.aligned [$0], [$1], {MAP_BYTES};", [("i64", g), ("i32", s)])
    fn.if_then(fn.op(f"icmp eq i32 {warp}, 0"), write)


def acquire(fn: Function, addrs: list[str]) -> None:
    for g in addrs:
        _asm(fn, f"fence.proxy.tensormap::generic.acquire.gpu [$0], {MAP_BYTES};", [("i64", g)])


def init_barriers(fn: Function, bars: list[str]) -> None:
    """Each mbarrier (i32 shared addresses) waits for one arrival and its bytes."""
    for b in bars:
        _asm(fn, "mbarrier.init.shared::cta.b64 [$0], 1;", [("i32", b)])
    _asm(fn, "fence.mbarrier_init.release.cluster;", [])


def expect(fn: Function, bar: str, nbytes: int) -> None:
    _asm(fn, f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {nbytes};", [("i32", bar)])


def copy(fn: Function, dst: str, tmap: str, inner: str, outer: str, bar: str) -> None:
    """The box at element (inner, outer) (i32; out of range reads zeros) into ``dst``, its bytes
    counted on the mbarrier at ``bar``."""
    _asm(fn, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
             "[$0], [$1, {$2, $3}], [$4];",
         [("i32", dst), ("i64", tmap), ("i32", inner), ("i32", outer), ("i32", bar)])


def wait(fn: Function, bar: str, parity: str) -> None:
    """Until phase ``parity`` (i32 0/1) of ``bar`` completes."""
    _asm(fn, "{ .reg .pred p; wait_${:uid}: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; "
             "@!p bra wait_${:uid}; }", [("i32", bar), ("i32", parity)])
