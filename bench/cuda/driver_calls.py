"""CPU cost of the CUDA driver calls on a small call's submit path, each timed alone (median of
2000, the stream drained every 100 calls outside the timing): cuGraphLaunch of the 4-element
add's recorded graph, cuStreamWriteValue64 (a semaphore signal), cuEventRecord, and the whole
driver-side submit (CudaDevice.queue_submit) for comparison.

    python3 bench/cuda/driver_calls.py MODULE_DIR
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyree.runtime as rt
from pyree.hal.cuda.device import CudaDevice
from pyree.runtime.hal import python_driver


def _median_us(call, drain, calls: int = 2000) -> float:
    times = []
    for i in range(calls):
        if i % 100 == 0:
            drain()
        t0 = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - t0)
    drain()
    return statistics.median(times) / 1000


def main(folder: Path) -> None:
    module = rt.load_module(folder / "bench_add_4.vmfb", device="cuda")
    fn = module[module.function_names[0]]
    a = np.ones((1, 4), np.float32)
    fn(a, a).to_host()  # records and captures the graph for the pool's buffers
    device = next(o for o in python_driver._LIVE if isinstance(o, CudaDevice))
    commands = [o for kind, o in device._objects.values() if kind == "command buffer"]
    semaphore = next(o for kind, o in device._objects.values() if kind == "semaphore")
    command_buffer = commands[0]
    table = list(command_buffer._last[0])
    cu, stream = device.cu, device.stream
    drain = device.synchronize
    value = [semaphore._promised]

    def signal():
        value[0] += 1
        semaphore.device_signal(stream, value[0])

    def submit():
        value[0] += 1
        device.queue_submit(command_buffer, table, [(semaphore, value[0] - 1)],
                            [(semaphore, value[0])])

    event = semaphore._event
    results = {
        "cuGraphLaunch (issue)": _median_us(lambda: command_buffer.issue(table), drain),
        "cuStreamWriteValue64 (device_signal)": _median_us(signal, drain),
        "cuEventRecord": _median_us(lambda: cu.cuEventRecord(event, stream), drain),
        "CudaDevice.queue_submit (wait + issue + signal)": _median_us(submit, drain),
    }
    for name, us in results.items():
        print(f"{name:50s} {us:6.2f} us")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
