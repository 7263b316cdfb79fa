"""pyree-run-module with text inputs and printed (or compared) results never imports numpy (issue
13: numpy's import was ~120 ms and ~17 MB of a 190 ms CLI process), and prints what numpy computes
and prints (numpy_reference.py, numpy's own float printing) byte for byte: every dtype the
module takes, NaN, ±inf and -0 included, odd shapes, elision. Checked through the real CLI under
``python -X importtime``, whose import log must hold no numpy module."""

import struct
import subprocess
import sys

import numpy as np
import pytest
from numpy_reference import array_text
from pyree.compiler import CompileOptions, compile_str

SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, 0.1, -2.5e-7, 1e10, 65504.0, 1 / 3]
SHAPE = (3, 7)  # odd: 21 elements
rng = np.random.default_rng(13)

MLIR = """
func.func @f32(%a: tensor<3x7xf32>, %b: tensor<3x7xf32>) -> (tensor<3x7xf32>, tensor<3x7xf32>) {
  %s = arith.addf %a, %b : tensor<3x7xf32>
  %p = arith.mulf %a, %b : tensor<3x7xf32>
  return %s, %p : tensor<3x7xf32>, tensor<3x7xf32>
}
func.func @f16(%a: tensor<3x7xf16>, %b: tensor<3x7xf16>) -> tensor<3x7xf16> {
  %s = arith.addf %a, %b : tensor<3x7xf16>
  return %s : tensor<3x7xf16>
}
func.func @i32(%a: tensor<3x7xi32>, %b: tensor<3x7xi32>) -> tensor<3x7xi32> {
  %s = arith.addi %a, %b : tensor<3x7xi32>
  return %s : tensor<3x7xi32>
}
func.func @i1(%a: tensor<3x7xi1>, %b: tensor<3x7xi1>) -> tensor<3x7xi1> {
  %s = arith.xori %a, %b : tensor<3x7xi1>
  return %s : tensor<3x7xi1>
}
func.func @big(%a: tensor<40x50xf32>) -> tensor<40x50xf32> {
  %s = arith.addf %a, %a : tensor<40x50xf32>
  return %s : tensor<40x50xf32>
}
"""
VULKAN_MLIR = MLIR[:MLIR.index("func.func @f16")] + MLIR[MLIR.index("func.func @i32"):
                                                          MLIR.index("func.func @i1")]


def _compile(folder, mlir: str, backend: str) -> str:
    path = str(folder / f"{backend}.vmfb")
    compile_str(mlir, CompileOptions(target_backends=[backend]), output_file=path)
    return path


@pytest.fixture(scope="module")
def cpu_module(tmp_path_factory) -> str:
    return _compile(tmp_path_factory.mktemp("no_numpy"), MLIR, "llvm-cpu")


def _floats(dtype) -> np.ndarray:
    values = np.concatenate([np.array(SPECIALS, np.float64),
                             rng.standard_normal(21 - len(SPECIALS)) * 10.0 ** rng.integers(-3, 4, 10)])
    with np.errstate(over="ignore"):
        return rng.permutation(values).astype(dtype).reshape(SHAPE)


