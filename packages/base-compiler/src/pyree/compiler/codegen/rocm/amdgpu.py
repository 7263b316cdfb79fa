"""The AMDGPU side of ``common/llvm_gpu/llvm_text``'s target interface, so that the LLVM GPU kernel
templates (``common/llvm_gpu``: elementwise.py, reduction.py) emit AMDGPU LLVM IR:
``amdgpu_kernel`` kernels, ids from
``llvm.amdgcn.workitem.id.*``/``workgroup.id.*``, the block size from the HSA dispatch packet,
``s.barrier`` between workgroup-scope fences, private allocas in address space 5 (cast to flat for
the templates, which InferAddressSpaces/SROA undo), cross-lane shuffles through ``ds.bpermute``,
code object v5, and ``amdgpu-flat-work-group-size`` set to each export's block size. With
``link_bc`` (``--iree-rocm-link-bc``) math ops are calls to AMD's ocml (``device_libs``).
"""

from __future__ import annotations

from pyree.compiler.codegen.rocm import device_libs
from pyree.compiler.codegen.rocm.targets import RocmTarget

_IDS = {"tid": "workitem.id", "ctaid": "workgroup.id"}


class AmdgpuTarget:
    backend = "rocm"
    triple = "amdgcn-amd-amdhsa"
    kernel_cc = "amdgpu_kernel"

    def __init__(self, target: RocmTarget, link_bc: bool = False):
        self.target = target
        self.warp_size = target.wave_size
        self.link_bc = link_bc

    def library_math(self, op: str, dtype: str) -> tuple[str, str] | None:
        return device_libs.ocml_function(op, dtype) if self.link_bc else None

    def special(self, fn, reg: str) -> str:
        kind, dim = reg.split(".")
        if kind in _IDS:
            return fn.call("i32", f"llvm.amdgcn.{_IDS[kind]}.{dim}", [])
        if kind == "ntid":  # hsa_kernel_dispatch_packet_t.workgroup_size_{x,y,z}: u16 at 4, 6, 8
            packet = fn.call("ptr addrspace(4)", "llvm.amdgcn.dispatch.ptr", [])
            at = fn.op(f"getelementptr i8, ptr addrspace(4) {packet}, i64 {4 + 2 * 'xyz'.index(dim)}")
            size = fn.op(f"load i16, ptr addrspace(4) {at}, align 2")
            return fn.op(f"zext i16 {size} to i32")
        raise ValueError(f"no AMDGPU equivalent of the PTX register {reg}")

    def barrier(self, fn) -> None:
        fn.raw('fence syncscope("workgroup") release')
        fn.call("void", "llvm.amdgcn.s.barrier", [], "convergent nounwind")
        fn.raw('fence syncscope("workgroup") acquire')

    def alloca(self, name: str, ty: str) -> list[str]:
        return [f"  {name}.private = alloca {ty}, addrspace(5)",
                f"  {name} = addrspacecast ptr addrspace(5) {name}.private to ptr"]

    def shuffle_xor32(self, fn, value: str, ty: str, lane_mask: int) -> str:
        lane = fn.call("i32", "llvm.amdgcn.mbcnt.lo", [("i32", "-1"), ("i32", "0")])
        if self.warp_size == 64:
            lane = fn.call("i32", "llvm.amdgcn.mbcnt.hi", [("i32", "-1"), ("i32", lane)])
        addr = fn.op(f"shl i32 {fn.op(f'xor i32 {lane}, {lane_mask}')}, 2")
        bits = fn.op(f"bitcast float {value} to i32") if ty == "float" else value
        out = fn.call("i32", "llvm.amdgcn.ds.bpermute", [("i32", addr), ("i32", bits)],
                      "convergent nounwind")
        return fn.op(f"bitcast i32 {out} to float") if ty == "float" else out

    def kernel_attributes(self, max_threads: int, min_blocks: int, block_size: int) -> str:
        size = block_size or max_threads or 256
        return f'"amdgpu-flat-work-group-size"="1,{size}"'

    def module_trailer(self) -> list[str]:
        return ["!llvm.module.flags = !{!0}",
                '!0 = !{i32 1, !"amdhsa_code_object_version", i32 500}']
