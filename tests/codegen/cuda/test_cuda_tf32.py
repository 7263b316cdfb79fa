"""CPU-only: ``--pyree-cuda-f32-matmul=strict|tf32|3xtf32``. The flag puts f32 matmuls and
convolutions on mma.sync with TF32 operands (ptxas assembles every variant without spills),
leaves the module's bytes alone where it says strict or where nothing is f32, and is refused
where it cannot hold; the kernels' fragment indexing and TF32 arithmetic run on this CPU
(nvptx_on_cpu.py) against float64, specials included. tests/drivers/cuda/test_cuda_tf32_on_gpu.py runs
them on a GPU."""

from __future__ import annotations

import re

import cases
import kernel_zoo as zoo
import numpy as np
import pytest
from ptx_modules import assemble_verbose, cuda_executable
from tooling import require_module

require_module("xdsl")  # the compiler

from nvptx_on_cpu import Emulated  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402
from pyree.compiler.errors import CompileError  # noqa: E402
from pyree.compiler.flags import FlagError  # noqa: E402
from pyree.compiler.tools.compile import main as pyree_compile  # noqa: E402
from test_cuda_contraction import entry_text  # noqa: E402

TF32_MMA = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
F32_CASES = ("matmul_f32_37x53x61", "conv_f32_nchw_pad_2x19x23x17_f37_relu")


def _compile(name: str, arch: str, *flags: str) -> bytes:
    return compile_str(cases.CASES[name][0], CompileOptions(target_backends=["cuda"], cuda_target=arch),
                       extra_args=list(flags))


def _ptx(vmfb: bytes) -> str:
    import pyree.runtime as rt
    module = rt.read_module(vmfb)
    (executable,) = module.tree.executables
    return bytes(module.bytes_of(executable.cuda.ptx)).decode()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_120"])
def test_the_flag_puts_f32_products_on_tf32_tensor_cores(ptxas, arch):
    """A matmul and a convolution (its GEMM; the im2col copy stays): tf32 rounds each fragment
    once and issues one m16n8k8 where 3xtf32 splits it and issues three; both assemble (the
    module carries the cubin). On sm_90a too, whose wgmma takes 16-bit operands only."""
    for name in F32_CASES:
        counts = {}
        for mode in ("tf32", "3xtf32"):
            vmfb = _compile(name, arch, f"--pyree-cuda-f32-matmul={mode}")
            assert cuda_executable(vmfb).cubin.length > 0, (name, mode)
            ptx = _ptx(vmfb)
            assert "cvt.rna.tf32.f32" in ptx and "wgmma" not in ptx, (name, mode)
            counts[mode] = ptx.count(TF32_MMA)
        assert counts["tf32"] and counts["3xtf32"] == 3 * counts["tf32"], name
        assert TF32_MMA not in _ptx(_compile(name, arch)), name


def test_strict_and_programs_without_f32_products_keep_their_bytes():
    """strict is the default, byte for byte; an f16 matmul has nothing for tf32 to change, and
    an f32 elementwise program neither."""
    for name in (*F32_CASES, "mm_f16_129x257x65", "add_37x53"):
        plain = _compile(name, "sm_80")
        assert _compile(name, "sm_80", "--pyree-cuda-f32-matmul=strict") == plain, name
        tf32 = _compile(name, "sm_80", "--pyree-cuda-f32-matmul=tf32")
        assert (tf32 != plain) == (name in F32_CASES), name


def test_bad_values_and_old_gpus_are_refused_by_name(tmp_path, capsys):
    with pytest.raises(FlagError, match="invalid choice: 'fast'"):
        _compile("matmul_f32_37x53x61", "sm_80", "--pyree-cuda-f32-matmul=fast")
    with pytest.raises(CompileError, match="unknown --pyree-cuda-f32-matmul 'tf16'; accepted: "
                                           "strict, tf32, 3xtf32"):
        compile_str(cases.CASES["matmul_f32_37x53x61"][0],
                    CompileOptions(target_backends=["cuda"], cuda_f32_matmul="tf16"))
    with pytest.raises(CompileError, match=r"needs TF32 tensor cores \(sm_80 or newer\); "
                                           r"--pyree-cuda-target=turing is sm_75"):
        _compile("matmul_f32_37x53x61", "turing", "--pyree-cuda-f32-matmul=3xtf32")
    src = tmp_path / "m.mlir"
    src.write_text(cases.CASES["matmul_f32_37x53x61"][0])
    code = pyree_compile([str(src), "-o", str(tmp_path / "m.vmfb"), "--pyree-hal-target-backends=cuda",
                          "--pyree-cuda-target=sm_70", "--pyree-cuda-f32-matmul=tf32"])
    err = capsys.readouterr().err
    assert code != 0 and "needs TF32 tensor cores" in err and "Traceback" not in err


