"""pyree-dump-module: the report for a real module file, every executable kind, and bad files."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyree.compiler.module_writer import SCHEMA_VERSION
from pyree.runtime._fb import (
    BindingLayoutT,
    CudaExecutableT,
    DataRefT,
    ExecutableT,
    GpuExportT,
    RocmExecutableT,
    SpirvExecutableT,
)
from pyree.runtime.tools.dump_module import format_executable
from tool_process import assert_clean_error, run_tool
from tooling import require_tool


def test_report_of_a_module(tools_module):
    proc = run_tool("dump_module", tools_module)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "module: tools_test" in out
    assert "producer: tests/tools/conftest.py" in out
    assert "schema version: {}.{}".format(*SCHEMA_VERSION) in out
    assert "functions (2):" in out
    assert "@add(37x53xf32, 37x53xf32) -> (37x53xf32)" in out
    assert "@twice(37x53xf32) -> (37x53xf32, 37x53xf32)" in out
    assert out.count("commands: 1 dispatch") == 1 and "commands: 2 dispatch" in out
    assert "transient: 0 B" in out
    assert "[0] add_dispatch: cpu" in out
    assert "target: elf-x86_64, cpu generic, features: none" in out
    assert (
        "export 0 add_f32: workgroups 8; bindings [read >= 7844 B, read >= 7844 B, write >= 7844 B]"
        in out
    )
    assert "constants: 1, 7844 B (7.7 KiB)" in out
    assert f"file size: {os.path.getsize(tools_module)} B" in out


def test_check_commands_and_transients_are_counted(checks_module):
    out = run_tool("dump_module", checks_module).stdout
    assert out.count("commands: 1 dispatch, 1 barrier, 1 check") == 2
    assert "transient: 7844 B (7.7 KiB)" in out
    assert "constants: 3, 23532 B (23.0 KiB)" in out


def _gpu_export() -> GpuExportT:
    x = GpuExportT()
    x.name, x.gridSize, x.blockSize, x.sharedMemoryBytes = "matmul_0", [3, 5, 1], [128, 1, 1], 4096
    binding = BindingLayoutT()
    binding.access, binding.minLength = 2, 1000
    x.bindings = [binding]
    return x


def _ref(length: int) -> DataRefT:
    ref = DataRefT()
    ref.offset, ref.length = 0, length
    return ref


def test_gpu_executables_show_targets_payloads_and_launch_shapes():
    cuda = CudaExecutableT()
    cuda.targetArch, cuda.ptx, cuda.cubinArch, cuda.cubin = (
        "sm_90",
        _ref(5000),
        "sm_90",
        _ref(3 << 20),
    )
    cuda.exports = [_gpu_export()]
    e = ExecutableT()
    e.name, e.format, e.cuda = "k", 1, cuda
    lines = format_executable(2, e)
    assert lines[0] == "  [2] k: cuda"
    assert "target: sm_90" in lines[1]
    assert lines[2] == "    ptx: 5000 B (4.9 KiB); cubin: 3145728 B (3.0 MiB) (sm_90)"
    assert (
        lines[3]
        == "    export 0 matmul_0: grid 3x5x1, block 128x1x1, shared 4096 B; "
        "bindings [read_write >= 1000 B]"
    )

    cuda.cubin = _ref(0)
    assert "cubin: none" in format_executable(0, e)[2]

    rocm = RocmExecutableT()
    rocm.targetArch, rocm.codeObject, rocm.exports = "gfx942", _ref(900), [_gpu_export()]
    e = ExecutableT()
    e.format, e.rocm = 2, rocm
    assert format_executable(0, e)[1:3] == ["    target: gfx942", "    code object: 900 B"]

    spirv = SpirvExecutableT()
    spirv.target, spirv.code, spirv.exports = "vulkan-unknown-unknown", _ref(2048), [_gpu_export()]
    e = ExecutableT()
    e.format, e.spirv = 3, spirv
    lines = format_executable(0, e)
    assert lines[1:3] == ["    target: vulkan-unknown-unknown", "    spir-v: 2048 B (2.0 KiB)"]
    assert "grid 3x5x1, block 128x1x1" in lines[3]


def test_missing_file(tmp_path):
    assert_clean_error(run_tool("dump_module", str(tmp_path / "nope.vmfb")), 1, "nope.vmfb")


def test_damaged_file(tools_module, tmp_path):
    data = bytearray(Path(tools_module).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / "damaged.vmfb").write_bytes(bytes(data))
    assert_clean_error(run_tool("dump_module", str(tmp_path / "damaged.vmfb")), 1, "damaged")


def test_not_a_module(tmp_path):
    (tmp_path / "text.vmfb").write_text("hello " * 50)
    assert_clean_error(
        run_tool("dump_module", str(tmp_path / "text.vmfb")), 1, "not a pyree module"
    )


def test_usage_errors():
    assert_clean_error(run_tool("dump_module"), 2, "the following arguments are required: module")
    assert_clean_error(
        run_tool("dump_module", "a.vmfb", "--bogus"), 2, "unrecognized arguments: --bogus"
    )


SCHEMAS = Path(__file__).parents[2] / "schemas"


def _flatc_json(flatbuffer: bytes, folder: Path) -> dict:
    """flatc's own JSON of a module FlatBuffer, every scalar printed (--defaults-json)."""
    (folder / "root.bin").write_bytes(flatbuffer)
    subprocess.run([require_tool("flatc"), "-t", "--strict-json", "--defaults-json",
                    "--raw-binary", "-I", str(SCHEMAS), "-o", str(folder),
                    str(SCHEMAS / "module.fbs"), "--", str(folder / "root.bin")], check=True)
    return json.loads((folder / "root.json").read_text())


