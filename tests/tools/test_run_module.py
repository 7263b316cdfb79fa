"""pyree-run-module end to end: text and .npy inputs, printed and saved results, each error path."""

from pathlib import Path

import numpy as np
from pyree.runtime.tools.io_format import format_array, parse_value
from tool_process import assert_clean_error, install_broken_driver, run_tool

SHAPE = (37, 53)
rng = np.random.default_rng()


def _random() -> np.ndarray:
    return rng.standard_normal(SHAPE).astype(np.float32)


def _printed_results(stdout: str) -> list[np.ndarray]:
    lines = stdout.splitlines()
    assert lines[0].startswith("EXEC @")
    assert all(line == f"result[{i}]: hal.buffer_view" for i, line in enumerate(lines[1::2]))
    return [parse_value(line) for line in lines[2::2]]


def test_add_with_text_inputs_prints_the_sum(tools_module):
    a, b = _random(), _random()
    proc = run_tool(
        "run_module",
        f"--module={tools_module}",
        "--function=add",
        "--device=local-task",
        f"--input={format_array(a, 10**6)}",
        f"--input={format_array(b, 10**6)}",
        "--print_max_element_count=100000",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("EXEC @add\nresult[0]: hal.buffer_view\n37x53xf32=[")
    (result,) = _printed_results(proc.stdout)
    np.testing.assert_allclose(result, a.astype(np.float64) + b, rtol=1e-6)


def test_npy_in_and_out_with_space_separated_flags(single_module, tmp_path):
    a, b = _random(), _random()
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    proc = run_tool(
        "run_module",
        "--module",
        single_module,
        "--device",
        "local-sync",
        "--input",
        f"@{tmp_path / 'a.npy'}",
        "--input",
        f"@{tmp_path / 'b.npy'}",
        "--output",
        f"@{tmp_path / 'y.npy'}",
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout == "EXEC @add\n"
    )  # the only function is the default; its result went to y.npy
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), a.astype(np.float64) + b, rtol=1e-6)


def test_two_results_appended_to_one_file(tools_module, tmp_path):
    a = _random()
    out = tmp_path / "both.npy"
    proc = run_tool(
        "run_module",
        f"--module={tools_module}",
        "--function=twice",
        f"--input={format_array(a, 10**6)}",
        f"--output=@{out}",
        f"--output=+{out}",
    )
    assert proc.returncode == 0, proc.stderr
    with open(out, "rb") as f:
        np.testing.assert_allclose(np.load(f), a.astype(np.float64) * 2, rtol=1e-6)
        np.testing.assert_array_equal(np.load(f), a)


def test_output_specs_drop_print_and_default(tools_module):
    a = _random()
    text = format_array(a, 10**6)
    dropped = run_tool(
        "run_module",
        f"--module={tools_module}",
        "--function=twice",
        f"--input={text}",
        "--output=",
        "--print_max_element_count=100000",
    )
    assert dropped.returncode == 0, dropped.stderr
    # the first result is dropped; the second, with no --output of its own, is printed
    assert dropped.stdout.splitlines()[1] == "result[1]: hal.buffer_view"
    np.testing.assert_array_equal(parse_value(dropped.stdout.splitlines()[2]), a)

    printed = run_tool(
        "run_module",
        f"--module={tools_module}",
        "--function=twice",
        f"--input={text}",
        "--output=-",
        "--output=",
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.count("hal.buffer_view") == 1 and "result[0]" in printed.stdout


def test_large_results_are_elided(tools_module):
    proc = run_tool(
        "run_module",
        f"--module={tools_module}",
        "--function=add",
        "--input=37x53xf32=1.5",
        "--input=37x53xf32=0.25",
    )
    assert proc.returncode == 0, proc.stderr
    value = proc.stdout.splitlines()[2]
    assert value.startswith("37x53xf32=[1.75 1.75 ") and "...]" in value
    assert value.count("1.75") == 1024  # --print_max_element_count defaults to 1024

    short = run_tool(
        "run_module",
        f"--module={tools_module}",
        "--function=add",
        "--input=37x53xf32=1",
        "--input=37x53xf32=2",
        "--print_max_element_count=3",
    )
    assert short.stdout.splitlines()[2] == "37x53xf32=[3 3 3...]" + "[...]" * 36


def test_a_long_output_reaches_the_pipe_whole(tmp_path):
    """The tools end with os._exit once stdout is flushed (cli.tool_main): nothing may be lost,
    here ~400 kB of printed elements through a pipe (64 kB of pipe buffer)."""
    from pyree.compiler import CompileOptions, compile_str
    t = "tensor<301x257xf32>"
    mlir = (f"func.func @add(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %0 = arith.addf %a, %b : {t}\n  return %0 : {t}\n}}\n")
    module = tmp_path / "add.vmfb"
    module.write_bytes(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])))
    proc = run_tool("run_module", f"--module={module}", "--device=local-task",
                    "--input=301x257xf32=1.5", "--input=301x257xf32=0.25",
                    "--print_max_element_count=100000")
    assert proc.returncode == 0, proc.stderr
    value = proc.stdout.splitlines()[2]
    assert value.count("1.75") == 301 * 257 and value.endswith("1.75]")


