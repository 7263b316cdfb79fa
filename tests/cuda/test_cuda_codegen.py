"""CPU-only: the cuda compiler target (NVPTX via llvmlite) needs no GPU and no GPU driver."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent / "flow")]
import cases  # noqa: E402
import kernel_zoo as zoo  # noqa: E402
import row_kernel_cases as rows  # noqa: E402
from tooling import require_module, require_tool  # noqa: E402

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError, CompileOptions, compile_str  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler._fb.Module import ModuleT  # noqa: E402
from pyree.compiler.codegen.cuda import generate_ptx, resolve_target  # noqa: E402


@pytest.fixture
def ptxas() -> str:
    """The compiler assembles cubins with the same ptxas (``$PYREE_PTXAS`` or the PATH's)."""
    return require_tool("ptxas", env="PYREE_PTXAS")


ADD = (Path(__file__).parent.parent / "data" / "add.mlir").read_text()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_template_assembles_with_ptxas(ptxas, arch, tmp_path):
    target = resolve_target(arch)
    ptx, launches = generate_ptx([make() for make in zoo.ALL.values()], target)
    assert f".target {arch}" in ptx
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    proc = subprocess.run([ptxas, f"-arch={arch}", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name, launch in launches:
        assert f".entry {name}(" in ptx
        assert all(g >= 1 for g in launch.grid) and 32 <= launch.block[0] <= 1024


def test_ptx_is_the_same_on_one_core_and_on_many(ptxas, monkeypatch, tmp_path):
    """LLVM compiles the kernels as a fixed number of modules in forked processes, whose PTX is
    merged: every kernel once, assembled by ptxas, and the same bytes however many cores run it."""
    from pyree.compiler.codegen.common import parallel

    kernels = [make() for make in zoo.ALL.values()]
    target = resolve_target("sm_90a")
    monkeypatch.setattr(parallel, "cores", lambda: 4)
    ptx, launches = generate_ptx(kernels, target)
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    assert generate_ptx(kernels, target) == (ptx, launches)
    assert ptx.count(".address_size") == 1
    for name, _ in launches:
        assert ptx.count(f".entry {name}(") == 1
    _assemble_verbose(ptxas, ptx, "sm_90a", tmp_path)


def test_merging_ptx_refuses_a_name_defined_twice():
    from pyree.compiler.codegen.cuda.ptx import merge

    head = "//\n.version 8.0\n.target sm_80\n.address_size 64\n"
    one = head + "\n.visible .entry k0(\n)\n{\n\tret;\n}\n"
    two = head + "\n.extern .shared .align 16 .b8 k1_smem[];\n.visible .entry k1(\n)\n{\n\tret;\n}\n"
    assert merge([one, two]).count(".address_size") == 1
    with pytest.raises(CompileError, match="'k0' is defined by two PTX modules"):
        merge([one, one])
    with pytest.raises(CompileError, match="differ in their headers"):
        merge([one, two.replace("sm_80", "sm_90")])


def _fail_on(value: int) -> int:
    if value == 3:
        raise CompileError("three is refused", "in.mlir:3:1")
    if value == 5:
        raise KeyError("five")
    return value * value


def test_jobs_in_forked_processes_return_in_order_and_raise_what_a_child_raised(monkeypatch):
    from pyree.compiler.codegen.common import parallel

    monkeypatch.setattr(parallel, "cores", lambda: 3)
    assert parallel.map_jobs(_fail_on, [0, 1, 2, 4, 6, 7, 8]) == [0, 1, 4, 16, 36, 49, 64]
    for items in ([0, 1, 2, 4, 3, 6], [3, 1, 2]):  # 3 in a child (index 4), then here (index 0)
        with pytest.raises(CompileError) as err:
            parallel.map_jobs(_fail_on, items)
        assert str(err.value) == "in.mlir:3:1: error: three is refused"
    with pytest.raises(CompileError, match="internal compiler error: KeyError: 'five'"):
        parallel.map_jobs(_fail_on, [0, 5, 1])


@pytest.mark.parametrize("name, arch", [
    ("hopper", "sm_90a"), ("h100", "sm_90a"), ("H100", "sm_90a"), ("h200", "sm_90a"),
    ("sm_90a", "sm_90a"), ("sm_90", "sm_90"),
    ("ampere", "sm_80"), ("a100", "sm_80"), ("rtx3090", "sm_86"), ("rtx4090", "sm_89"),
    ("ada", "sm_89"), ("volta", "sm_70"), ("pascal", "sm_60"), ("p100", "sm_60"),
    ("turing", "sm_75"), ("sm_60", "sm_60"),
])
def test_target_names_resolve(name, arch):
    assert resolve_target(name).arch == arch


def test_unknown_target_lists_the_accepted_names():
    with pytest.raises(CompileError) as e:
        resolve_target("sm_42")
    assert "sm_42" in str(e.value) and "sm_90" in str(e.value) and "hopper" in str(e.value)
    assert "rtx4090" in str(e.value) and "default sm_80" in str(e.value)


def _cuda_executable(vmfb: bytes):
    from pyree.compiler._fb.Module import Module
    module = ModuleT.InitFromObj(Module.GetRootAs(vmfb, 0))
    (exe,) = module.executables
    return exe.cuda


def test_module_carries_ptx_and_a_cubin_for_the_exact_target(ptxas):
    cuda = _cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"],
                                                            cuda_target="hopper")))
    assert cuda.targetArch == b"sm_90a" and cuda.cubinArch == b"sm_90a"
    assert cuda.ptx.length > 0 and cuda.cubin.length > 0
    (export,) = cuda.exports
    assert len(export.gridSize) == 3 and len(export.blockSize) == 3
    assert [b.minLength for b in export.bindings] == [16, 16, 16]


