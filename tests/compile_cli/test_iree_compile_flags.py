"""IREE's compile flags through the real CLI (subprocess): every command line of IREE's CPU,
bare-metal, CUDA/ROCm and Vulkan deployment guides and developer tips, the flags accepted with no
effect, --compile-to, --iree-hal-dump-executable-files-to, the listings, the portable llvm-cpu
default, and the clear refusals. Each compiled module is checked by what it records
(pyree-dump-module) and, for llvm-cpu, by running it against numpy."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler.flags import NO_EFFECT
from tooling import require_lld

DATA = Path(__file__).parent.parent / "data"
ADD, MLP = DATA / "add.mlir", DATA / "mlp.mlir"
rng = np.random.default_rng()


def _compile(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", *args],
                          capture_output=True, timeout=300, check=False)


def _compiled(tmp_path: Path, source: Path, *flags: str) -> Path:
    out = tmp_path / "m.vmfb"
    proc = _compile(str(source), "-o", str(out), *flags)
    assert proc.returncode == 0, proc.stderr.decode()
    return out


def _dump(module: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.dump_module", str(module)],
                          capture_output=True, text=True, timeout=120, check=True)
    return proc.stdout


def _check_add_runs(module: Path) -> None:
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    a[:3] = [np.nan, np.inf, -0.0]
    b[:3] = [1.0, -1.0, -0.0]
    got = rt.load_module(module.read_bytes(), device="local-sync")["add"](a, b).to_host()
    want = (a.astype(np.float64) + b).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[2])


@pytest.mark.parametrize("flags, records", [
    # CPU guide
    (["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
      "--iree-llvmcpu-target-cpu=host"], "llvm_cpu: cpu"),
    (["--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-triple=x86_64-linux-gnu",
      "--iree-llvmcpu-target-cpu-features=+avx2,+fma"], "cpu x86-64, features: avx2, fma"),
    (["--iree-llvmcpu-target-cpu=haswell", "--iree-llvmcpu-target-cpu-features=-avx2"],
     "cpu haswell, features: abm, aes, avx, bmi1, bmi2, cx16, f16c, fma, lahf_lm, movbe,"),
    # bare-metal guide
    (["--iree-stream-partitioning-favor=min-peak-memory", "--iree-hal-target-device=local",
      "--iree-hal-local-target-device-backends=llvm-cpu",
      "--iree-llvmcpu-target-triple=x86_64-pc-linux-elf", "--iree-llvmcpu-debug-symbols=false"],
     "cpu x86-64, features: none"),
])
def test_cpu_guide_commands(flags, records, tmp_path):
    module = _compiled(tmp_path, ADD, *flags)
    assert records in _dump(module)
    if "avx2" not in records or "avx2" in open("/proc/cpuinfo").read():
        _check_add_runs(module)


@pytest.mark.parametrize("flags, records", [
    # CUDA/ROCm guide (older spellings) and the current CUDA guide
    (["--iree-hal-target-backends=cuda", "--iree-hal-cuda-llvm-target-arch=sm_70"], "target: sm_70"),
    (["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_90"], "target: sm_90\n"),
    (["--iree-hal-target-backends=rocm", "--iree-rocm-target-chip=gfx906",
      "--iree-rocm-link-bc=false"], "target: gfx906"),
    (["--iree-hal-target-device=hip", "--iree-hip-target=mi300x"], "target: gfx942"),
    (["--iree-hal-target-backends=rocm", "--iree-hip-target=cdna2"], "target: gfx90a"),
    (["--iree-hal-target-backends=rocm", "--iree-hip-target=w7700"], "target: gfx1101"),
    # Vulkan guide: triples (older flag) and one name (current flag)
    (["--iree-hal-target-backends=vulkan-spirv",
      "--iree-vulkan-target-triple=valhall-unknown-android31"], "target: valhall-unknown-android31"),
    (["--iree-hal-target-device=vulkan", "--iree-vulkan-target=ampere"], "target: ampere"),
    (["--iree-hal-target-device=vulkan", "--iree-vulkan-target=rdna3"], "target: rdna3"),
    (["--iree-hal-target-device=vulkan", "--iree-vulkan-target=valhall"], "target: valhall"),
    (["--iree-hal-target-device=vulkan", "--iree-vulkan-target=rtx4090"], "target: rtx4090"),
])
def test_gpu_guide_commands(flags, records, tmp_path):
    if any("rocm" in f or "hip" in f for f in flags):
        require_lld()  # the rocm target links its code objects with it
    assert records in _dump(_compiled(tmp_path, ADD, *flags))


def test_the_default_llvm_cpu_module_needs_no_cpu_extension(tmp_path):
    """Built anywhere (an AVX-512 CI box included), it loads on any x86-64 deploy host."""
    module = _compiled(tmp_path, ADD)
    assert "target: elf-x86_64, cpu x86-64, features: none" in _dump(module)
    _check_add_runs(module)


def test_no_effect_flags_are_accepted_and_change_nothing(tmp_path):
    flags = []
    for name, values, _ in NO_EFFECT:
        value = "true" if values == "BOOL" else "3" if values == "N" else values[-1]
        flags.append(f"{name}={value}")
    plain = _compiled(tmp_path, MLP).read_bytes()
    tuned = _compiled(tmp_path, MLP, *flags, "--mlir-disable-threading", "--iree-opt-level=O0")
    # The module records no time or path, so "changes nothing" is byte equality.
    assert tuned.read_bytes() == plain


@pytest.mark.parametrize("phase, first_line", [
    ("input", "func @mlp(%x: tensor<37x53xf32>) -> (tensor<37x11xf32>)"),
    ("flow", "func @mlp(%x: tensor<37x53xf32>) -> (tensor<37x11xf32>)"),
    ("executable-sources", "kernel @mlp_dispatch_0_"),
])
def test_compile_to_writes_that_stage_as_text(phase, first_line, tmp_path):
    out = tmp_path / "m.txt"
    proc = _compile(str(MLP), f"--compile-to={phase}", "-o", str(out))
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.read_text().startswith(first_line)


def test_dump_executable_files_per_stage_and_target(tmp_path):
    """Sources per dispatch; each target's artefacts from the compile that built the module,
    which the module's executables hold byte for byte."""
    files = tmp_path / "files"
    binaries = tmp_path / "binaries"
    require_lld()
    module = _compiled(tmp_path, MLP, "--iree-hal-target-backends=llvm-cpu,cuda,vulkan-spirv,rocm",
                       f"--iree-hal-dump-executable-files-to={files}",
                       f"--iree-hal-dump-executable-binaries-to={binaries}")
    names = sorted(p.name for p in files.iterdir())
    for name in ("module_mlp_dispatch_0.kernel.txt", "module_mlp_dispatch_1.kernel.txt",
                 "module_system_elf_x86_64.so", "module_cuda_nvptx_fb.ptx",
                 "module_rocm_hsaco_fb.codegen.ll", "module_rocm_hsaco_fb.o",
                 "module_rocm_hsaco_fb.hsaco", "module_vulkan_spirv_fb.spv"):
        assert name in names, (name, names)
    for part in (0, 1):  # two kernels: two LLVM modules, one file each
        for suffix in (".codegen.ll", ".optimized.ll", ".s", ".o"):
            assert f"module_system_elf_x86_64_part{part}{suffix}" in names, names
        assert "define " in (files / f"module_system_elf_x86_64_part{part}.codegen.ll").read_text()
        assert f"module_cuda_nvptx_fb_part{part}.codegen.ll" in names, names
    assert (files / "module_cuda_nvptx_fb.ptx").read_text().count(".entry ") == 2
    data = module.read_bytes()
    for name in ("module_system_elf_x86_64.so", "module_cuda_nvptx_fb.ptx",
                 "module_rocm_hsaco_fb.hsaco", "module_vulkan_spirv_fb.spv"):
        assert (files / name).read_bytes() in data, name
    assert (files / "module_rocm_hsaco_fb.hsaco").read_bytes()[:4] == b"\x7fELF"
    assert (files / "module_vulkan_spirv_fb.spv").read_bytes()[:4] == b"\x03\x02\x23\x07"
    assert sorted(p.name for p in binaries.iterdir()) == [
        n for n in names if n.endswith((".so", ".ptx", ".cubin", ".hsaco", ".spv"))]