@pytest.mark.parametrize("mode, arch", [("tf32", "sm_80"), ("3xtf32", "sm_80"), ("3xtf32", "sm_90a")])
def test_every_operand_layout_assembles_without_spills(ptxas, mode, arch, tmp_path):
    """Each tile (128x256 .. 64x64; 3xtf32's stop at 128x128), B as [n, k] (ldmatrix) and
    [k, n] (32-bit shared loads), cp.async and scalar staging (k = 29: rows not 16-byte
    aligned), a batch."""
    kernels = [zoo.linear(2048, 2048, 192, "f32"), zoo.linear(512, 1024, 96, "f32", b_nk=False),
               zoo.linear(256, 512, 256, "f32"), zoo.linear(37, 53, 29, "f32"),
               zoo.linear(129, 257, 72, "f32", batch=3, b_nk=False)]
    ptx, launches = generate_ptx(kernels, resolve_target(arch, mode))
    first = (8, 16, 1) if mode == "tf32" else (16, 16, 1)
    assert [launch.grid for _, launch in launches] == [first, (16, 8, 1), (8, 4, 1), (1, 1, 1), (5, 3, 3)]
    entries = [entry_text(ptx, name) for name, _ in launches]
    assert all(TF32_MMA in e for e in entries)
    assert "ld.shared.b32" in entries[1] and "ldmatrix.sync.aligned.m8n8.x4.trans" not in ptx
    assert "cp.async.cg.shared.global" not in entries[3] and "cp.async.cg.shared.global" in entries[0]
    log = assemble_verbose(ptxas, ptx, arch, tmp_path)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] * len(kernels)


def test_tf32_takes_wgmma_where_both_operands_run_along_k(ptxas, tmp_path):
    """sm_90a, tf32: B as [n, k] (a linear layer's weight) on wgmma's k8 TF32 form where its
    128 x 64 tiles make a block per multiprocessor, 128 x 256 .. 64 tiles, each thread rounding
    its staged chunks to nearest (cvt.rna) before the tensor cores read them (they would
    truncate); cp.async and scalar staging (k = 29), a batch. B as [k, n] (TF32 wgmma takes
    K-major operands only) and smaller products stay on mma.sync."""
    kernels = [zoo.linear(2048, 2048, 192, "f32"), zoo.linear(2048, 2048, 96, "f32", b_nk=False),
               zoo.linear(1037, 1100, 29, "f32"), zoo.linear(300, 257, 72, "f32", batch=12),
               zoo.linear(256, 512, 256, "f32")]
    ptx, launches = generate_ptx(kernels, resolve_target("sm_90a", "tf32"))
    entries = [entry_text(ptx, name) for name, _ in launches]
    wgmma, mma = [entries[0], entries[2], entries[3]], [entries[1], entries[4]]
    assert all(re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k8\.f32\.tf32\.tf32", e) for e in wgmma)
    assert all("cvt.rna.tf32.f32" in e and TF32_MMA not in e for e in wgmma)
    assert all(TF32_MMA in e and "wgmma" not in e for e in mma)
    assert [launch.grid for _, launch in launches] == [(8, 16, 1), (8, 16, 1), (12, 9, 1), (3, 3, 12), (8, 4, 1)]
    assert "cp.async.cg.shared.global" not in entries[2] and "cp.async.cg.shared.global" in entries[0]
    log = assemble_verbose(ptxas, ptx, "sm_90a", tmp_path)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] * len(kernels)


# ---- the kernels run on this CPU (one block each: the emulator runs a block's 256 threads) ----

def _run(kernel, mode: str, a, w, bias):
    out = np.zeros(kernel.bindings[3].shape, np.float32)
    assert Emulated(kernel, resolve_target("sm_80", mode))([a, w, bias, out], [])
    return out


def _reference(a, w, bias, b_nk: bool):
    w = w.T if b_nk else w
    return (a.astype(np.float64) @ w.astype(np.float64) + bias,
            np.abs(a.astype(np.float64)) @ np.abs(w.astype(np.float64)) + np.abs(bias))