def test_without_ptxas_the_module_carries_ptx_only(monkeypatch):
    monkeypatch.setenv("PYREE_PTXAS", "")
    cuda = _cuda_executable(compile_str(ADD, CompileOptions(target_backends=["cuda"])))
    assert cuda.targetArch == b"sm_80" and cuda.cubinArch == b"" and cuda.cubin.length == 0


def test_compiles_with_no_gpu_driver_loaded():
    code = ("import sys; from pyree.compiler import compile_str, CompileOptions; "
            f"compile_str({ADD!r}, CompileOptions(target_backends=['cuda'])); "
            "assert not any(m.startswith('cuda.bindings') for m in sys.modules), 'imported cuda'")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYREE_PTXAS": ""})


def test_aligned_elementwise_uses_16_byte_accesses():
    ptx, _ = generate_ptx([zoo.add((64, 1024)), zoo.add((37, 48), "f16")], resolve_target("sm_90"))
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx


def test_odd_shapes_fall_back_to_scalar_accesses():
    ptx, _ = generate_ptx([zoo.add((37, 53))], resolve_target("sm_90"))
    assert "ld.global.v4" not in ptx and "ld.global" in ptx


def test_templates_are_chosen_by_kernel_shape():
    ptx, _ = generate_ptx([zoo.row_sum(), zoo.matmul(1600, 1500, 67)], resolve_target("sm_90"))
    assert "shfl.sync.bfly" in ptx           # block reduction
    assert "ld.shared.v4" in ptx and "fma.rn.f32" in ptx  # tiled matmul, 128x128 tiles


def entry_text(ptx: str, name: str) -> str:
    """Kernel ``name``'s PTX, from its ``.entry`` to the next module-scope line."""
    start = ptx.index(f".entry {name}(")
    end = re.compile(r"^\S", re.M).search(ptx, ptx.index("\n}", start) + 2)
    return ptx[start:end.start() if end else len(ptx)]