def test_listings():
    proc = _compile("--iree-hal-list-target-backends")
    assert proc.returncode == 0
    assert proc.stdout.decode().split() == ["Registered", "target", "backends:", "llvm-cpu",
                                            "cuda", "rocm", "vulkan-spirv", "vmvx"]
    proc = _compile("--iree-llvmcpu-list-targets")
    assert proc.returncode == 0 and b"x86_64-unknown-linux-gnu" in proc.stdout
    assert b"x86-64-v3" in proc.stdout


@pytest.mark.parametrize("flags, code, message", [
    (["--iree-llvmcpu-target-triple=aarch64-linux-android30"], 1,
     "generates x86-64 Linux shared objects only"),
    (["--iree-llvmcpu-target-cpu-features=+sve"], 1,
     "unknown --pyree-llvmcpu-target-cpu-features entry '+sve'"),
    (["--iree-llvmcpu-target-cpu-features=-sse2"], 1, "sse2 is part of every x86-64 CPU"),
    (["--iree-hal-target-backends=cuda", "--iree-hal-cuda-llvm-target-arch=sm_35"], 1,
     "unknown --pyree-cuda-target 'sm_35'"),
    (["--iree-hal-target-backends=vulkan-spirv", "--iree-vulkan-target=rtx9999-x"], 1,
     "is not a known architecture"),
    (["--compile-to=hal"], 1, "--compile-to=hal is not supported"),
    (["--compile-to=codegen"], 2, "invalid choice: 'codegen'"),
    (["--iree-opt-level=O4"], 2, "invalid choice: 'O4'"),
    (["--iree-hal-dump-executable-benchmarks-to=/tmp/x"], 2,
     "pyree writes no per-dispatch benchmark modules"),
    (["--iree-input-type=torch"], 1, "--iree-input-type=torch is not supported"),
])
def test_what_pyree_cannot_do_is_a_clear_error(flags, code, message, tmp_path):
    proc = _compile(str(ADD), "-o", str(tmp_path / "m.vmfb"), *flags)
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert message in err and "Traceback" not in err


def test_mlir_timing_prints_the_stages_with_their_times(tmp_path):
    proc = _compile(str(ADD), "-o", str(tmp_path / "m.vmfb"), "--mlir-timing")
    assert proc.returncode == 0
    lines = proc.stderr.decode().splitlines()
    assert lines[0].startswith("pyree-compile: [") and "parsing" in lines[0]
    assert any("codegen for llvm-cpu" in line for line in lines)


def test_sources_only_dump(tmp_path):
    _compiled(tmp_path, ADD, f"--iree-hal-dump-executable-sources-to={tmp_path / 'src'}")
    (only,) = (tmp_path / "src").iterdir()
    assert only.name == "module_add_dispatch_0.kernel.txt"
    assert only.read_text().startswith("kernel @add_dispatch_0_addf_4_f32")
