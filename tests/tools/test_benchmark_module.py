"""pyree-benchmark-module: timing loop, report rows, flags, and the CLI end to end."""

import re
import statistics

import pytest
from pyree.runtime.tools.benchmark_module import (
    MinTime,
    Sample,
    measure,
    parse_min_time,
    report_rows,
)
from pyree.runtime.tools.cli import UsageError
from tool_process import assert_clean_error, run_tool

ROW = re.compile(r"^(\S+)\s+(\d+\.\d{3}) ms\s+(\d+\.\d{3}) ms\s+(\d+) per_call=(\d+\.\d{2})us$")


def test_min_time_spellings():
    assert parse_min_time("0.25") == MinTime(seconds=0.25)
    assert parse_min_time("2s") == MinTime(seconds=2.0)
    assert parse_min_time("100x") == MinTime(iterations=100)
    for bad in ["fast", "-1", "0x", "1.5x", "s"]:
        with pytest.raises(UsageError, match="is not a time"):
            parse_min_time(bad)


def test_measure_runs_a_fixed_count_or_until_the_time_is_up():
    calls = []
    sample = measure(lambda: calls.append(1), MinTime(iterations=37))
    assert sample.iterations == 37 == len(calls)
    timed = measure(lambda: sum(range(1000)), MinTime(seconds=0.02))
    assert timed.iterations >= 1 and timed.iterations * timed.real_s >= 0.02
    assert measure(lambda: None, MinTime(seconds=0)).iterations == 1


def test_rows_and_aggregates():
    samples = [Sample(0.002, 0.0021, 500), Sample(0.003, 0.0030, 400), Sample(0.0025, 0.0024, 450)]
    rows = report_rows("BM_f/process_time/real_time", samples)
    parsed = [ROW.match(r).groups() for r in rows]
    assert [p[0] for p in parsed] == ["BM_f/process_time/real_time"] * 3 + [
        f"BM_f/process_time/real_time_{s}" for s in ("mean", "median", "stddev")
    ]
    assert [p[1] for p in parsed[:3]] == ["2.000", "3.000", "2.500"]
    assert parsed[3][1:4] == ("2.500", "2.500", "3")  # mean real, mean cpu, repetitions
    assert parsed[4][1] == "2.500"
    assert float(parsed[5][1]) == pytest.approx(statistics.stdev([2, 3, 2.5]), abs=1e-3)
    assert parsed[0][4] == "2000.00"  # per call, in microseconds
    assert len(report_rows("BM_f", samples[:1])) == 1


def test_benchmark_cli_with_repetitions(single_module):
    proc = run_tool(
        "benchmark_module",
        f"--module={single_module}",
        "--input=37x53xf32=1.5",
        "--input=37x53xf32=-2",
        "--benchmark_repetitions=3",
        "--benchmark_min_time=20x",
    )
    assert proc.returncode == 0, proc.stderr
    rows = [ROW.match(line) for line in proc.stdout.splitlines() if line.startswith("BM_")]
    assert [r.group(1) for r in rows] == ["BM_add/process_time/real_time"] * 3 + [
        f"BM_add/process_time/real_time_{s}" for s in ("mean", "median", "stddev")
    ]
    assert [r.group(4) for r in rows] == ["20"] * 3 + ["3"] * 3
    assert all(float(r.group(2)) > 0 for r in rows[:3])
    assert "Benchmark" in proc.stdout and "Iterations" in proc.stdout


