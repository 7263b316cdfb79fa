"""On an NVIDIA GPU: a traced call's dispatch times add up to its device time, measured with
timing events of the test's own recorded around the whole submission, within 10%, in every
command-buffer mode (a traced graph-mode call replays its commands in stream order); results are
those of the untraced call; the trace is valid and its device spans lie on the host's clock.
Modules come from PYREE_CUDA_MODULE_DIR (build_modules.py) or are compiled here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codegen.cuda.cases import relative_error  # noqa: E402
from trace_cases import CHAIN, chain_arguments, chain_reference  # noqa: E402
from trace_checks import check_summary, check_trace, dispatches, dispatches_per_call  # noqa: E402

pytestmark = pytest.mark.cuda
MODES = ("direct", "stream", "graph")


def chain_module() -> bytes:
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        return (Path(folder) / "trace_chain.vmfb").read_bytes()
    from pyree.compiler import CompileOptions, compile_str
    return compile_str(CHAIN, CompileOptions(target_backends=["cuda"], cuda_target="sm_90"),
                       "trace_chain.mlir")


@pytest.fixture(scope="module")
def chain() -> bytes:
    return chain_module()


@pytest.mark.parametrize("mode", MODES)
def test_dispatch_times_add_up_to_the_calls_device_time(chain, mode):
    import pyree.runtime as rt
    from pyree.hal.cuda import symbols
    from pyree.hal.cuda.symbols import check, create_event
    from pyree.runtime.hal.ffi import ffi as runtime_ffi

    module = rt.load_module(chain, device=f"cuda://0?command_buffer={mode}")
    assert module.device.times_commands
    fn = module["chain"]
    x, w = (rt.asdevicearray(module.device, a) for a in chain_arguments(np.random.default_rng()))
    untraced = fn(x, w).to_host()
    assert relative_error(untraced, chain_reference(x.to_host(), w.to_host())) <= 1e-3
    cuda = runtime_ffi.from_handle(module.device._vt.self)  # the driver's CudaDevice
    cu, stream = cuda.cu, cuda.stream
    before, after = (create_event(cu, symbols.CU_EVENT_DEFAULT) for _ in range(2))
    for _ in range(8):  # untraced, dropped: the GPU stays busy while the traced call is queued
        fn(x, w)        # behind them (direct mode's host issues a launch slower than one runs)
    check(cu.cuEventRecord(before, stream), "cuEventRecord")
    with rt.trace() as t:
        traced = fn(x, w)
        check(cu.cuEventRecord(after, stream), "cuEventRecord")
        traced = traced.to_host()
    check(cu.cuEventSynchronize(after), "cuEventSynchronize")
    ms = symbols.ffi.new("float *")
    check(cu.cuEventElapsedTime(ms, before, after), "cuEventElapsedTime")
    call_ns = ms[0] * 1e6
    for event in (before, after):
        cu.cuEventDestroy(event)
    np.testing.assert_array_equal(traced, untraced)
    spans = check_trace(t.chrome())
    events = dispatches(spans)
    assert len(events) == dispatches_per_call(chain) == 3
    rows = t.summary()
    check_summary(rows, spans)
    dispatch_ns = sum(row.total_ns for row in rows)
    print(f"{mode}: dispatches {dispatch_ns / 1e6:.3f} ms, call {call_ns / 1e6:.3f} ms")
    assert abs(dispatch_ns - call_ns) <= 0.1 * call_ns, (dispatch_ns, call_ns)
    # the device lane is on the host's clock: its spans lie between the trace's host spans
    host = [s for s in spans if s["cat"] == "host"]
    first, last = min(s["ts"] for s in host), max(s["ts"] + s["dur"] for s in host)
    assert all(first - 50 <= e["ts"] and e["ts"] + e["dur"] <= last + 50 for e in events)
    assert [e["args"]["kernel"] for e in events].count(events[0]["args"]["kernel"]) == 2


def test_run_module_traces_on_cuda(tmp_path):
    folder = os.environ.get("PYREE_CUDA_MODULE_DIR")
    if folder:
        mlp = Path(folder) / "mlp.vmfb"
    else:
        from pyree.compiler import CompileOptions, compile_str
        mlp = tmp_path / "mlp.vmfb"
        mlp.write_bytes(compile_str((Path(__file__).parents[2] / "data" / "mlp.mlir").read_text(),
                                    CompileOptions(target_backends=["cuda"], cuda_target="sm_90")))
    out = tmp_path / "mlp.json"
    done = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module", "--device=cuda",
                           f"--module={mlp}", "--input=37x53xf32=0.25", f"--pyree-trace={out}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(dispatches(check_trace(str(out)))) == dispatches_per_call(mlp.read_bytes())
    assert "pyree trace: 1 call of @mlp" in done.stderr
