"""CPU-only: ``--iree-rocm-link-bc`` links AMD's device libraries (ocml + oclc bitcode) into the
rocm target's kernels.

Checked here: the flags reach CompileOptions; with link-bc on, math is calls to ``__ocml_*`` in the
IR before linking and none after (everything resolved, internal, inlined); the code objects pass
``hsaco_reader``'s structural checks and name no symbol but their kernels'; every math op the
kernel IR has links for f16/f32/bf16/f64; a missing directory, ``ocml.bc`` or chip library is one
clear error. With it off no ocml is referenced. The numbers: there is no AMD GPU here, so the
kernels pyree emits run on this CPU instead, ocml linked as for the GPU and its AMDGPU intrinsics
emulated (``ocml_host.py`` says what that shows and what it cannot).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
from tooling import missing, require_module  # noqa: E402

require_module("xdsl")  # the compiler

import ocml_host  # noqa: E402
import test_math_ops as math_ops  # noqa: E402
from hsaco_reader import check_hsaco, check_module, lld, read_hsaco, rocm_executables  # noqa: E402, F401
from pyree.compiler import CompileError  # noqa: E402
from pyree.compiler import kernel as K  # noqa: E402
from pyree.compiler.codegen.common.math_expansion import GPU_EXPANDED  # noqa: E402
from pyree.compiler.codegen.rocm import (  # noqa: E402
    device_libs,
    generate_hsaco,
    generate_ir,
    resolve_target,
)
from pyree.compiler.codegen.rocm.hsaco import target_machine  # noqa: E402
from pyree.compiler.tools.compile import _options, _parser  # noqa: E402

CHIPS = ["gfx908", "gfx90a", "gfx942", "gfx1100"]
BINARY = ("pow", "atan2")

# tanh/atan/erf/pow in f32, exp/sin/atan2 in f64: nothing that LLVM's AMDGPU backend lowers itself
MLIR = """
func.func @f(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf64>) -> (tensor<64xf32>, tensor<64xf64>) {
  %0 = math.tanh %a : tensor<64xf32>
  %1 = math.atan %b : tensor<64xf32>
  %2 = math.erf %0 : tensor<64xf32>
  %3 = math.powf %1, %2 : tensor<64xf32>
  %4 = math.exp %c : tensor<64xf64>
  %5 = math.sin %4 : tensor<64xf64>
  %6 = math.atan2 %5, %c : tensor<64xf64>
  return %3, %6 : tensor<64xf32>, tensor<64xf64>
}
"""
MLIR_F64 = """
func.func @f(%c: tensor<64xf64>) -> tensor<64xf64> {
  %0 = math.exp %c : tensor<64xf64>
  %1 = math.atan %0 : tensor<64xf64>
  %2 = math.log1p %1 : tensor<64xf64>
  return %2 : tensor<64xf64>
}
"""


@pytest.fixture(scope="module")
def bc_dir() -> str:
    """The installed device libraries: missing, these tests skip (fail under CI=true)."""
    try:
        return device_libs.locate("")
    except CompileError as e:
        missing(str(e))


def math_kernel(op: str, dtype: str, n: int = 64) -> K.Kernel:
    ix = (K.AffineExpr((1,)),)
    x = K.Load(0, ix, dtype)
    value = K.Binary(op, x, K.Load(1, ix, dtype), dtype) if op in BINARY else K.Unary(op, x, dtype)
    b = K.Binding(dtype, (n,), "read")
    return K.Kernel(f"{op}_{dtype}", (n,), 1, (b, b, K.Binding(dtype, (n,), "write")),
                    (K.Result(2, ix, value),))


def isa_file(bc_dir: str, chip: str) -> Path:
    return Path(bc_dir) / f"oclc_isa_version_{chip[3:]}.bc"


def only_kernel_symbols(hsaco: bytes, names) -> None:
    """No symbol but the kernels' own (``k0_x``, ``k0_x.kd``, ``k0_x.num_vgpr``, ...): an
    unresolved device-library reference would be an undefined symbol of its own name."""
    for symbol, _ in read_hsaco(hsaco)["symbols"]:
        assert symbol in ("", "_DYNAMIC") or symbol.split(".")[0] in names, symbol


def code_objects(vmfb: bytes) -> list[bytes]:
    _, execs = rocm_executables(vmfb)
    (data,) = struct.unpack_from("<Q", vmfb, len(vmfb) - 48 + 8)
    return [vmfb[data + e.rocm.codeObject.offset:][:e.rocm.codeObject.length] for e in execs]


def pyree_compile(*args, stdin: str):
    """The CLI, its stderr only errors: a loaded machine would otherwise pass the 2 s after which
    stage lines start."""
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile",
                           "--no-pyree-progress", *args], input=stdin.encode(), capture_output=True)


# ---- flags ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, link_bc, directory", [
    ([], False, ""),
    (["--iree-rocm-link-bc=true"], True, ""),
    (["--iree-rocm-link-bc"], True, ""),
    (["--pyree-rocm-link-bc=false"], False, ""),
    (["--iree-rocm-link-bc=1", "--iree-rocm-bc-dir=/x/bitcode"], True, "/x/bitcode"),
    (["--iree-hip-bc-dir", "/y"], False, "/y"),
    (["--pyree-rocm-bc-dir=/z"], False, "/z"),
])
def test_flags(flags, link_bc, directory):
    parser = _parser()
    options = _options(parser.parse_args(["in.mlir", *flags]), parser)
    assert (options.rocm_link_bc, options.rocm_bc_dir) == (link_bc, directory)


def test_help_says_the_default():
    text = _parser().format_help()
    assert "--iree-rocm-link-bc" in text and "--iree-hip-bc-dir" in text
    assert "default false: pyree composes math" in " ".join(text.split())


# ---- through the real CLI -------------------------------------------------------------------------
def test_cli_links_ocml(bc_dir, tmp_path):
    out = tmp_path / "m.vmfb"
    proc = pyree_compile("-", "-o", str(out), "--pyree-hal-target-backends=rocm",
                         "--iree-rocm-target-chip=gfx90a", "--iree-rocm-link-bc=true", stdin=MLIR)
    assert proc.returncode == 0, proc.stderr.decode()
    vmfb = out.read_bytes()
    assert check_module(vmfb, "gfx90a") >= 1
    for hsaco in code_objects(vmfb):
        names = [k[".name"] for k in read_hsaco(hsaco)["metadata"]["amdhsa.kernels"]]
        only_kernel_symbols(hsaco, names)


def test_cli_gfx942(bc_dir, tmp_path):
    """gfx942 (MI300): f64 math needs no chip library, f32 math needs oclc_isa_version_942.bc,
    which Debian 12's rocm-device-libs (ROCm 5.2) predates: then one clear error, exit 1."""
    out = tmp_path / "m.vmfb"
    flags = ("-o", str(out), "--pyree-hal-target-backends=rocm", "--iree-rocm-target-chip=gfx942",
             "--iree-rocm-link-bc=true", f"--iree-rocm-bc-dir={bc_dir}")
    proc = pyree_compile("-", *flags, stdin=MLIR_F64)
    assert proc.returncode == 0, proc.stderr.decode()
    assert check_module(out.read_bytes(), "gfx942") == 1
    proc = pyree_compile("-", *flags, stdin=MLIR)
    if isa_file(bc_dir, "gfx942").exists():
        assert proc.returncode == 0, proc.stderr.decode()
    else:
        err = proc.stderr.decode()
        assert proc.returncode == 1 and "Traceback" not in err
        assert "oclc_isa_version_942.bc" in err and bc_dir in err, err


