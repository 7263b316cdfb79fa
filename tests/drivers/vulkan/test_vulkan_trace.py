"""Traces on a Vulkan device (lavapipe in CI): each command of a traced submission is timed with
vkCmdWriteTimestamp into a query pool, so every dispatch is one event on the device's queue lane,
named by its source ops, on the host's clock; through the Python API and --pyree-trace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from control_flow_cases import CASES, MLIR, check_case
from pyree.compiler import compile_str
from trace_checks import check_summary, check_trace, dispatches, dispatches_per_call

pytestmark = pytest.mark.vulkan
DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def mlp_bytes() -> bytes:
    return compile_str((DATA / "mlp.mlir").read_text(), target_backends=["vulkan-spirv"],
                       source_name="mlp.mlir")


def test_every_dispatch_is_timed_on_the_queue(vulkan_device, mlp_bytes, tmp_path):
    module = rt.load_module(mlp_bytes, device=vulkan_device)
    assert module.device.times_commands
    rng = np.random.default_rng()
    xs = [rng.standard_normal((37, 53)).astype(np.float32) for _ in range(3)]
    expected = [module.mlp(x).to_host() for x in xs]
    path = tmp_path / "vulkan.json"
    with rt.trace(str(path)) as t:
        got = [module.mlp(x).to_host() for x in xs]
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    spans = check_trace(str(path))
    events = dispatches(spans)
    assert len(events) == 3 * dispatches_per_call(mlp_bytes, "mlp") == 6
    assert all(e["name"].startswith("linalg.matmul @ mlp.mlir:") for e in events)
    assert all(e["dur"] > 0 for e in events)
    check_summary(t.summary(), spans)
    # host and device times share one clock: the dispatches lie within the traced calls
    calls = [s for s in spans if s["name"] == "call mlp"]
    end = max(s["ts"] + s["dur"] for s in spans if s["cat"] == "host")
    assert calls[0]["ts"] <= min(e["ts"] for e in events)
    assert max(e["ts"] + e["dur"] for e in events) <= end


def test_loops_copies_and_branches_are_traced(vulkan_device):
    module = rt.load_module(compile_str(MLIR, target_backends=["vulkan-spirv"]),
                            device=vulkan_device)
    rng = np.random.default_rng(5)
    with rt.trace() as t:
        for case in CASES:
            check_case(module, case, rng)
    spans = check_trace(t.chrome())
    categories = {s["cat"] for s in spans}
    assert {"dispatch", "copy"} <= categories
    assert "branch" in {s["name"] for s in spans}
    check_summary(t.summary(), spans)


def test_run_module_traces_on_vulkan(vulkan_device, mlp_bytes, tmp_path):
    module = tmp_path / "mlp.vmfb"
    module.write_bytes(mlp_bytes)
    x = np.random.default_rng().standard_normal((37, 53)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module",
                           f"--device={vulkan_device}", f"--module={module}",
                           f"--input=@{tmp_path / 'x.npy'}", f"--pyree-trace={out}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(dispatches(check_trace(str(out)))) == 2
    assert "pyree trace: 1 call of @mlp; 2 dispatches, 2 kernels" in done.stderr