def _assemble_verbose(ptxas: str, ptx: str, arch: str, tmp_path) -> str:
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    proc = subprocess.run([ptxas, f"-arch={arch}", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_wgmma_on_sm_90a_only_and_without_serialization(ptxas, tmp_path):
    """The Hopper matmul at each tile width, f16 and bf16, B as [k, n] (transposed by the
    instruction) and [n, k]: wgmma with the accumulators kept in place (ptxas warns when it must
    serialize wgmma because other instructions touch them), no spills; mma.sync elsewhere."""
    kernels = [zoo.matmul(2048, 2048, 192, "f16", "f32"), zoo.linear(2048, 1024, 640, "bf16"),
               zoo.linear(37, 53, 29, "bf16"), zoo.linear(129, 257, 72, "f16", batch=3, b_nk=False)]
    ptx, launches = generate_ptx(kernels, resolve_target("hopper"))
    entries = [entry_text(ptx, name) for name, _ in launches]
    for entry, (n, dtype, trans_b) in zip(entries, [(256, "f16", 1), (128, "bf16", 0), (64, "bf16", 0),
                                                    (64, "f16", 1)]):
        count = entry.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}")
        assert count and count % 4 == 0  # four k16 steps per k tile (short k loops unroll)
        assert f"p, 1, 1, 0, {trans_b};" in entry
    assert "mma.sync" not in ptx and "fence.proxy.async.shared::cta" in ptx
    assert [launch.grid for _, launch in launches] == [(8, 16, 1), (8, 16, 1), (1, 1, 1), (5, 2, 3)]
    log = _assemble_verbose(ptxas, ptx, "sm_90a", tmp_path)
    assert "serialized" not in log
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] * len(kernels)
    sm90, _ = generate_ptx(kernels, resolve_target("sm_90"))
    assert "wgmma" not in sm90 and "mma.sync" in sm90


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_sync_takes_bf16_a_weight_batches_and_odd_sizes(ptxas, arch, tmp_path):
    """mma.sync for bf16 and f16: ldmatrix.trans stages a [k, n] B, plain ldmatrix an [n, k] one;
    whole tiles copy with cp.async, tails with cp.async's zero-filling source size, rows that
    are not 16-byte aligned (k = 29) with scalar loads."""
    kernels = [zoo.linear(2048, 2048, 192, "bf16"), zoo.linear(37, 53, 29, "bf16"),
               zoo.linear(129, 257, 72, "f16", batch=3, b_nk=False)]
    ptx, launches = generate_ptx(kernels, resolve_target(arch))
    whole, odd, batch = (entry_text(ptx, name) for name, _ in launches)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in whole + odd
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in batch
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" not in whole + odd and "x4.trans" in batch
    assert re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16;", whole)
    assert not re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16, %r", whole)
    assert re.search(r"cp\.async\.cg\.shared\.global \[%rd\d+\], \[%rd\d+\], 16, %r", batch)
    assert "cp.async.cg.shared.global" not in odd and "ld.global.b16" in odd
    assert [launch.grid for _, launch in launches] == [(8, 16, 1), (1, 1, 1), (5, 3, 3)]
    log = _assemble_verbose(ptxas, ptx, arch, tmp_path)
    assert re.findall(r"(\d+) bytes spill stores", log) == ["0"] * len(kernels)


@pytest.mark.parametrize("arch, instruction", [("sm_90a", "wgmma.mma_async.sync.aligned.m64n"),
                                               ("sm_80", "mma.sync.aligned.m16n8k16.row.col.f32.")])