@pytest.mark.parametrize("bad, what", [("/nonexistent/bitcode", "does not exist"),
                                       ("EMPTY", "has no ocml.bc")])
def test_cli_bad_bc_dir(bad, what, tmp_path):
    bad = str(tmp_path) if bad == "EMPTY" else bad
    proc = pyree_compile("-", "-o", str(tmp_path / "m.vmfb"), "--pyree-hal-target-backends=rocm",
                         "--iree-rocm-link-bc=true", f"--iree-rocm-bc-dir={bad}", stdin=MLIR)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err and err.count("\n") == 1, err
    assert f"'{bad}' {what}" in err and "rocm-device-libs" in err and "--iree-rocm-bc-dir" in err


# ---- the IR around the link -----------------------------------------------------------------------
def test_ir_calls_ocml_only_with_link_bc(bc_dir):
    target = resolve_target("gfx90a")
    kernels = [math_kernel("tanh", "f32"), math_kernel("exp", "f64"), math_kernel("pow", "f16"),
               math_kernel("erf", "bf16")]
    composed = [k for k in kernels if k.name != "exp_f64"]
    off, _ = generate_ir(composed, target)
    assert "__ocml" not in off and "__oclc" not in off
    with pytest.raises(CompileError, match="'exp' on f64 is not supported"):  # composed in f32 only
        generate_ir(kernels, target)
    on, _ = generate_ir(kernels, target, link_bc=True)
    for call in ("float @__ocml_tanh_f32(float", "double @__ocml_exp_f64(double",
                 "float @__ocml_pow_f32(float", "float @__ocml_erf_f32(float"):
        assert f"call {call}" in on and f"declare {call}" in on
    for narrow in ("half", "bfloat"):  # through f32, rounded once
        assert f"fpext {narrow}" in on and "fptrunc float %t" in on and f"to {narrow}" in on
    linked = device_libs.link(on, target, target_machine(target), bc_dir)
    assert "define internal" in linked and "amdgpu_kernel" in linked
    declared = [line.split("@")[1].split("(")[0] for line in linked.splitlines()
                if line.startswith("declare")]
    assert all(name.startswith("llvm.") for name in declared), declared
    assert "external" not in linked and "__oclc_ISA_version = internal" in linked