def _inputs(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name in ("f32", "f16"):
        return _floats(np.dtype(name.replace("f", "float"))), _floats(np.dtype(name.replace("f", "float")))
    if name == "i32":
        info = np.iinfo(np.int32)
        a = rng.integers(info.min // 2, info.max // 2, SHAPE, dtype=np.int32, endpoint=True)
        a.flat[:2] = [info.min // 2, info.max // 2]
        return a, rng.integers(info.min // 2, info.max // 2, SHAPE, dtype=np.int32)
    return rng.integers(0, 2, SHAPE).astype(bool), rng.integers(0, 2, SHAPE).astype(bool)


def _expected(name: str, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        if name == "f32":
            return [a + b, a * b]
        return [a ^ b] if name == "i1" else [a + b]


def _cli(*flags: str) -> tuple[str, list[str]]:
    """(stdout, the modules imported) of ``pyree-run-module flags...``, run as a user runs it."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m",
                           "pyree.runtime.tools.run_module", *flags],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = [line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:") and "|" in line]
    assert "pyree.runtime.tools.run_module" in imported or "pyree.runtime" in imported
    return proc.stdout, imported


def _numpy_modules(imported: list[str]) -> list[str]:
    return [m for m in imported if m.split(".")[0] in ("numpy", "ml_dtypes")]


@pytest.mark.parametrize("device", ["local-task", "local-sync"])
@pytest.mark.parametrize("name", ["f32", "f16", "i32", "i1"])
def test_text_in_text_out_imports_no_numpy_and_prints_what_numpy_prints(cpu_module, device, name):
    _check_text_in_text_out(device, cpu_module, name)


def _check_text_in_text_out(device: str, module: str, name: str) -> None:
    a, b = _inputs(name)
    stdout, imported = _cli(f"--device={device}", f"--module={module}", f"--function={name}",
                            f"--input={array_text(a, name)}", f"--input={array_text(b, name)}")
    assert _numpy_modules(imported) == []
    results = _expected(name, a, b)
    assert stdout == f"EXEC @{name}\n" + "".join(
        f"result[{i}]: hal.buffer_view\n{array_text(r, name)}\n" for i, r in enumerate(results))


def test_every_f32_and_f16_bit_pattern_class_prints_as_numpy_prints_it(cpu_module):
    """Subnormals, powers of two (their rounding interval is lopsided), the largest finite values:
    the inputs come back unchanged (x + -0 is x) and print as numpy prints them."""
    bits = [0x00000001, 0x00000002, 0x007FFFFF, 0x00800000, 0x00800001, 0x3F800000, 0x3F7FFFFF,
            0x4B800000, 0x4B7FFFFF, 0x7F7FFFFF, 0x7F000000, 0x5D5E0B6B, 0x2F800000, 0x33D6BF95,
            0x80000001, 0xBF800000, 0xFF7FFFFF, 0x3DCCCCCD, 0x3EAAAAAB, 0x4C000000, 0x38D1B717]
    a = np.array(bits, np.uint32).view(np.float32).reshape(SHAPE)
    zero = np.full(SHAPE, -0.0, np.float32)
    stdout, imported = _cli("--device=local-sync", f"--module={cpu_module}", "--function=f32",
                            f"--input={array_text(a, 'f32')}", f"--input={array_text(zero, 'f32')}",
                            "--output=-", "--output=")
    assert _numpy_modules(imported) == []
    assert stdout.splitlines()[2] == array_text(a, "f32")
    h = np.array([0x0001, 0x03FF, 0x0400, 0x3C00, 0x3BFF, 0x7BFF, 0x7800, 0x8001, 0xFBFF, 0x2E66,
                  0x3555, 0x0200, 0x6400, 0x63FF, 0x1400, 0x5640, 0x4248, 0x7C00, 0xFC00, 0x7E00,
                  0x8000], np.uint16).view(np.float16).reshape(SHAPE)
    stdout, _ = _cli("--device=local-sync", f"--module={cpu_module}", "--function=f16",
                     f"--input={array_text(h, 'f16')}",
                     f"--input={array_text(np.full(SHAPE, -0.0, np.float16), 'f16')}")
    assert stdout.splitlines()[2] == array_text(h, "f16")


def test_elided_results_and_expected_output_import_no_numpy(cpu_module):
    a = (rng.standard_normal((40, 50)) * 100).astype(np.float32)
    flags = ["--device=local-task", f"--module={cpu_module}", "--function=big",
             f"--input={array_text(a, 'f32')}"]
    stdout, imported = _cli(*flags, "--print_max_element_count=75")
    assert _numpy_modules(imported) == []
    assert stdout.splitlines()[2] == array_text(a + a, "f32", max_elements=75)
    assert stdout.splitlines()[2].endswith("...][...]")
    stdout, imported = _cli(*flags, f"--expected_output={array_text(a + a, 'f32')}")
    assert _numpy_modules(imported) == []
    assert stdout == "EXEC @big\n[SUCCESS] all function outputs matched their expected values.\n"


@pytest.mark.parametrize("name", ["f32", "f16", "i32", "i1"])
def test_npy_files_in_and_out_import_no_numpy(cpu_module, tmp_path, name):
    """@file.npy in, @file.npy and +file.npy out: byte for byte what numpy reads and writes,
    special values included, without importing it."""
    a, b = _inputs(name)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    results = _expected(name, a, b)
    specs = [f"--output=@{tmp_path / 'r0.npy'}"] + [f"--output=+{tmp_path / 'r0.npy'}"] * (
        len(results) - 1)
    stdout, imported = _cli("--device=local-sync", f"--module={cpu_module}", f"--function={name}",
                            f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}",
                            *specs)
    assert _numpy_modules(imported) == [] and stdout == f"EXEC @{name}\n"
    with open(tmp_path / "r0.npy", "rb") as f:
        for want in results:
            got = np.load(f)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()  # NaN payloads and -0 included


def test_npy_files_numpy_must_read_still_work(cpu_module, tmp_path):
    """A Fortran-order or big-endian .npy input goes through numpy, with the same result."""
    a, b = _inputs("f32")
    np.save(tmp_path / "a.npy", np.asfortranarray(a))
    np.save(tmp_path / "b.npy", b.astype(">f4"))
    stdout, imported = _cli("--device=local-sync", f"--module={cpu_module}", "--function=f32",
                            f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}")
    assert "numpy" in imported
    with np.errstate(all="ignore"):
        assert stdout.splitlines()[2] == array_text(a + b, "f32")


def test_bf16_text_rounds_as_ml_dtypes_does_without_importing_it(cpu_module, tmp_path):
    """bf16 (no kernel needed: a raw .bin output of the parsed input) is written as ml_dtypes
    writes it: through f32, rounded to nearest even; it prints as the f32 that holds it."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from pyree.runtime.tools.io_format import format_array, parse_value

    values = [1 + 2**-8 + 2**-30, 3.14159, -0.0, np.inf, np.nan, 1e-40, 3.3e38, 255.5]
    parsed = parse_value("8xbf16=" + " ".join(repr(float(v)) for v in values))
    want = np.array(values, np.float64).astype(np.float32).astype(ml_dtypes.bfloat16)
    assert bytes(parsed.data) == want.tobytes()
    assert format_array(parsed) == array_text(want, "bf16")
    assert struct.unpack("=8H", parsed.data) == tuple(want.view(np.uint16))


def test_importing_the_gpu_drivers_imports_no_numpy():
    """hal-cuda and hal-vulkan use cffi arrays, not numpy, on the CLI's path."""
    code = ("import sys, importlib\n"
            "for name in ('pyree.hal.cuda.device', 'pyree.hal.cuda.command_buffer',"
            " 'pyree.hal.vulkan'):\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ImportError as e:\n"
            "        print('absent', name, e)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]", proc.stdout


@pytest.mark.vulkan
def test_vulkan_text_in_text_out_imports_no_numpy(tmp_path):
    module = _compile(tmp_path, VULKAN_MLIR, "vulkan-spirv")
    for name in ("f32", "i32"):
        _check_text_in_text_out("vulkan", module, name)