def test_f16_bf16_cases_run_on_tensor_cores(ptxas, arch, instruction):
    """Every tensor-core case of cases.py (the GPU run checks their values) compiles, PTX and
    cubin, to tensor-core instructions of its operand type; f32 x f32 stays on the SIMT template
    (tensor cores would round its inputs to TF32)."""
    import pyree.runtime as rt
    options = CompileOptions(target_backends=["cuda"], cuda_target=arch)
    for name, (mlir, args, *_) in {**cases.TENSOR_CORE_CASES,
                                   "matmul_f32_37x53x61": cases.CASES["matmul_f32_37x53x61"]}.items():
        module = rt.read_module(compile_str(mlir, options))
        (executable,) = module.tree.executables
        assert executable.cuda.cubin.length > 0, name
        ptx = bytes(module.bytes_of(executable.cuda.ptx)).decode()
        dtype = {"float16": "f16", "bfloat16": "bf16", "float32": None}[args[0][1]]
        if dtype is None:
            assert "mma" not in ptx and "fma.rn.f32" in ptx, name
            continue
        lines = [line for line in ptx.splitlines() if instruction in line]
        assert lines and all(f"{dtype}.{dtype}" in line for line in lines), name


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_matrix_vector_products_take_their_template(ptxas, arch, tmp_path):
    """Every matrix-vector case of cases.py (m <= 4; the GPU run checks their values) compiles to
    matmul_gemv's kernel, whatever the operand types: no tensor-core or tiled-SIMT code, its
    shared slice sums present, no spills."""
    import pyree.runtime as rt
    options = CompileOptions(target_backends=["cuda"], cuda_target=arch)
    names = [n for n in cases.CASES if "gemv" in n or n in ("mm_f16_1x512x4096", "bmm_bf16_32x1x512x128")]
    assert len(names) == 8
    for name in names:
        module = rt.read_module(compile_str(cases.CASES[name][0], options))
        (executable,) = module.tree.executables
        assert executable.cuda.cubin.length > 0, name
        ptx = bytes(module.bytes_of(executable.cuda.ptx)).decode()
        contraction = re.search(r"\.entry (k0_\w+)\(.*?\n}", ptx, re.S).group(0)
        assert "_sums" in contraction and "mma" not in contraction, name
        log = _assemble_verbose(ptxas, ptx, arch, tmp_path)
        assert set(re.findall(r"(\d+) bytes spill stores", log)) == {"0"}, name


@pytest.mark.parametrize("m, n, batch, wgmma_bn, mma_tile", [
    (4096, 4096, 1, 256, (128, 256)), (2048, 2048, 1, 256, (128, 256)),
    (1024, 3072, 1, 256, (128, 256)), (128, 50257, 1, 128, (128, 128)),
    (128, 2304, 1, 64, (64, 64)), (1, 4096, 1, 64, (64, 64)), (1, 512, 32, 128, (64, 128)),
    (1024, 64, 12, 64, (64, 64))])
def test_tensor_core_tiles_fill_the_gpu(m, n, batch, wgmma_bn, mma_tile):
    """Issue 11: BERT's qkv (128 x 2304) made 9 blocks of 128x256 for 132 multiprocessors. The
    tile with the least work on the busiest multiprocessor wins, the larger one on a tie."""
    from pyree.compiler.codegen.cuda import matmul_mma, matmul_wgmma
    tile = matmul_mma.choose_tile(m, n, batch)
    assert (matmul_wgmma.choose_tile(m, n, batch).bn, (tile.bm, tile.bn)) == (wgmma_bn, mma_tile)


def test_f64_transcendentals_are_refused_clearly():
    ix = (K.AffineExpr((1,)),)
    kernel = K.Kernel("exp64", (7,), 1, (K.Binding("f64", (7,), "read"), K.Binding("f64", (7,), "write")),
                      (K.Result(1, ix, K.Unary("exp", K.Load(0, ix, "f64"), "f64")),))
    with pytest.raises(CompileError, match="'exp' on f64 is not supported by the cuda backend"):
        generate_ptx([kernel], resolve_target("sm_90"))


@pytest.mark.parametrize("m, n, batch, tile", [
    (4096, 4096, 1, 128), (1600, 1500, 1, 128), (700, 900, 1, 64), (256, 196, 1, 32),
    (512, 49, 1, 32), (37, 53, 1, 32), (256, 196, 40, 128)])
def test_simt_matmul_tiles_fill_the_gpu(m, n, batch, tile):
    """The largest tile that still gives every multiprocessor a block: ResNet-18's batch-1 conv
    GEMMs (256 x 196, 512 x 49) got 4 to 32 blocks of 128x128 before."""
    from pyree.compiler.codegen.common.llvm_gpu.matmul import choose_tiling
    assert choose_tiling(m, n, batch).bm == tile


@pytest.mark.parametrize("name, vector", [("linear_f32_relu_1030x2052x45", "v4"),
                                          ("linear_f32_relu_700x900x133", "v2"),
                                          ("matmul_f32_257x131x67", None)])
