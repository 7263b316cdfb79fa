"""--pyree-trace=FILE on pyree-run-module and pyree-benchmark-module, through the real CLI: the
results and reports are unchanged, FILE is valid Chrome trace-event JSON with one event per
dispatch, and the dispatches by device time are printed on stderr."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from numpy_reference import array_text
from tool_process import assert_clean_error, run_tool
from trace_checks import check_trace, dispatches, dispatches_per_call

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    from pyree.compiler import compile_str

    path = tmp_path_factory.mktemp("trace") / "mlp.vmfb"
    path.write_bytes(compile_str((DATA / "mlp.mlir").read_text(), target_backends=["llvm-cpu"],
                                 source_name="mlp.mlir"))
    return path


@pytest.fixture
def x_input() -> str:
    x = np.random.default_rng().standard_normal((37, 53)).astype(np.float32)
    return f"--input={array_text(x, 'f32')}"


def _summary_rows(stderr: str) -> dict[str, int]:
    """kernel name -> count, from the table on stderr."""
    lines = stderr.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("pyree trace:"))
    assert lines[start + 1].split()[:2] == ["total", "ms"]
    return {line.split()[4]: int(line.split()[1]) for line in lines[start + 2:]}


@pytest.mark.parametrize("device", ["local-task", "local-sync"])
def test_run_module_writes_the_trace_and_prints_the_summary(device, mlp, x_input, tmp_path):
    plain = run_tool("run_module", f"--device={device}", f"--module={mlp}", x_input)
    assert plain.returncode == 0, plain.stderr
    out = tmp_path / "run.json"
    traced = run_tool("run_module", f"--device={device}", f"--module={mlp}", x_input,
                      f"--pyree-trace={out}")
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout  # the same results, printed the same way
    spans = check_trace(str(out))
    events = dispatches(spans)
    assert len(events) == dispatches_per_call(mlp.read_bytes(), "mlp") == 2
    assert all(e["name"].startswith("linalg.matmul @ mlp.mlir:") for e in events)
    rows = _summary_rows(traced.stderr)
    assert rows == {e["args"]["kernel"]: 1 for e in events}
    assert "[linalg.matmul @ mlp.mlir:" in traced.stderr
    host = {s["name"] for s in spans if s["cat"] == "host"}
    assert {"call mlp", "arguments", "submit", "read result"} <= host


def test_benchmark_module_traces_every_timed_call(mlp, x_input, tmp_path):
    out = tmp_path / "bench.json"
    done = run_tool("benchmark_module", "--device=local-task", f"--module={mlp}", x_input,
                    "--benchmark_min_time=7x", "--benchmark_repetitions=2",
                    f"--pyree-trace={out}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("BM_mlp/process_time/real_time ") == 2
    events = dispatches(check_trace(str(out)))
    assert len(events) == 2 * 7 * 2  # the warm-up call is not traced
    assert sorted(_summary_rows(done.stderr).values()) == [14, 14]


def test_the_trace_replaces_an_existing_file_whole(mlp, x_input, tmp_path):
    out = tmp_path / "old.json"
    out.write_text("not a trace")
    os.chmod(out, 0o640)
    done = run_tool("run_module", f"--module={mlp}", x_input, f"--pyree-trace={out}")
    assert done.returncode == 0, done.stderr
    check_trace(json.loads(out.read_text()))
    assert oct(out.stat().st_mode & 0o777) == oct(0o640)
    assert [p.name for p in tmp_path.iterdir()] == ["old.json"]  # no temporary file left


def test_an_unwritable_trace_file_is_one_clear_error(mlp, x_input, tmp_path):
    out = tmp_path / "no_such_folder" / "t.json"
    done = run_tool("run_module", f"--module={mlp}", x_input, f"--pyree-trace={out}")
    assert_clean_error(done, 1, "no_such_folder")
