"""CPU-only: the rocm compiler target (AMDGPU via llvmlite, linked by ld.lld) on several chips.

Nothing here runs on an AMD GPU: there is none on the machines this project is built and tested
on. The code objects (hsaco) are checked structurally by ``hsaco_reader`` (ELF header, kernel symbols
and descriptors, the AMDGPU metadata note); the rocm driver runs the cuda target's kernels on an
NVIDIA GPU through the HIP-on-CUDA shim (``hip_on_cuda/``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cuda"))
import kernel_zoo as zoo  # noqa: E402
from hsaco_reader import check_hsaco, check_module, lld, read_hsaco  # noqa: E402, F401
from tooling import require_module  # noqa: E402

require_module("xdsl")  # the compiler

from pyree.compiler import CompileError, CompileOptions, compile_str  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler.codegen.rocm import generate_hsaco, generate_ir, resolve_target  # noqa: E402
from pyree.compiler.codegen.rocm.targets import CHIPS, PRODUCTS  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data"
CHIPS_TESTED = ["gfx908", "gfx942", "gfx1100"]


# ---- kernel templates --------------------------------------------------------------------------
TEMPLATES = {"elementwise": [zoo.add, lambda: zoo.add((64, 1024)), lambda: zoo.add(dtype="f16"),
                             zoo.chain],
             "reduction": [zoo.row_sum, lambda: zoo.row_sum(op="max"), zoo.col_sum],
             "matmul": [zoo.matmul, lambda: zoo.matmul(dtype="f16", acc_dtype="f32")]}


@pytest.mark.parametrize("chip", CHIPS_TESTED)
@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_templates_link_into_a_code_object(chip, template):
    kernels = [make() for make in TEMPLATES[template]]
    hsaco, launches = generate_hsaco(kernels, resolve_target(chip))
    check_hsaco(hsaco, chip, launches, kernels)


@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_ir_is_amdgpu_shaped(chip):
    kernels = [zoo.add(), zoo.row_sum()]
    ir, launches = generate_ir(kernels, resolve_target(chip))
    assert 'target triple = "amdgcn-amd-amdhsa"' in ir
    assert '!"amdhsa_code_object_version", i32 500' in ir
    assert ir.count("define amdgpu_kernel void") == 2
    for name, _ in launches:
        assert f"@{name}(ptr addrspace(1)" in ir
    for block in {launch.block[0] for _, launch in launches}:
        assert f'"amdgpu-flat-work-group-size"="1,{block}"' in ir
    assert "llvm.amdgcn.workgroup.id.x" in ir and "llvm.amdgcn.workitem.id.x" in ir
    assert "llvm.amdgcn.s.barrier" in ir and 'fence syncscope("workgroup")' in ir
    assert "addrspace(3) global" in ir and "nvvm" not in ir
    wave = CHIPS[chip][1]
    assert "and i32 %t" in ir and f", {wave - 1}\n" in ir  # lane within the wave
    assert ("llvm.amdgcn.mbcnt.hi" in ir) == (wave == 64)


# ---- whole programs through compile_str ----------------------------------------------------------
@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_mlp_module(chip):
    vmfb = compile_str((DATA / "mlp.mlir").read_text(),
                       CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert check_module(vmfb, chip) >= 2
    # the runtime's reader accepts the module (it verifies every DataRef and export)
    require_module("pyree.runtime.module.reader").read_module(vmfb)


@pytest.mark.parametrize("chip", CHIPS_TESTED)
def test_jax_mlp_module(chip):
    require_module("jax")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "frontends"))
    from programs import jax_programs
    (program,) = [p for p in jax_programs() if p.name == "jax_mlp"]
    vmfb = compile_str(program.mlir, CompileOptions(target_backends=["rocm"], rocm_target=chip))
    assert check_module(vmfb, chip) >= 3


# ---- target names --------------------------------------------------------------------------------
@pytest.mark.parametrize("name, arch, wave", [
    ("gfx908", "gfx908", 64), ("MI300X", "gfx942", 64), ("mi250", "gfx90a", 64),
    ("gfx90a:xnack+", "gfx90a:xnack+", 64), ("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-", 64),
    ("rx7900xtx", "gfx1100", 32), ("gfx1201", "gfx1201", 32), ("mi355x", "gfx950", 64),
])
def test_target_names_resolve(name, arch, wave):
    target = resolve_target(name)
    assert target.arch == arch and target.wave_size == wave


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_every_accepted_chip_links(chip):
    kernels = [zoo.row_sum()]
    hsaco, launches = generate_hsaco(kernels, resolve_target(chip))
    check_hsaco(hsaco, chip, launches, kernels)


def test_features_reach_the_code_object():
    target = resolve_target("gfx90a:xnack+:sramecc-")
    elf = read_hsaco(generate_hsaco([zoo.add()], target)[0])
    assert elf["flags"] & 0x300 == 0x300 and elf["flags"] & 0xC00 == 0x800  # xnack on, sramecc off
    assert "gfx90a:sramecc-:xnack+" in elf["metadata"]["amdhsa.target"]


@pytest.mark.parametrize("name", ["gfx803", "gfx1150", "mi400", "gfx908:wave32+",
                                  "gfx1100:xnack+", "sm_80"])
def test_unknown_chips_are_refused_with_the_list(name):
    with pytest.raises(CompileError) as e:
        resolve_target(name)
    assert name in str(e.value) and "gfx942" in str(e.value) and "mi300x" in str(e.value)


def test_products_name_known_chips():
    assert set(PRODUCTS.values()) <= set(CHIPS)


def test_f64_transcendental_is_refused_by_name():
    x = K.Load(0, (K.AffineExpr((1,)),), "f64")
    b = K.Binding("f64", (7,), "read")
    kernel = K.Kernel("exp64", (7,), 1, (b, K.Binding("f64", (7,), "write")),
                      (K.Result(1, (K.AffineExpr((1,)),), K.Unary("exp", x, "f64")),))
    with pytest.raises(CompileError, match="'exp' on f64 is not supported by the rocm backend"):
        generate_hsaco([kernel], resolve_target("gfx942"))


# ---- the real CLI --------------------------------------------------------------------------------
def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", *args, "-o",
                           "-"], capture_output=True, input=stdin)


@pytest.mark.parametrize("flag", ["--pyree-rocm-target-chip", "--iree-rocm-target-chip",
                                  "--iree-rocm-target", "--iree-hip-target"])
def test_cli_unknown_chip_fails_without_a_traceback(flag):
    proc = _cli(str(DATA / "add.mlir"), "--iree-hal-target-backends=rocm", f"{flag}=gfx803")
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err
    assert "gfx803" in err and "gfx942" in err


@pytest.mark.parametrize("backend", ["rocm", "hip"])
def test_cli_compiles_for_rocm(backend):
    proc = _cli(str(DATA / "add.mlir"), f"--iree-hal-target-backends={backend}",
                "--iree-hip-target=mi300x")
    assert proc.returncode == 0, proc.stderr.decode()
    assert check_module(proc.stdout, "gfx942") == 1


def test_cli_non_lowerable_op_fails_by_name():
    src = ("func.func @f(%x: tensor<4xf64>) -> tensor<4xf64> {\n"
           "  %y = math.exp %x : tensor<4xf64>\n  return %y : tensor<4xf64>\n}\n")
    proc = _cli("-", "--iree-hal-target-backends=rocm", stdin=src.encode())
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err
    assert "'exp' on f64" in err and "rocm" in err


_SWEEP = '''
import sys
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.math_expansion import EXACT, GPU_EXPANDED
from pyree.compiler.codegen.rocm import generate_hsaco, resolve_target
from pyree.compiler.errors import CompileError
ix = (K.AffineExpr((1,)),)
BINARY = ("add", "sub", "mul", "div", "rem", "max", "min", "copysign", "pow", "atan2")
UNARY = sorted((GPU_EXPANDED | EXACT | {"floor", "ceil", "sqrt", "rsqrt", "abs", "neg",
                                        "roundeven", "trunc"}) - set(BINARY))
target = resolve_target(sys.argv[1])
for dt in ("f32", "f16", "bf16", "f64"):
    for op in UNARY + list(BINARY):
        x = K.Load(0, ix, dt)
        e = K.Binary(op, x, x, dt) if op in BINARY else K.Unary(op, x, dt)
        k = K.Kernel(op, (7,), 1, (K.Binding(dt, (7,), "read"), K.Binding(dt, (7,), "write")),
                     (K.Result(1, ix, e),))
        try:
            generate_hsaco([k], target)
        except CompileError as err:
            print("refused", dt, op, err)
    for src in ("f32", "f16", "bf16", "f64", "i8", "i32", "i64", "ui32"):
        if src == dt or {src, dt} == {"f16", "bf16"}:
            continue
        if K.is_float(src):
            op = "fpext" if K.itemsize(src) < K.itemsize(dt) else "fptrunc"
            pairs = [(src, dt, op)]
        else:
            unsigned = src.startswith("u")
            pairs = [(src, dt, "uitofp" if unsigned else "sitofp"),
                     (dt, src, "fptoui" if unsigned else "fptosi")]
        for a, b, op in pairs:
            k = K.Kernel("cast", (7,), 1, (K.Binding(a, (7,), "read"), K.Binding(b, (7,), "write")),
                         (K.Result(1, ix, K.Cast(op, K.Load(0, ix, a), b)),))
            generate_hsaco([k], target)
print("done")
'''


@pytest.mark.parametrize("chip", ["gfx942", "gfx1100"])
def test_math_reaches_llvm_only_as_arithmetic(chip):
    """Every float op compiles or is refused by name; none reaches LLVM's AMDGPU backend as math
    it would abort the process on (run in a child process, which such an abort would kill)."""
    proc = subprocess.run([sys.executable, "-c", _SWEEP, chip], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.endswith("done\n"), proc.stderr[-2000:]
    refused = [line.split()[1:3] for line in proc.stdout.splitlines() if line.startswith("refused")]
    assert refused and all(dt == "f64" for dt, _ in refused), refused
    assert ["f64", "exp"] in refused and ["f64", "tanh"] in refused


def test_without_ld_lld_the_error_says_what_to_install(monkeypatch):
    import pyree.compiler.codegen.rocm.hsaco as hsaco
    monkeypatch.delenv("PYREE_LLD", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(hsaco.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CompileError, match="ld.lld.*apt-get install lld-22.*ziglang.*PYREE_LLD"):
        compile_str((DATA / "add.mlir").read_text(), CompileOptions(target_backends=["rocm"]))