def test_an_unsigned_spelling_for_a_signless_integer_argument(tmp_path):
    """MLIR's integers are signless: 3xui64 (text or a uint64 .npy) stands for an i64 argument,
    its bits kept, as the Python API and IREE's tools take it; another width or a float does
    not."""
    from pyree.compiler import CompileOptions, compile_str
    t = "tensor<3xi64>"
    mlir = (f"func.func @add(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %0 = arith.addi %a, %b : {t}\n  return %0 : {t}\n}}\n")
    module = tmp_path / "add.vmfb"
    module.write_bytes(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])))
    a = np.array([7, 2**63 + 5, 2**64 - 1], np.uint64)
    np.save(tmp_path / "a.npy", a)
    b = rng.integers(-1000, 1000, 3)
    want = f"3xi64={' '.join(str(v) for v in a.view(np.int64) + b)}"
    for given in (f"3xui64={','.join(str(v) for v in a)}", f"@{tmp_path / 'a.npy'}"):
        proc = run_tool("run_module", f"--module={module}", f"--input={given}",
                        f"--input=3xi64={','.join(str(v) for v in b)}")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[2] == want
    for other in ("3xui32=1,2,3", "3xf64=1,2,3"):
        assert_clean_error(run_tool("run_module", f"--module={module}", f"--input={other}",
                                    "--input=3xi64=1,2,3"),
                           2, f"--input 1 '{other}': @add expects 3xi64 here, got "
                           f"{other.split('=')[0]}")


def test_list_drivers_and_devices():
    drivers = run_tool("run_module", "--list_drivers")
    assert drivers.returncode == 0, drivers.stderr
    assert "local-task: available" in drivers.stdout and "local-sync: available" in drivers.stdout
    devices = run_tool("run_module", "--list_devices")
    assert devices.returncode == 0, devices.stderr
    assert "local-task" in devices.stdout and "local-sync" in devices.stdout


def test_help():
    proc = run_tool("run_module", "--help")
    assert proc.returncode == 0
    for flag in [
        "--device",
        "--module",
        "--function",
        "--input",
        "--output",
        "--print_max_element_count",
        "--list_drivers",
        "--list_devices",
    ]:
        assert flag in proc.stdout


def test_missing_module_file(tmp_path):
    proc = run_tool("run_module", f"--module={tmp_path / 'absent.vmfb'}")
    assert_clean_error(proc, 1, "absent.vmfb")


def test_damaged_module(single_module, tmp_path):
    data = bytearray(Path(single_module).read_bytes())
    data[100] ^= 0x40
    (tmp_path / "bad.vmfb").write_bytes(bytes(data))
    assert_clean_error(run_tool("run_module", f"--module={tmp_path / 'bad.vmfb'}"), 1, "damaged")


def test_no_module_given():
    assert_clean_error(run_tool("run_module", "--function=add"), 2, "pass --module=file.vmfb")


def test_function_must_be_chosen_among_several(tools_module):
    assert_clean_error(
        run_tool("run_module", f"--module={tools_module}"),
        2,
        "exports 2 functions (@add, @twice); choose one with --function",
    )


def test_unknown_function(tools_module):
    assert_clean_error(
        run_tool("run_module", f"--module={tools_module}", "--function=mul"),
        2,
        "has no function 'mul'; it exports @add, @twice",
    )


def test_wrong_input_count(single_module):
    proc = run_tool("run_module", f"--module={single_module}", "--input=37x53xf32=1")
    assert_clean_error(proc, 2, "@add(37x53xf32, 37x53xf32) takes 2 inputs, 1 given")


def test_wrong_input_shape(single_module):
    proc = run_tool(
        "run_module", f"--module={single_module}", "--input=37x53xf32=1", "--input=53x37xf32=1"
    )
    assert_clean_error(
        proc, 2, "--input 2 '53x37xf32=1': @add expects 37x53xf32 here, got 53x37xf32"
    )


def test_wrong_input_dtype(single_module):
    proc = run_tool(
        "run_module", f"--module={single_module}", "--input=37x53xf64=1", "--input=37x53xf32=1"
    )
    assert_clean_error(
        proc, 2, "--input 1 '37x53xf64=1': @add expects 37x53xf32 here, got 37x53xf64"
    )


