"""pyree.runtime.trace on the CPU drivers: valid Chrome trace-event JSON, one event per dispatch
named by its source ops with file:line, host stages, a summary that adds up; drivers without
command timing (hal.h before revision 4) and modules without kernel infos (schema < 1.4) still
trace; and a call with no trace active never reaches the trace code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.drivers.local_sync.device import LocalSyncDevice
from pyree.runtime.hal import python_driver, registry
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.vm import trace as trace_module
from pyree.runtime.vm.function import Function
from trace_checks import check_summary, check_trace, device_lanes, dispatches, dispatches_per_call

from .fake_drivers import install
from .module_factory import COLS, ROWS, SCALE, arith_builder

DATA = Path(__file__).resolve().parents[1] / "data"
DEVICES = ["local-task", "local-sync"]


@pytest.fixture(scope="module")
def mlp_bytes() -> bytes:
    from pyree.compiler import compile_str

    return compile_str((DATA / "mlp.mlir").read_text(), target_backends=["llvm-cpu"],
                       source_name=str(DATA / "mlp.mlir"))


def _line_of(text: str, pattern: str, nth: int = 0) -> int:
    """The 1-based line of the ``nth`` line of mlp.mlir that matches ``pattern``."""
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if re.search(pattern, line)]
    return lines[nth]


def _x(rng) -> np.ndarray:
    return rng.standard_normal((37, 53)).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_each_dispatch_of_each_call_is_one_event_named_by_its_source_ops(device, mlp_bytes, rng,
                                                                         tmp_path):
    module = rt.load_module(mlp_bytes, device=device)
    xs = [_x(rng) for _ in range(3)]
    untraced = [module.mlp(x).to_host() for x in xs]
    path = tmp_path / "mlp.json"
    with rt.trace(str(path)) as t:
        traced = [module.mlp(x).to_host() for x in xs]
    for a, b in zip(traced, untraced):
        np.testing.assert_array_equal(a, b)  # the traced path runs the same kernels
    spans = check_trace(str(path))
    events = dispatches(spans)
    per_call = dispatches_per_call(mlp_bytes, "mlp")
    assert per_call == 2 and len(events) == 3 * per_call
    text = (DATA / "mlp.mlir").read_text()
    first, second = (_line_of(text, r"linalg\.matmul", n) for n in (0, 1))
    add = _line_of(text, r"arith\.addf")
    relu = _line_of(text, r"arith\.maximumf")
    names = {e["args"]["kernel"]: e for e in events}
    assert len(names) == 2
    layer1 = next(e for e in events if f"mlp.mlir:{first}" in e["name"])
    assert layer1["args"]["sources"] == [f"linalg.matmul @ {DATA / 'mlp.mlir'}:{first}",
                                         f"arith.addf @ {DATA / 'mlp.mlir'}:{add}",
                                         f"arith.maximumf @ {DATA / 'mlp.mlir'}:{relu}"]
    assert layer1["name"] == "; ".join(layer1["args"]["sources"])
    assert any(f"mlp.mlir:{second}" in e["name"] for e in events)
    assert all(e["args"]["kernel"].startswith("mlp_dispatch_") for e in events)
    # lanes: the host's calls and stages, and one queue of this device
    processes = {e["pid"]: e["args"]["name"] for e in json.loads(path.read_text())["traceEvents"]
                 if e["name"] == "process_name"}
    assert {processes[pid] for pid in device_lanes(spans)} == {f"device {module.device.uri}"}
    host = [s["name"] for s in spans if processes[s["pid"]] == "host"]
    for stage in ("call mlp", "arguments", "submit", "read result"):
        assert host.count(stage) == 3, (stage, host)
    check_summary(t.summary(), spans)
    # each call's dispatches run after it starts and before the next one (its result was read
    # first): host and device times are on one clock
    starts = [s["ts"] for s in spans if s["name"] == "call mlp"] + [float("inf")]
    for i, event in enumerate(events):
        assert starts[i // 2] <= event["ts"] and event["ts"] + event["dur"] <= starts[i // 2 + 1]


@pytest.mark.parametrize("device", DEVICES)
def test_special_values_come_through_a_traced_call(device, arith_bytes, offset_constant, rng):
    module = rt.load_module(arith_bytes, device=device)
    a = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    b = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    a.flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.inf]
    b.flat[:6] = [1.0, -np.inf, 2.0, -0.0, -0.0, np.inf]
    with rt.trace() as t:
        got = module.add_scaled(a, b).to_host()
    with np.errstate(invalid="ignore"):
        expected = ((a + b) + offset_constant) * np.float32(SCALE)
    np.testing.assert_array_equal(got, expected)
    assert np.array_equal(np.signbit(got), np.signbit(expected))
    spans = check_trace(t.chrome())
    # a module of schema < 1.4 has no kernel infos: its dispatches carry their exports' names
    assert [e["name"] for e in dispatches(spans)] == ["add_f32", "add_f32", "scale_f32"]
    assert [row.kernel for row in t.summary()] and {row.sources for row in t.summary()} == {()}


def test_kernel_infos_name_dispatches_and_must_describe_every_kernel(kernel_library,
                                                                    offset_constant, rng):
    builder = arith_builder(kernel_library, offset_constant)
    builder.add_kernel_info("add_kernel", ["arith.addf @ arith.mlir:3"])
    with pytest.raises(rt.ModuleError, match="1 kernels are described but executable 0 has 3"):
        rt.load_module(builder.finish(), device="local-sync")
    for name in ("scale_kernel", "failing_kernel"):
        builder.add_kernel_info(name, [])
    module = rt.load_module(builder.finish(), device="local-sync")
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    with rt.trace() as t:
        np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)
    (event,) = dispatches(check_trace(t.chrome()))
    assert event["name"] == "arith.addf @ arith.mlir:3" and event["args"]["kernel"] == "add_kernel"


def test_copies_fills_and_checks_are_traced(arith_bytes, offset_constant, rng):
    module = rt.load_module(arith_bytes, device="local-task")
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    with rt.trace() as t:
        filled, copied = module.fill_copy()
        filled, copied = filled.to_host(), copied.to_host()
        result = module.checked_add(a, b, a + b).to_host()
        with pytest.raises(rt.CheckError):
            module.checked_add(a, b, a - b)
    np.testing.assert_array_equal(filled, np.full(4, 0x01020304, np.int32))
    np.testing.assert_array_equal(copied, offset_constant)
    np.testing.assert_array_equal(result, a + b)
    spans = check_trace(t.chrome())
    assert [s["name"] for s in spans if s["cat"] == "copy"] == [f"copy {ROWS * COLS * 4} bytes"]
    # fill_copy's fill, and each checked_add's clear of its result: the gcc-built kernels carry no
    # export records, so the verifier cannot take their writes as proven (module/coverage.py)
    assert [s["name"] for s in spans if s["cat"] == "fill"] == \
        ["fill 16 bytes"] + [f"fill {ROWS * COLS * 4} bytes"] * 2
    assert [s["name"] for s in spans if s["name"] == "check"] == ["check", "check"]


def test_host_control_flow_steps_are_traced(rng):
    from control_flow_cases import CASES, MLIR, check_case
    from pyree.compiler import compile_str

    module = rt.load_module(compile_str(MLIR, target_backends=["llvm-cpu"]), device="local-sync")
    with rt.trace() as t:
        for case in CASES:
            check_case(module, case, rng)  # numpy's answers
    spans = check_trace(t.chrome())
    names = [s["name"] for s in spans]
    assert names.count("branch") >= len(CASES) and "wait" in names
    assert len(dispatches(spans)) > len(CASES)
    check_summary(t.summary(), spans)


class _Untimed(LocalSyncDevice):
    queue_submit_timed = None  # a driver that cannot time commands


@pytest.fixture
def drivers(monkeypatch):
    yield install(monkeypatch, {"untimed": _Untimed, "revision3": LocalSyncDevice})
    registry.reset()


def _check_submissions_only(module, rng, t) -> None:
    spans = check_trace(t.chrome())
    assert not dispatches(spans) and t.summary() == []
    submissions = [s for s in spans if s["cat"] == "submission"]
    assert len(submissions) == 2 and all(s["args"]["kernels"] == [0] for s in submissions)
    assert "does not time commands" in t.format_summary()


def test_a_driver_without_command_timing_shows_each_submission(drivers, arith_bytes, rng):
    module = rt.load_module(arith_bytes, device="untimed")
    assert not module.device.times_commands
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    with rt.trace() as t:
        for _ in range(2):
            np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)
    _check_submissions_only(module, rng, t)


def test_a_driver_built_before_revision_4_still_traces(drivers, arith_bytes, rng, monkeypatch):
    """Its device struct ends where queue_submit_timed would start."""
    make_struct = python_driver._device_struct

    def revision_3(device):
        vt = make_struct(device)
        vt.struct_size = ffi.offsetof("pyree_hal_device_v1_t", "queue_submit_timed")
        return vt

    monkeypatch.setattr(python_driver, "_device_struct", revision_3)
    module = rt.load_module(arith_bytes, device="revision3")
    assert not module.device.times_commands and module.device.dlpack is not None
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    with rt.trace() as t:
        for _ in range(2):
            np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)
    _check_submissions_only(module, rng, t)


def test_calls_from_several_threads_get_a_host_lane_each(mlp_bytes, rng):
    module = rt.load_module(mlp_bytes, device="local-task")
    xs = [_x(rng) for _ in range(4)]
    expected = [module.mlp(x).to_host() for x in xs]
    got = [None] * 4

    def worker(i):
        for _ in range(5):
            got[i] = module.mlp(xs[i]).to_host()

    with rt.trace() as t:
        threads = [threading.Thread(target=worker, args=(i,), name=f"caller-{i}")
                   for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    chrome = t.chrome()
    spans = check_trace(chrome)
    lanes = {e["args"]["name"] for e in chrome["traceEvents"] if e["name"] == "thread_name"}
    assert {f"caller-{i}" for i in range(4)} <= lanes
    assert len(dispatches(spans)) == 20 * 2 and t.calls == {"mlp": 20}
    check_summary(t.summary(), spans)


def test_queued_calls_stay_queued_and_every_timing_is_read(mlp_bytes, rng, monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_PENDING", 4)
    module = rt.load_module(mlp_bytes, device="local-task")
    x = _x(rng)
    expected = module.mlp(x).to_host()
    with rt.trace() as t:
        for _ in range(30):
            result = module.mlp(x)  # each dropped unwaited as the next is made
        np.testing.assert_array_equal(result.to_host(), expected)
    spans = check_trace(t.chrome())
    assert len(dispatches(spans)) == 60 and not t._pending


def test_the_summary_table_names_kernels_and_their_sources(mlp_bytes, rng):
    module = rt.load_module(mlp_bytes, device="local-sync")
    with rt.trace() as t:
        module.mlp(_x(rng)).wait()
    lines = t.format_summary().splitlines()
    assert lines[0] == "pyree trace: 1 call of @mlp; 2 dispatches, 2 kernels"
    assert lines[1].split()[:4] == ["total", "ms", "count", "mean"]
    rows = t.summary()
    for row, line in zip(rows, lines[2:]):
        total, count, mean, share = line.split()[:4]
        assert float(total) == pytest.approx(row.total_ns / 1e6, abs=1e-3)
        assert int(count) == row.count == 1 and share.endswith("%")
        assert row.kernel in line and all(source in line for source in row.sources)
    assert sum(row.share for row in rows) == pytest.approx(1.0)  # nothing else ran on the device


def test_one_trace_at_a_time_and_none_after_it_stops(mlp_bytes, rng, monkeypatch):
    module = rt.load_module(mlp_bytes, device="local-sync")
    with rt.trace() as t:
        with pytest.raises(rt.PyreeError, match="a trace is already active"):
            rt.trace().start()
    assert Function._trace is None
    monkeypatch.setattr(trace_module.Trace, "call", lambda *a: pytest.fail("traced after stop"))
    module.mlp(_x(rng)).wait()
    assert t.calls == {}


def test_a_call_without_a_trace_never_imports_the_trace_code(mlp_bytes, tmp_path):
    """The switch is one test per call (Function._trace): nothing of vm/trace.py is imported,
    hence none of it runs, until a trace starts."""
    path = tmp_path / "mlp.vmfb"
    path.write_bytes(mlp_bytes)
    script = (f"import sys, numpy as np, pyree.runtime as rt\n"
              f"m = rt.load_module({str(path)!r}, device='local-task')\n"
              f"for _ in range(3): m.mlp(np.ones((37, 53), np.float32)).to_host()\n"
              f"assert 'pyree.runtime.vm.trace' not in sys.modules, 'imported'\n"
              f"with rt.trace() as t: m.mlp(np.ones((37, 53), np.float32)).wait()\n"
              f"assert t.calls == {{'mlp': 1}}\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_failing_call_still_leaves_a_valid_trace(arith_bytes, tmp_path):
    module = rt.load_module(arith_bytes, device="local-task")
    path = tmp_path / "failed.json"
    with pytest.raises(rt.DriverError, match="always_fails"):
        with rt.trace(str(path)):
            module.fail().to_host()
    spans = check_trace(str(path))
    assert [s["name"] for s in spans if s["name"].startswith("call")] == ["call fail"]
