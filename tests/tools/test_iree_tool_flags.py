"""IREE's run/benchmark flags beyond the basics, through the real CLIs: --expected_output and its
thresholds, --flagfile, the pre-2023 spellings (--module_file, --entry_function,
--function_input), --print_statistics, --benchmark_format=json and --benchmark_out."""

import json

import numpy as np
from numpy_reference import element_text
from pyree.runtime.tools.io_format import format_array
from tool_process import assert_clean_error, run_tool

SHAPE = (37, 53)
SUCCESS = "[SUCCESS] all function outputs matched their expected values."
rng = np.random.default_rng()


def _random() -> np.ndarray:
    return rng.standard_normal(SHAPE).astype(np.float32)


def _text(a: np.ndarray) -> str:
    return format_array(a, 10**6)


def _run(module: str, *flags: str):
    return run_tool("run_module", f"--module={module}", "--device=local-sync", *flags)


def test_expected_output_that_matches(tools_module, tmp_path):
    a, b = _random(), _random()
    np.save(tmp_path / "sum.npy", a + b)
    proc = _run(tools_module, "--function=add", f"--input={_text(a)}", f"--input={_text(b)}",
                f"--expected_output=@{tmp_path / 'sum.npy'}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"EXEC @add\n{SUCCESS}\n"


def test_expected_output_mismatch_reports_the_element_and_exits_1(tools_module):
    a = _random()
    wrong = (a + a).astype(np.float32)
    wrong[3, 7] += np.float32(0.5)
    proc = _run(tools_module, "--function=twice", f"--input={_text(a)}",
                f"--expected_output={_text(wrong)}", "--expected_output=(ignore)")
    assert proc.returncode == 1, proc.stderr
    index = 3 * SHAPE[1] + 7
    assert f"[FAILED] result[0]: element at index {index} " in proc.stdout
    assert f"does not match the expected ({element_text(wrong[3, 7])})" in proc.stdout
    assert "view of 37x53xf32" in proc.stdout and SUCCESS not in proc.stdout
    assert "result[1]" not in proc.stdout  # (ignore)d


def test_thresholds_are_absolute_and_per_type(tools_module):
    a, b = _random(), _random()
    off = (a + b + np.float32(0.004)).astype(np.float32)
    flags = ["--function=add", f"--input={_text(a)}", f"--input={_text(b)}",
             f"--expected_output={_text(off)}"]
    assert _run(tools_module, *flags).returncode == 1  # default f32 threshold 0.0001
    assert _run(tools_module, *flags, "--expected_f32_threshold=0.01").returncode == 0
    assert _run(tools_module, *flags, "--expected_f32_threshold=0.01f").returncode == 0
    assert _run(tools_module, *flags, "--expected_f64_threshold=1").returncode == 1


def test_nan_matches_nan_and_infinities_their_own_sign(tools_module):
    a, b = _random(), _random()
    a[0, :3] = [np.nan, np.inf, -np.inf]
    b[0, :3] = [1.0, 1.0, 1.0]
    want = (a + b).astype(np.float32)
    proc = _run(tools_module, "--function=add", f"--input={_text(a)}", f"--input={_text(b)}",
                f"--expected_output={_text(want)}")
    assert proc.returncode == 0 and SUCCESS in proc.stdout, proc.stdout
    flipped = want.copy()
    flipped[0, 1] = -np.inf
    proc = _run(tools_module, "--function=add", f"--input={_text(a)}", f"--input={_text(b)}",
                f"--expected_output={_text(flipped)}")
    assert proc.returncode == 1 and "element at index 1 (inf)" in proc.stdout
    finite = want.copy()
    finite[0, 0] = 0.0
    proc = _run(tools_module, "--function=add", f"--input={_text(a)}", f"--input={_text(b)}",
                f"--expected_output={_text(finite)}")
    assert proc.returncode == 1 and "element at index 0 (nan)" in proc.stdout


def test_expected_output_errors(tools_module):
    a = _random()
    assert_clean_error(_run(tools_module, "--function=twice", f"--input={_text(a)}",
                            f"--expected_output={_text(a)}"),
                       2, "1 --expected_output flags given, but the function returns 2 results")
    assert_clean_error(_run(tools_module, "--function=add", f"--input={_text(a)}",
                            f"--input={_text(a)}", "--expected_output=4xf32=1 2 3 4",
                            "--output=@x.npy"), 2, "cannot be combined")
    assert_clean_error(_run(tools_module, "--function=add", f"--input={_text(a)}",
                            f"--input={_text(a)}", "--expected_output=4xq8=1"),
                       2, "--expected_output 1: unknown element type 'q8'")
    proc = _run(tools_module, "--function=add", f"--input={_text(a)}", f"--input={_text(a)}",
                "--expected_output=4xf32=1 2 3 4")
    assert proc.returncode == 1 and "the result is 37x53xf32, not 4xf32" in proc.stdout
    assert_clean_error(_run(tools_module, "--function=add", "--expected_f32_threshold=-1"),
                       2, "'-1' is not a threshold")


def test_flagfile_and_old_spellings(tools_module, tmp_path):
    a, b = _random(), _random()
    (tmp_path / "flags.txt").write_text(
        f"# iree-run-module flags, one per line\n--module_file={tools_module}\n\n"
        f"--entry_function=add\n--function_input={_text(a)}\n")
    (tmp_path / "more.txt").write_text(f"--flagfile={tmp_path / 'flags.txt'}\n"
                                       f"--function_input={_text(b)}\n")
    proc = run_tool("run_module", "--flagfile", str(tmp_path / "more.txt"),
                    "--output_max_element_count=100000", "--output=-")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["EXEC @add", "result[0]: hal.buffer_view"]
    printed = np.array(lines[2].partition("=")[2].replace("[", " ").replace("]", " ").split(),
                       np.float32).reshape(SHAPE)
    np.testing.assert_allclose(printed, a.astype(np.float64) + b, rtol=1e-6)
    assert_clean_error(run_tool("run_module", f"--flagfile={tmp_path / 'none.txt'}"),
                       2, "none.txt: cannot read it")


def _statistics(stderr: str) -> dict[str, list[int]]:
    """IREE's --print_statistics block: heap -> [peak, allocated, freed, live] bytes."""
    lines = stderr.splitlines()
    start = lines.index("[[ iree_hal_allocator_t memory statistics ]]")
    heaps = {}
    for line in lines[start + 1:start + 3]:
        heap, _, counts = line.partition(":")
        heaps[heap.strip()] = [int(part.split("B")[0]) for part in counts.split("/")]
    return heaps


def test_print_statistics_reports_the_memory_the_run_allocated(tools_module):
    a = _random()
    flags = ["--function=add", f"--input={_text(a)}", f"--input={_text(a)}"]
    quiet = _run(tools_module, *flags, "--print_statistics=false")
    assert quiet.returncode == 0 and "statistics" not in quiet.stderr
    proc = _run(tools_module, *flags, "--print_statistics")
    assert proc.returncode == 0, proc.stderr
    heaps = _statistics(proc.stderr)
    assert set(heaps) == {"HOST_LOCAL", "DEVICE_LOCAL"}
    for peak, allocated, freed, live in heaps.values():
        assert live == allocated - freed and freed <= allocated and peak <= allocated
    # the result (37x53 f32) at least, in whichever heap the driver gave it
    assert sum(h[1] for h in heaps.values()) >= a.nbytes
    bench = run_tool("benchmark_module", f"--module={tools_module}", "--device=local-sync",
                     *flags, "--benchmark_repetitions=1", "--benchmark_min_time=1x",
                     "--print_statistics=true")
    assert bench.returncode == 0, bench.stderr
    assert sum(h[1] for h in _statistics(bench.stderr).values()) >= a.nbytes
    assert_clean_error(_run(tools_module, *flags, "--print_statistics=maybe"), 2,
                       "--print_statistics='maybe': expected true or false")


def _check_google_benchmark_json(report: dict, name: str, repetitions: int) -> None:
    assert {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu", "load_avg"} \
        <= set(report["context"])
    runs = [b for b in report["benchmarks"] if b["run_type"] == "iteration"]
    aggregates = [b for b in report["benchmarks"] if b["run_type"] == "aggregate"]
    assert [r["repetition_index"] for r in runs] == list(range(repetitions))
    assert [a["aggregate_name"] for a in aggregates] == (
        ["mean", "median", "stddev"] if repetitions > 1 else [])
    for entry in report["benchmarks"]:
        assert entry["name"].startswith(name) and entry["time_unit"] == "ms"
        assert entry["iterations"] >= 1 and entry["repetitions"] == repetitions
        assert entry["real_time"] >= 0 and entry["cpu_time"] >= 0
    for run in runs:
        assert run["iterations"] == 3 and run["real_time"] > 0
    mean = next(a for a in aggregates if a["aggregate_name"] == "mean") if aggregates else None
    if mean:
        assert abs(mean["real_time"] - np.mean([r["real_time"] for r in runs])) < 1e-9


def test_benchmark_format_json_and_benchmark_out(single_module, tmp_path):
    a = _random()
    proc = run_tool("benchmark_module", f"--module={single_module}", "--device=local-sync",
                    f"--input={_text(a)}", f"--input={_text(a)}", "--benchmark_format=json",
                    "--benchmark_repetitions=3", "--benchmark_min_time=3x",
                    f"--benchmark_out={tmp_path / 'out.txt'}", "--benchmark_out_format=console")
    assert proc.returncode == 0, proc.stderr
    _check_google_benchmark_json(json.loads(proc.stdout), "BM_add/process_time/real_time", 3)
    console = (tmp_path / "out.txt").read_text()
    assert "BM_add/process_time/real_time_stddev" in console and "Iterations" in console

    proc = run_tool("benchmark_module", f"--module={single_module}", "--device=local-sync",
                    f"--input={_text(a)}", f"--input={_text(a)}", "--benchmark_min_time=3x",
                    f"--benchmark_out={tmp_path / 'out.json'}")
    assert proc.returncode == 0 and "Iterations" in proc.stdout, proc.stderr
    _check_google_benchmark_json(json.loads((tmp_path / "out.json").read_text()),
                                 "BM_add/process_time/real_time", 1)
    assert_clean_error(run_tool("benchmark_module", "--benchmark_format=csv"), 2,
                       "--benchmark_format: invalid choice: 'csv'")


def test_raw_binary_inputs_outputs_and_expected_values(tools_module, tmp_path):
    """IREE's `<type>=@file.bin` (raw elements) for inputs and expected values, `@file.bin` and
    `+file.bin` outputs."""
    a, b = _random(), _random()
    a.tofile(tmp_path / "a.bin")
    b.tofile(tmp_path / "b.bin")
    (a + b).tofile(tmp_path / "sum.bin")
    typed = "37x53xf32=@"
    proc = _run(tools_module, "--function=add", f"--input={typed}{tmp_path / 'a.bin'}",
                f"--input={typed}{tmp_path / 'b.bin'}",
                f"--expected_output={typed}{tmp_path / 'sum.bin'}")
    assert proc.returncode == 0 and SUCCESS in proc.stdout, proc.stderr
    proc = _run(tools_module, "--function=twice", f"--input={typed}{tmp_path / 'a.bin'}",
                f"--output=@{tmp_path / 'y.bin'}", f"--output=+{tmp_path / 'y.bin'}")
    assert proc.returncode == 0, proc.stderr
    both = np.fromfile(tmp_path / "y.bin", np.float32).reshape(2, *SHAPE)
    np.testing.assert_array_equal(both[0], (a.astype(np.float64) * 2).astype(np.float32))
    np.testing.assert_array_equal(both[1], a)
    assert_clean_error(_run(tools_module, "--function=add", f"--input=4xf32=@{tmp_path / 'a.bin'}",
                            f"--input={_text(a)}"),
                       2, f"a.bin holds {a.size} f32 elements, 4xf32 needs 4")