@pytest.mark.parametrize("mode, m, n, k, b_nk, bound", [
    ("tf32", 37, 53, 29, True, 1e-3),     # [n, k] B by ldmatrix, scalar staging
    ("tf32", 40, 48, 40, False, 1e-3),    # [k, n] B by 32-bit loads, cp.async with tails
])
def test_tf32_products_match_float64(mode, m, n, k, b_nk, bound):
    """Error relative to sum |a| |b|: TF32's rounding (2^-11 an operand), and really coarser
    than f32 (a plain f32 sum would be near 1e-7). 3xtf32: the next test."""
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k) if b_nk else (k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = _run(zoo.linear(m, n, k, "f32", b_nk=b_nk), mode, a, w, bias)
    want, scale = _reference(a, w, bias, b_nk)
    error = np.max(np.abs(got - want) / scale)
    assert error <= bound
    assert error > 1e-5


def test_3xtf32_specials_land_where_ieee_puts_them():
    """NaN, +-inf and -0 in either operand, and operands that TF32 rounds up (the small terms
    then carry the difference): every output numpy computes as inf, -inf or NaN is that, the
    rest within 1e-6 of sum |a| |b| of float64 (tf32 alone is near 1e-4)."""
    m, n, k = 37, 53, 32
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    a[3, 5], a[7, 0], a[11, 9], a[12, 4] = np.inf, -np.inf, np.nan, -0.0
    w[2, 6], w[9, 40] = np.inf, np.nan
    a[20] = np.float32(1 - 2 ** -12)  # rounds up to 1 in TF32: lo is negative
    bias = rng.standard_normal(n).astype(np.float32)
    got = _run(zoo.linear(m, n, k, "f32", b_nk=False), "3xtf32", a, w, bias)
    with np.errstate(invalid="ignore"):
        want, scale = _reference(a, w, bias, False)
    special = ~np.isfinite(want)
    assert special.any() and np.isnan(want).any() and np.isinf(want).any()
    np.testing.assert_array_equal(got[special], want[special].astype(np.float32))
    assert np.max(np.abs(got[~special] - want[~special]) / scale[~special]) <= 1e-6


def test_f16_mma_fragments_on_this_cpu():
    """The 16-bit template's own fragments (ldmatrix.trans for a [k, n] B) through the same
    emulation: it checks the emulator's layouts against a template that has run on GPUs."""
    m, n, k = 37, 53, 32
    rng = np.random.default_rng()
    a, w = (rng.standard_normal(s).astype(np.float16) for s in ((m, k), (k, n)))
    bias = rng.standard_normal(n).astype(np.float16)
    kernel = zoo.linear(m, n, k, "f16", b_nk=False)
    out = np.zeros((m, n), np.float16)
    emulated = Emulated(kernel)
    assert "m16n8k16" in emulated.text and emulated([a, w, bias, out], [])
    want, scale = _reference(a, w, bias, False)
    assert np.max(np.abs(out - want) / scale) <= 2e-3


def test_f32_convolution_patches_are_gathered_into_tf32_tiles():
    """With a TF32 mode an f32 convolution whose channels fill 4-element chunks is an implicit
    GEMM (no im2col copy): its image is gathered 16 bytes at a time into the tensor-core tiles,
    and the kernel matches the kernel IR's reference (``kernel.evaluate``) in float64."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
    from conv_cases import Conv
    from pyree.compiler import kernel as K
    from pyree.compiler.codegen.cuda import matmul_mma
    from pyree.compiler.codegen.cuda.gathered import Gathered
    from pyree.compiler.flow.convolution import rewrite_convolutions
    from pyree.compiler.flow.implicit_gemm import inline_patches
    from pyree.compiler.flow.kernels import outline
    from pyree.compiler.flow.passes import form_dispatch_regions
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Generic
    conv = Conv(c=4, h=5, w=4, f=9, kh=3, kw=3, stride=(2, 1), pad=(1, 1))
    function = import_mlir(conv.mlir(), "conv.mlir").functions[0]
    ops = inline_patches(form_dispatch_regions(rewrite_convolutions(function, implicit=True, f32=True))).ops
    assert not any("im2col" in op.origin for op in ops if isinstance(op, Generic))
    (gemm,) = [op for op in ops if isinstance(op, Generic) and op.num_parallel < len(op.loop_ranges)]
    kernel = outline(gemm, "k")
    target = resolve_target("sm_80", "tf32")
    _, (operands, _) = matmul_mma.plan(kernel, target)
    assert isinstance(operands.b, Gathered) and operands.tf32 == "tf32"
    rng = np.random.default_rng()
    inputs = [rng.standard_normal(b.shape).astype(np.float32) if b.access == "read" else
              np.zeros(b.shape, np.float32) for b in kernel.bindings]
    emulated = Emulated(kernel, target)
    assert "cp.async.cg.shared.global.16" in emulated.text and emulated(inputs, [])
    wide = [x.astype(np.float64) for x in inputs]
    K.evaluate(kernel, wide)
    scale = [np.abs(x) for x in wide]
    K.evaluate(kernel, scale)
    out = next(i for i, b in enumerate(kernel.bindings) if b.access == "write")
    error = np.max(np.abs(inputs[out] - wide[out]) / scale[out])
    assert 1e-5 < error <= 1e-3