def test_bad_input_string(single_module):
    proc = run_tool(
        "run_module", f"--module={single_module}", "--input=37x53xf32=1", "--input=4xf32=[1 2 3]"
    )
    assert_clean_error(proc, 2, "--input 2 '4xf32=[1 2 3]': 4 elements expected, 3 given")


def test_missing_input_file(single_module, tmp_path):
    proc = run_tool(
        "run_module",
        f"--module={single_module}",
        "--input=37x53xf32=1",
        f"--input=@{tmp_path / 'gone.npy'}",
    )
    assert_clean_error(proc, 2, "gone.npy: No such file or directory")


def test_too_many_outputs(single_module):
    proc = run_tool(
        "run_module",
        f"--module={single_module}",
        "--input=37x53xf32=1",
        "--input=37x53xf32=2",
        "--output=-",
        "--output=-",
    )
    assert_clean_error(proc, 2, "2 --output flags given, but @add returns 1 results")


def test_bad_output_spec(single_module):
    proc = run_tool("run_module", f"--module={single_module}", "--output=y.npy")
    assert_clean_error(proc, 2, "'y.npy' is not an output spec")


def test_unknown_device(single_module):
    proc = run_tool(
        "run_module",
        f"--module={single_module}",
        "--device=nosuchdriver",
        "--input=37x53xf32=1",
        "--input=37x53xf32=2",
    )
    assert_clean_error(proc, 1, "nosuchdriver")


def test_unknown_flag():
    assert_clean_error(run_tool("run_module", "--bogus=1"), 2, "unrecognized arguments: --bogus=1")
    assert_clean_error(
        run_tool("run_module", "--print_max_element_count=many"),
        2,
        "--print_max_element_count: invalid int value: 'many'",
    )


def test_unavailable_driver(single_module, tmp_path):
    path = install_broken_driver(tmp_path)
    listing = run_tool("run_module", "--list_drivers", python_path=path)
    assert listing.returncode == 0, listing.stderr
    assert "broken: unavailable: ModuleNotFoundError" in listing.stdout
    proc = run_tool(
        "run_module",
        f"--module={single_module}",
        "--device=broken",
        "--input=37x53xf32=1",
        "--input=37x53xf32=2",
        python_path=path,
    )
    assert_clean_error(proc, 1, "driver 'broken' is unavailable")


def test_an_output_file_is_replaced_whole_under_its_reader(single_module, tmp_path):
    """--output=@y.npy writes a new file and renames it over the old one (runtime/output_file.py):
    a reader of the old file keeps it, the permissions stay, and a failed run changes nothing."""
    a, b = _random(), _random()
    out = tmp_path / "y.npy"
    old = np.arange(5.0)
    np.save(out, old)
    out.chmod(0o604)
    args = [f"--module={single_module}", f"--input={format_array(a, 10**6)}",
            f"--input={format_array(b, 10**6)}"]
    with open(out, "rb") as reader:
        proc = run_tool("run_module", *args, f"--output=@{out}")
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_array_equal(np.load(reader), old)
    np.testing.assert_allclose(np.load(out), a.astype(np.float64) + b, rtol=1e-6)
    assert out.stat().st_mode & 0o777 == 0o604
    missing = tmp_path / "no" / "y.npy"
    proc = run_tool("run_module", *args, f"--output=@{missing}")
    assert_clean_error(proc, 1, f"{missing}: cannot create a file in {missing.parent}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.npy"]


def test_a_bf16_result_saved_as_npy_reads_back_as_input_and_golden(tmp_path):
    """numpy has no bfloat16: a bf16 result saved with --output=@x.npy is a 2-byte void array
    (as ml_dtypes' arrays save too), which --input and --expected_output had refused."""
    from pyree.compiler import compile_str

    module = tmp_path / "id.vmfb"
    module.write_bytes(compile_str("func.func @id(%x: tensor<4xbf16>) -> tensor<4xbf16> {\n"
                                   "  return %x : tensor<4xbf16>\n}\n"))
    saved = tmp_path / "y.npy"
    values = "4xbf16=1.5 -2 inf -0"
    proc = run_tool("run_module", f"--module={module}", f"--input={values}", f"--output=@{saved}")
    assert proc.returncode == 0, proc.stderr
    assert np.load(saved).dtype == np.dtype("V2")
    again = run_tool("run_module", f"--module={module}", f"--input=@{saved}")
    assert again.returncode == 0 and again.stdout.endswith(f"{values}\n"), again.stderr
    golden = run_tool("run_module", f"--module={module}", f"--input={values}",
                      f"--expected_output=@{saved}")
    assert golden.returncode == 0 and "[SUCCESS]" in golden.stdout, golden.stderr
