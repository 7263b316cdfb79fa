"""The NVPTX (cuda) side of the target interface that the LLVM GPU kernel templates ask
(``codegen/common/llvm_gpu/llvm_text.py``); ``codegen/rocm/amdgpu.py`` is the AMDGPU side."""

from __future__ import annotations

from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function


class NvptxTarget:
    """The NVPTX (cuda) side of the target interface that the kernel templates use."""

    backend = "cuda"
    triple = "nvptx64-nvidia-cuda"
    kernel_cc = "ptx_kernel"
    warp_size = 32

    def library_math(self, op: str, dtype: str) -> tuple[str, str] | None:
        """(function, dtype it computes in) of a device library the target links for math ``op``
        on ``dtype``; None: ``scalar.py`` composes it (NVPTX links no libdevice)."""
        return None

    def special(self, fn: Function, reg: str) -> str:
        """A PTX special register as i32: tid.x, ctaid.y, ntid.x, ..."""
        return fn.call("i32", f"llvm.nvvm.read.ptx.sreg.{reg}", [])

    def barrier(self, fn: Function) -> None:
        fn.call("void", "llvm.nvvm.barrier0", [], "convergent")

    def alloca(self, name: str, ty: str) -> list[str]:
        return [f"  {name} = alloca {ty}"]

    def shuffle_xor32(self, fn: Function, value: str, ty: str, lane_mask: int) -> str:
        """``value`` (float or i32) from lane ``laneid ^ lane_mask`` of the warp."""
        return fn.call(ty, f"llvm.nvvm.shfl.sync.bfly.{'f32' if ty == 'float' else 'i32'}",
                       [("i32", "-1"), (ty, value), ("i32", str(lane_mask)), ("i32", "31")],
                       "convergent")

    def kernel_attributes(self, max_threads: int, min_blocks: int, block_size: int) -> str:
        """The kernel's attribute group body, or "" for none. ``max_threads``/``min_blocks``
        (.maxntid/.minnctapersm) let ptxas budget registers so that ``min_blocks`` blocks of
        ``max_threads`` fit on one SM. Without ``max_threads`` the launch's ``block_size`` is the
        bound: ptxas otherwise takes up to 255 registers a thread, and a block of 1024 threads
        needing more than 64 each fails to launch (out of resources) instead of spilling."""
        max_threads = max_threads or block_size
        if not max_threads:
            return ""
        return (f'"nvvm.maxntid"="{max_threads}"'
                + (f' "nvvm.minctasm"="{min_blocks}"' if min_blocks else ""))

    def module_trailer(self) -> list[str]:
        return []


NVPTX = NvptxTarget()