@pytest.fixture(scope="module")
def gpu_control_flow_module(tmp_path_factory) -> str:
    """Branches, checks of device results, and cuda and SPIR-V executables beside llvm-cpu's:
    every table and enum of the schema but ROCm's."""
    from control_flow_cases import MLIR
    from pyree.compiler import compile_str

    path = tmp_path_factory.mktemp("cf") / "control_flow.vmfb"
    path.write_bytes(compile_str(MLIR, target_backends=["llvm-cpu", "cuda", "vulkan-spirv"]))
    return str(path)


@pytest.mark.parametrize("which", ["tools_module", "checks_module", "gpu_control_flow_module"])
def test_flatbuffer_json_is_what_flatc_prints(which, request, tmp_path):
    """--output=flatbuffer-json against flatc reading --output=flatbuffer-binary with the schema;
    the binary is the file's FlatBuffer, byte for byte."""
    module = request.getfixturevalue(which)
    binary = _stdout_bytes("--output=flatbuffer-binary", module)
    data = Path(module).read_bytes()
    assert data.startswith(binary) and binary[4:8] == b"PYRE" and len(binary) < len(data)
    ours = run_tool("dump_module", "--output=flatbuffer-json", module)
    assert ours.returncode == 0, ours.stderr
    assert json.loads(ours.stdout) == _flatc_json(binary, tmp_path)


def test_output_all_is_the_metadata_report_and_disassembly_is_refused(tools_module):
    default = run_tool("dump_module", tools_module)
    for mode in ("all", "metadata"):
        assert run_tool("dump_module", f"--output={mode}", tools_module).stdout == default.stdout
    assert_clean_error(run_tool("dump_module", "--output=disassembly", tools_module), 2,
                       "--output=disassembly is not supported: a pyree module has no VM bytecode")
    assert_clean_error(run_tool("dump_module", "--output=c", tools_module), 2,
                       "argument --output: invalid choice: 'c'")


def _stdout_bytes(*args: str) -> bytes:
    """The tool's stdout as bytes (the binary output mode)."""
    proc = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.dump_module", *args],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