def test_benchmark_cli_by_time(tools_module):
    proc = run_tool(
        "benchmark_module",
        f"--module={tools_module}",
        "--function",
        "twice",
        "--input",
        "37x53xf32=3",
        "--benchmark_min_time",
        "0.05s",
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = [ROW.match(line) for line in proc.stdout.splitlines() if line.startswith("BM_")]
    assert row.group(1) == "BM_twice/process_time/real_time" and int(row.group(4)) >= 1


def test_benchmark_cli_errors(single_module, tools_module, tmp_path):
    assert_clean_error(
        run_tool("benchmark_module", f"--module={single_module}", "--benchmark_repetitions=0"),
        2,
        "--benchmark_repetitions=0: must be at least 1",
    )
    assert_clean_error(
        run_tool("benchmark_module", f"--module={single_module}", "--benchmark_min_time=soon"),
        2,
        "--benchmark_min_time='soon' is not a time",
    )
    assert_clean_error(
        run_tool("benchmark_module", f"--module={tmp_path / 'no.vmfb'}"), 1, "no.vmfb"
    )
    assert_clean_error(
        run_tool("benchmark_module", f"--module={tools_module}", "--function=nope"),
        2,
        "has no function 'nope'",
    )
    assert_clean_error(
        run_tool(
            "benchmark_module",
            f"--module={single_module}",
            "--input=37x53xi32=1",
            "--input=37x53xf32=1",
        ),
        2,
        "@add expects 37x53xf32 here, got 37x53xi32",
    )


MULTI = """
func.func @first() -> tensor<4xf32> {
  %c = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = arith.addf %c, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @second() -> tensor<4xf32> {
  %c = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = arith.mulf %c, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @scale(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


@pytest.fixture(scope="module")
def multi_module(tmp_path_factory) -> str:
    """Two functions without arguments and one with (compiled by pyree's compiler)."""
    from pyree.compiler import compile_str

    path = tmp_path_factory.mktemp("multi") / "multi.vmfb"
    path.write_bytes(compile_str(MULTI, target_backends=["llvm-cpu"]))
    return str(path)


def _benchmarks(proc) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return [ROW.match(line).group(1) for line in proc.stdout.splitlines() if line.startswith("BM_")]


def test_without_function_every_function_without_arguments_is_benchmarked(multi_module):
    """As iree-benchmark-module: @scale needs inputs, so it is left out."""
    proc = run_tool("benchmark_module", f"--module={multi_module}", "--benchmark_min_time=3x")
    assert _benchmarks(proc) == ["BM_first/process_time/real_time",
                                 "BM_second/process_time/real_time"]


@pytest.mark.parametrize("pattern, kept", [
    ("second", ["second"]),
    ("^BM_f.*real_time$", ["first"]),
    ("-second", ["first"]),
    ("process_time", ["first", "second"]),
])
def test_benchmark_filter(multi_module, pattern, kept):
    proc = run_tool("benchmark_module", f"--module={multi_module}", "--benchmark_min_time=3x",
                    f"--benchmark_filter={pattern}")
    assert _benchmarks(proc) == [f"BM_{name}/process_time/real_time" for name in kept]


def test_filter_applies_to_the_named_function_and_the_json_report(multi_module):
    import json

    proc = run_tool("benchmark_module", f"--module={multi_module}", "--function=scale",
                    "--input=4xf32=1 2 3 4", "--benchmark_min_time=3x",
                    "--benchmark_filter=scale", "--benchmark_format=json",
                    "--benchmark_repetitions=2")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert {b["run_name"] for b in report["benchmarks"]} == {"BM_scale/process_time/real_time"}
    both = json.loads(run_tool("benchmark_module", f"--module={multi_module}",
                               "--benchmark_min_time=3x", "--benchmark_format=json").stdout)
    assert [(b["name"], b["family_index"]) for b in both["benchmarks"]] == [
        ("BM_first/process_time/real_time", 0), ("BM_second/process_time/real_time", 1)]


def test_filter_and_function_choice_errors(multi_module, tools_module):
    assert_clean_error(
        run_tool("benchmark_module", f"--module={multi_module}", "--benchmark_filter=third"), 2,
        "--benchmark_filter='third' matches none of the benchmarks: "
        "BM_first/process_time/real_time, BM_second/process_time/real_time")
    assert_clean_error(
        run_tool("benchmark_module", f"--module={multi_module}", "--benchmark_filter=(first"),
        2, "--benchmark_filter='(first' is not a regular expression")
    assert_clean_error(
        run_tool("benchmark_module", f"--module={multi_module}", "--input=4xf32=1"), 2,
        "exports 3 functions (@first, @second, @scale); choose one with --function")
    assert_clean_error(
        run_tool("benchmark_module", f"--module={tools_module}"), 2,
        "exports 2 functions (@add, @twice), none without arguments; choose one with --function")
