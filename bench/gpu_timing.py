"""Timing shared by the GPU benchmarks: PyTorch with CUDA events, pyree as call latency and as
per-call time with calls queued back to back. Medians throughout."""

from __future__ import annotations

import statistics
import time

import torch


def torch_ms(fn, reps=50, warmup=5) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def torch_graph_ms(fn, reps=50) -> float:
    """``fn()`` (PyTorch work on fixed tensors) captured once in a CUDA graph, its replay timed
    as ``torch_ms`` times: PyTorch's best for a fixed shape."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return torch_ms(graph.replay, reps=reps)


def pyree_ms(call, reps=50, warmup=5, rounds=5) -> tuple[float, float]:
    """(median latency of call+wait, throughput time per call with calls queued back to back:
    the median over ``rounds`` rounds of ``reps`` queued calls, after one untimed queued round).

    The untimed round matters: the first queued calls make the buffer sets that later calls
    rotate through (a result dropped unwaited comes back once its work is done), and with them
    the driver's recorded command buffers (CUDA graphs); timing them would charge a steady
    stream of calls for its start-up."""
    for _ in range(warmup):
        call().wait()
    lat = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call().wait()
        lat.append((time.perf_counter() - t0) * 1e3)
    per_call = []
    for round_ in range(rounds + 1):
        t0 = time.perf_counter()
        result = None
        for _ in range(reps):  # queued back to back; each result is dropped as the next is made
            result = call()
        result.wait()
        if round_:
            per_call.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(lat), statistics.median(per_call)
