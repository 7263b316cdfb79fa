"""pyree-benchmark-module: time whole invocations of a module's functions, printed the way Google
Benchmark (and so iree-benchmark-module) prints them.

Which functions, as IREE's tool picks them: --function's, else a module's only function, else
every function that takes no arguments. ``--benchmark_filter=REGEX`` (Google Benchmark's) keeps
those whose benchmark name (``BM_<function>/process_time/real_time``) the regex finds, and
``-REGEX`` those it does not. Each repetition calls a function until --benchmark_min_time has
passed (or a fixed count, ``100x``) and reports wall and process CPU time per call. Each call
waits for its results to be computed (without copying them to the host), so a call counts only
once its work is done. With several repetitions, mean/median/stddev rows follow.
``--benchmark_format=json`` prints Google Benchmark's JSON report instead (a ``context`` object
and one ``benchmarks`` entry per repetition and aggregate); ``--benchmark_out=FILE`` also writes
the report, in ``--benchmark_out_format`` (json by default, as Google Benchmark's).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyree.runtime.tools.cli import (
    FlagParser,
    UsageError,
    add_device_flags,
    add_parameter_flags,
    print_listings,
    tool_main,
)
from pyree.runtime.tools.invocation import (
    add_invocation_flags,
    load_module,
    parse_arguments,
    print_statistics,
    select_function,
)
from pyree.runtime.tools.tracing import add_trace_flag, traced

_RULE = "-" * 86


@dataclass(frozen=True)
class Sample:
    """One repetition: seconds of wall and CPU time per call, over ``iterations`` calls."""

    real_s: float
    cpu_s: float
    iterations: int


@dataclass(frozen=True)
class MinTime:
    """How long one repetition runs: ``seconds`` of wall time, or exactly ``iterations`` calls."""

    seconds: float = 0.0
    iterations: int = 0


def parse_min_time(text: str) -> MinTime:
    """Google Benchmark's spelling: ``0.5``, ``0.5s`` (seconds) or ``100x`` (iterations)."""
    try:
        if text.endswith("x"):
            count = int(text[:-1])
            if count > 0:
                return MinTime(iterations=count)
        else:
            seconds = float(text.removesuffix("s"))
            if seconds >= 0:
                return MinTime(seconds=seconds)
    except ValueError:
        pass
    raise UsageError(
        f"--benchmark_min_time='{text}' is not a time: use seconds (0.5, 0.5s) or a "
        "positive iteration count (100x)"
    )


def measure(call: Callable[[], object], min_time: MinTime) -> Sample:
    """Calls ``call`` until ``min_time`` is reached; at least once."""
    iterations = 0
    cpu_start, real_start = time.process_time(), time.perf_counter()
    while True:
        call()
        iterations += 1
        elapsed = time.perf_counter() - real_start
        if (
            iterations >= min_time.iterations
            if min_time.iterations
            else elapsed >= min_time.seconds
        ):
            break
    cpu = time.process_time() - cpu_start
    return Sample(elapsed / iterations, cpu / iterations, iterations)


_AGGREGATES = (("mean", statistics.mean), ("median", statistics.median),
               ("stddev", statistics.stdev))
FORMATS = ("console", "json")


def report_rows(name: str, samples: list[Sample]) -> list[str]:
    """One row per repetition, then mean/median/stddev rows when there are several."""
    rows = [_row(name, s.real_s, s.cpu_s, s.iterations) for s in samples]
    for suffix, real, cpu, n in _aggregates(samples):
        rows.append(_row(f"{name}_{suffix}", real, cpu, n))
    return rows


def _aggregates(samples: list[Sample]) -> list[tuple[str, float, float, int]]:
    if len(samples) < 2:
        return []
    real = [s.real_s for s in samples]
    cpu = [s.cpu_s for s in samples]
    return [(suffix, stat(real), stat(cpu), len(samples)) for suffix, stat in _AGGREGATES]


def console_report(runs: list[tuple[str, list[Sample]]]) -> str:
    """The table for each benchmark's (name, samples), in order."""
    header = f"{'Benchmark':<44}{'Time':>15}{'CPU':>15}{'Iterations':>12}"
    return "\n".join([_RULE, header, _RULE, *(row for name, samples in runs
                                               for row in report_rows(name, samples))])


def json_report(runs: list[tuple[str, list[Sample]]]) -> str:
    """Google Benchmark's JSON (--benchmark_format=json), times in milliseconds: one family per
    benchmark."""
    entries = []
    for family, (name, samples) in enumerate(runs):
        common = {"family_index": family, "per_family_instance_index": 0, "run_name": name,
                  "repetitions": len(samples), "threads": 1}
        entries += [{"name": name, **common, "run_type": "iteration", "repetition_index": i,
                     "iterations": s.iterations, "real_time": s.real_s * 1e3,
                     "cpu_time": s.cpu_s * 1e3, "time_unit": "ms"}
                    for i, s in enumerate(samples)]
        for suffix, real, cpu, n in _aggregates(samples):
            entries.append({"name": f"{name}_{suffix}", **common, "run_type": "aggregate",
                            "aggregate_name": suffix, "aggregate_unit": "time", "iterations": n,
                            "real_time": real * 1e3, "cpu_time": cpu * 1e3, "time_unit": "ms"})
    context = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": platform.node(),
        "executable": "pyree-benchmark-module",
        "num_cpus": os.cpu_count() or 1,
        "mhz_per_cpu": _mhz_per_cpu(),
        "cpu_scaling_enabled": False,
        "caches": [],
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else [],
        "library_build_type": "release",
    }
    return json.dumps({"context": context, "benchmarks": entries}, indent=2)