def test_simt_matmul_stores_aligned_runs_as_vectors(name, vector):
    """Rows whose length is a multiple of the thread's run (4 columns on 128x128 tiles, 2 on
    64x64) are stored a run per instruction, with the scalar stores kept for the tails; an odd
    row length (131) has only scalar stores. The GPU run checks the values (cases.py)."""
    vmfb = compile_str(cases.CASES[name][0],
                       CompileOptions(target_backends=["cuda"], cuda_target="sm_90"))
    ptx = _ptx(vmfb, _cuda_executable(vmfb))
    vectors = re.findall(r"st\.global\.(v\d)\.b32", ptx)
    assert set(vectors) == ({vector} if vector else set())
    assert re.search(r"st\.global\.b32", ptx)  # the tails


def test_a_math_epilogue_takes_the_narrow_wgmma_tile():
    """GPT-2's linear + bias + GELU(tanh) unrolls its epilogue per accumulator: n64 ran it in
    0.061 ms on the H100 where n256 took 0.112 ms. A plain or bias-only epilogue keeps the
    widest tile that fills the GPU."""
    import dataclasses

    from pyree.compiler.codegen.cuda import matmul_wgmma
    plain = zoo.linear(1024, 3072, 768, "f16")
    r = plain.results[0]
    x = r.epilogue.x  # acc + bias, before the truncation
    gelu = K.Binary("mul", x, K.Unary("tanh", x, "f32"), "f32")
    with_gelu = dataclasses.replace(plain, results=(dataclasses.replace(
        r, epilogue=K.Cast("fptrunc", gelu, "f16")),))
    widths = [matmul_wgmma.plan(k, resolve_target("sm_90a"))[1][1].bn for k in (plain, with_gelu)]
    assert widths == [256, 64]


def test_a_select_arm_that_loads_out_of_range_is_not_evaluated():
    """A pad: ``i in [1, n] ? x[i - 1] : 0``. The load of the unchosen arm would read before x
    (an H100 faulted on ResNet's strided im2col where the memory below the input was unmapped),
    so it sits behind a branch; a Select whose arms are in range stays a select."""
    from pyree.compiler.codegen.common.llvm_gpu import elementwise
    from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
    from pyree.compiler.codegen.cuda.nvptx import NVPTX
    n = 37
    i = K.LoopIndex(0)
    inside = K.Binary("and", K.Compare("ge", i, K.Const(1, "index")),
                      K.Compare("le", i, K.Const(n, "index")), "i1")
    shifted = K.Load(0, (K.AffineExpr((1,), -1),), "f32")
    padded = K.Kernel("pad", (n + 2,), 1, (K.Binding("f32", (n,), "read"),
                                           K.Binding("f32", (n + 2,), "write")),
                      (K.Result(1, (K.AffineExpr((1,)),),
                                K.Select(inside, shifted, K.Const(0.0, "f32"), "f32")),))
    safe = dataclasses.replace(padded, results=(dataclasses.replace(
        padded.results[0], value=K.Select(inside, K.Load(0, (K.AffineExpr((0,), 0),), "f32"),
                                          K.Const(0.0, "f32"), "f32")),))
    for kernel, branches in ((padded, True), (safe, False)):
        module = Module("", NVPTX)
        elementwise.emit(module, kernel, "k", elementwise.plan(kernel, None))
        ir = module.text()
        assert ("sel_a" in ir) == branches and ("select i1" in ir) != branches, ir