@pytest.mark.parametrize("chip", CHIPS)
def test_every_math_op_links(chip, bc_dir):
    """Every op that is composed without link-bc, on every float dtype: where the chip's
    library exists all of it compiles (each call inlined: no symbol but the kernels'); f64 needs
    no chip library at all."""
    target = resolve_target(chip)
    f64 = [math_kernel(op, "f64") for op in sorted(GPU_EXPANDED)]
    hsaco, launches = generate_hsaco(f64, target, bc_dir)
    check_hsaco(hsaco, chip, launches, f64)
    only_kernel_symbols(hsaco, [name for name, _ in launches])
    rest = [math_kernel(op, dtype) for op in sorted(GPU_EXPANDED) for dtype in ("f32", "f16", "bf16")]
    if isa_file(bc_dir, chip).exists():
        hsaco, launches = generate_hsaco(rest, target, bc_dir)
        check_hsaco(hsaco, chip, launches, rest)
        only_kernel_symbols(hsaco, [name for name, _ in launches])
    else:
        with pytest.raises(CompileError, match=f"no oclc_isa_version_{chip[3:]}.bc for {chip}"):
            generate_hsaco(rest, target, bc_dir)


def test_missing_chip_library_is_named(bc_dir, tmp_path):
    """A copy of the libraries without gfx908's: the error names the file and the directory."""
    for lib in Path(bc_dir).glob("*.bc"):
        if lib.name != "oclc_isa_version_908.bc":
            (tmp_path / lib.name).symlink_to(lib)
    with pytest.raises(CompileError) as e:
        generate_hsaco([math_kernel("exp", "f32")], resolve_target("gfx908"), str(tmp_path))
    assert "oclc_isa_version_908.bc" in str(e.value) and str(tmp_path) in str(e.value)


def test_default_directory_follows_rocm_path(bc_dir, monkeypatch, tmp_path):
    (tmp_path / "amdgcn" / "bitcode").mkdir(parents=True)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    with pytest.raises(CompileError, match="amdgcn/bitcode' has no ocml.bc"):
        device_libs.locate("")
    monkeypatch.delenv("ROCM_PATH")
    assert device_libs.locate("") == bc_dir


# ---- what another ROCm's ocml could hold, on a copy of the libraries with ocml.bc replaced --------
def fake_ocml(bc_dir: str, into: Path, body: str) -> str:
    """``bc_dir``'s libraries with an ocml.bc assembled from ``body`` (LLVM IR)."""
    for lib in Path(bc_dir).glob("*.bc"):
        if lib.name != "ocml.bc":
            (into / lib.name).symlink_to(lib)
    module = llvm.parse_assembly(f'target triple = "amdgcn-amd-amdhsa"\n{body}')
    (into / "ocml.bc").write_bytes(module.as_bitcode())
    return str(into)


def exp_f64(body: str, attrs: str = "") -> str:
    return (f"define linkonce_odr protected double @__ocml_exp_f64(double %x) #0 {{\n{body}\n}}\n"
            f"attributes #0 = {{ nounwind {attrs} }}")