def _mhz_per_cpu() -> int:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return round(float(line.split(":")[1]))
    except (OSError, ValueError):
        pass
    return 0


def _row(name: str, real_s: float, cpu_s: float, iterations: int) -> str:
    return (
        f"{name:<44}{real_s * 1e3:>12.3f} ms{cpu_s * 1e3:>12.3f} ms{iterations:>12} "
        f"per_call={real_s * 1e6:.2f}us"
    )


def _parser() -> FlagParser:
    parser = FlagParser("pyree-benchmark-module", "Times invocations of a pyree module function.")
    add_device_flags(parser)
    add_invocation_flags(parser)
    add_parameter_flags(parser)
    parser.add_flag(
        "--benchmark_repetitions",
        parse=int,
        default=1,
        metavar="N",
        help="repeat the measurement N times and add mean/median/stddev rows",
    )
    parser.add_flag(
        "--benchmark_min_time",
        default="0.5",
        metavar="TIME",
        help="each repetition runs at least TIME seconds (0.5, 0.5s), or exactly "
        "N calls (Nx) (default: 0.5)",
    )
    parser.add_flag(
        "--benchmark_format",
        choices=FORMATS,
        default="console",
        help="the report printed on stdout: console (default) or json (Google Benchmark's)",
    )
    parser.add_flag(
        "--benchmark_filter",
        metavar="REGEX",
        help="benchmark only the functions whose benchmark name "
        "(BM_<function>/process_time/real_time) REGEX finds; -REGEX: those it does not",
    )
    parser.add_flag(
        "--benchmark_out", metavar="FILE", help="also write the report to FILE"
    )
    parser.add_flag(
        "--benchmark_out_format",
        choices=FORMATS,
        default="json",
        help="the format of --benchmark_out (default: json)",
    )
    add_trace_flag(parser)
    return parser


def _run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    if print_listings(args):
        return 0
    if args.benchmark_repetitions < 1:
        raise UsageError(
            f"--benchmark_repetitions={args.benchmark_repetitions}: must be at least 1"
        )
    min_time = parse_min_time(args.benchmark_min_time)
    module = load_module(args.module, args.device, args.parameters)
    functions = _filtered(_functions(module, args), args.benchmark_filter)
    calls = [(_name(f), _caller(f, parse_arguments(f, args.input))) for f in functions]
    for _, call in calls:
        call()  # warm-up: first-call work (executable loading, command recording) is not timed
    with traced(args.pyree_trace):  # (a traced call takes longer: the times say so)
        runs = [(name, [measure(call, min_time) for _ in range(args.benchmark_repetitions)])
                for name, call in calls]
    reports = {"console": console_report, "json": json_report}
    print(reports[args.benchmark_format](runs))
    if args.benchmark_out:
        from pyree.runtime.output_file import write_output

        write_output(args.benchmark_out, reports[args.benchmark_out_format](runs) + "\n")
    print_statistics(module, args.print_statistics)
    return 0


def _name(function) -> str:
    return f"BM_{function.name}/process_time/real_time"


def _caller(function, arguments) -> Callable[[], None]:
    def call() -> None:
        results = function(*arguments)
        for result in results if isinstance(results, tuple) else (results,):
            if result is not None:
                result.wait()

    return call


def _functions(module, args) -> list:
    """--function's, the module's only one, or (as IREE's tool) every function that takes no
    arguments, leaving out IREE's internal names (``__init``, ``a$b``)."""
    if args.function or len(module.function_names) == 1:
        return [select_function(module, args.function)]
    if args.input:
        return [select_function(module, None)]   # the error: several functions, no --function
    runnable = [module[name] for name in module.function_names
                if not module[name].argument_types and not name.startswith("__")
                and "$" not in name]
    if not runnable:
        listing = ", ".join(f"@{name}" for name in module.function_names)
        raise UsageError(f"module '{module.name}' exports {len(module.function_names)} functions "
                         f"({listing}), none without arguments; choose one with --function and "
                         "give its --input values")
    return runnable


def _filtered(functions: list, pattern: str | None) -> list:
    """Google Benchmark's --benchmark_filter: a regex searched for in each benchmark name; a
    leading ``-`` keeps the names it does not find."""
    if not pattern:
        return functions
    negative = pattern.startswith("-")
    try:
        regex = re.compile(pattern[1:] if negative else pattern)
    except re.error as e:
        raise UsageError(f"--benchmark_filter='{pattern}' is not a regular expression: {e}") \
            from None
    kept = [f for f in functions if (regex.search(_name(f)) is None) == negative]
    if not kept:
        names = ", ".join(_name(f) for f in functions)
        raise UsageError(f"--benchmark_filter='{pattern}' matches none of the benchmarks: {names}")
    return kept


def main(argv: Sequence[str] | None = None) -> None:
    tool_main(_run, argv)


if __name__ == "__main__":
    main()