def test_vector_loads_inside_a_branch_stay_in_it(ptxas, tmp_path):
    """A concat along the innermost dim (``j < n ? x[i, j] : y[i, j - n]``): each arm loads out
    of range where the other is chosen, so each is a branch, and its loads are 16-byte vectors
    (a thread's 4 lanes read 4 consecutive elements). The vector that lane 0 loaded inside its
    arm was reused by lane 1 outside it: "Instruction does not dominate all uses" (torchvision's
    ShuffleNet v2, whose concat and channel shuffle fuse into such a kernel)."""
    m, n = 3, 8
    rows, cols = K.AffineExpr((1, 0)), K.AffineExpr((0, 1))
    x = K.Load(0, (rows, cols), "f32")
    y = K.Load(1, (rows, K.AffineExpr((0, 1), -n)), "f32")
    first = K.Compare("lt", K.LoopIndex(1), K.Const(n, "index"))
    kernel = K.Kernel("concat", (m, 2 * n), 2,
                      (K.Binding("f32", (m, n), "read"), K.Binding("f32", (m, n), "read"),
                       K.Binding("f32", (m, 2 * n), "write")),
                      (K.Result(2, (rows, cols), K.Select(first, x, y, "f32")),))
    from pyree.compiler.codegen.common.llvm_gpu import elementwise
    from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Module
    from pyree.compiler.codegen.cuda.nvptx import NVPTX
    module = Module("", NVPTX)
    elementwise.emit(module, kernel, "k", elementwise.plan(kernel, None))
    assert "load <4 x float>" in module.text() and "store <4 x float>" in module.text()
    ptx, _ = generate_ptx([kernel], resolve_target("sm_80"))  # LLVM verifies the IR
    assert "st.global.v4.b32" in ptx
    _assemble_verbose(ptxas, ptx, "sm_80", tmp_path)


def _ptx(vmfb: bytes, cuda) -> str:
    data = int.from_bytes(vmfb[-40:-32], "little")  # the trailer's data offset
    return vmfb[data + cuda.ptx.offset:data + cuda.ptx.offset + cuda.ptx.length].decode()


@pytest.mark.parametrize("kind, phases", [("softmax", 2), ("log_softmax", 2), ("layernorm", 2),
                                          ("rmsnorm", 1)])
def test_row_chains_are_one_kernel_with_a_barrier_per_phase(ptxas, kind, phases):
    """Issue 11: a row-wise chain is one kernel. Rows of 128 or more take one block per row (a
    block-wide fold, so one barrier, per phase; then the row results); shorter rows one thread."""
    for n, block in ((1000, 256), (129, 128), (45, None)):
        for dtype in ("f32", "bf16"):
            vmfb = compile_str(rows.mlir(kind, 37, n, dtype),
                               CompileOptions(target_backends=["cuda"], cuda_target="sm_90a"))
            cuda = _cuda_executable(vmfb)
            (export,) = cuda.exports
            ptx = _ptx(vmfb, cuda)
            assert cuda.cubin.length > 0  # ptxas took it
            if block is None:
                assert "bar.sync" not in ptx and export.gridSize[0] * export.blockSize[0] >= 37
            else:
                assert (list(export.gridSize), export.blockSize[0]) == ([37, 1, 1], block)
                assert ptx.count("bar.sync") == phases


def _shufflenet_v2():
    """torchvision's ShuffleNet v2 x0.5 (random weights and batchnorm statistics), its input and
    its MLIR: channel split, concat and shuffle (reshape, transpose, reshape) in every block."""
    torch = require_module("torch")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
    import definitions
    from pyree.compiler import import_torch

    torch.manual_seed(0)
    model = definitions._init_batchnorm(
        definitions._torchvision().models.shufflenet_v2_x0_5(weights=None).eval())
    x = torch.randn((1, 3, 224, 224), generator=torch.Generator().manual_seed(3))
    return model, x, import_torch(model, x, function_name="main")


@pytest.mark.slow
def test_shufflenet_v2_compiles_for_cuda(ptxas):
    """Its fused concat + channel shuffle had failed LLVM's verifier (the vector loads above)."""
    _, _, mlir = _shufflenet_v2()
    cuda = _cuda_executable(compile_str(mlir, CompileOptions(target_backends=["cuda"])))
    assert cuda.ptx.length > 0 and cuda.cubin.length > 0


@pytest.mark.cuda
def test_shufflenet_v2_on_the_gpu_matches_pytorch():
    import numpy as np
    import pyree.runtime as rt
    torch = require_module("torch")
    model, x, mlir = _shufflenet_v2()
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["cuda"])),
                            device="cuda")
    got = np.asarray(module["main"](x.numpy()).to_host(), np.float64)
    with torch.no_grad():
        ref = model.double()(x.double()).numpy()
    assert np.all(np.isfinite(got))
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 1e-4