@pytest.mark.parametrize("chip", ["gfx908", "gfx1100"])
def test_library_target_cpu_is_overridden(chip, bc_dir, tmp_path):
    """A library function built for another chip is compiled for ours, and inlined."""
    libs = fake_ocml(bc_dir, tmp_path, exp_f64("%y = fmul double %x, %x\nret double %y",
                                               '"target-cpu"="gfx1030" "target-features"="+dpp"'))
    kernels = [math_kernel("exp", "f64")]
    hsaco, launches = generate_hsaco(kernels, resolve_target(chip), libs)
    check_hsaco(hsaco, chip, launches, kernels)
    only_kernel_symbols(hsaco, [name for name, _ in launches])


def test_library_math_llvm_cannot_lower_is_refused(bc_dir, tmp_path):
    """LLVM's AMDGPU backend aborts the process on llvm.exp.f64: refused by name first."""
    libs = fake_ocml(bc_dir, tmp_path, exp_f64("%y = call double @llvm.exp.f64(double %x)\n"
                                               "ret double %y"))
    with pytest.raises(CompileError, match="cannot lower 'llvm.exp.f64'.*device libraries"):
        generate_hsaco([math_kernel("exp", "f64")], resolve_target("gfx90a"), libs)


def test_library_without_the_function(bc_dir, tmp_path):
    libs = fake_ocml(bc_dir, tmp_path, exp_f64("ret double %x"))
    with pytest.raises(CompileError, match=f"'{tmp_path}' do not define __ocml_tanh_f64"):
        generate_hsaco([math_kernel("tanh", "f64")], resolve_target("gfx90a"), libs)


def test_unknown_control_constant(bc_dir, tmp_path):
    libs = fake_ocml(bc_dir, tmp_path, "@__oclc_new_knob = external addrspace(4) constant i32\n"
                     + exp_f64("%k = load i32, ptr addrspace(4) @__oclc_new_knob\n"
                               "%f = sitofp i32 %k to double\n%y = fmul double %x, %f\n"
                               "ret double %y"))
    with pytest.raises(CompileError, match="control constant __oclc_new_knob"):
        generate_hsaco([math_kernel("exp", "f64")], resolve_target("gfx90a"), libs)


# ---- the numbers, on this CPU (ocml_host.py: what that shows and what it cannot) -----------------
HOST_DTYPES = ["f32", "f64", "f16"]  # bf16 takes f16's path; its x86 conversions flushed subnormals
HOST_ULP = {"f32": 3, "f64": 4, "f16": 1}  # as measured here: erfc the worst (f32 3, f64 4)
# ocml (ROCm 5.2) gives +0 where IEEE keeps -0: expm1(-0), and in f64 log1p(-0)
PLUS_ZERO = {("expm1", "f32"), ("expm1", "f64"), ("expm1", "f16"), ("log1p", "f64")}


@pytest.fixture(scope="module")
def host_kernels(bc_dir):
    cases = [(op, dtype) for dtype in HOST_DTYPES for op in sorted(GPU_EXPANDED)]
    return cases, ocml_host.HostKernels([math_kernel(op, dt, math_ops.N) for op, dt in cases], bc_dir)


@pytest.mark.parametrize("dtype", HOST_DTYPES)
def test_numbers_on_this_cpu(dtype, host_kernels):
    """math_ops' inputs (every magnitude, subnormals, specials) through each op's kernel: within
    HOST_ULP of the float64 reference rounded once, special values exact."""
    cases, run = host_kernels
    np_dtype, errors = math_ops.np_dtype(dtype), {}
    for op in sorted(GPU_EXPANDED):
        args = (math_ops.binary_inputs(np_dtype) if op in BINARY
                else (math_ops.inputs(op, np_dtype),) * 2)
        out = np.zeros_like(args[0])
        run(cases.index((op, dtype)), *args, out)
        args = args if op in BINARY else args[:1]
        want, special = math_ops.reference(op, *args), math_ops.special_mask(*args)
        if (op, dtype) in PLUS_ZERO:
            minus_zero = (args[0] == 0) & np.signbit(args[0])
            assert minus_zero.any() and not np.signbit(out[minus_zero]).any()
            out[minus_zero] = want[minus_zero]
        errors[op] = float(np.max(math_ops.ulp_errors(out, want, special)))
    assert max(errors.values()) <= HOST_ULP[dtype], errors
