"""pyree-check-module: run a module's check tests, like iree-check-module.

Every exported function that takes no arguments is a test; the module's check ops (expect_eq,
expect_almost_eq, ...) decide whether it passes. A function that fails to run fails its test too,
and the other tests still run. Exit status 1 when any test failed.

    pyree-check-module --device=local-task --module=checks.vmfb
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pyree.runtime as rt
from pyree.runtime.tools.cli import (
    FlagParser,
    ToolError,
    add_device_flags,
    print_listings,
    tool_main,
)
from pyree.runtime.tools.invocation import load_module

_BAR = "[==========]"


def run_test(function: rt.Function) -> list[str]:
    """Runs one test; returns the failure lines, empty when it passed."""
    try:
        failures = function.run_checks()
    except rt.PyreeError as e:
        return [f"@{function.name} failed to run: {' '.join(str(e).split())}"]
    return [f"{f.location}: {f.kind}: {f.message}" for f in failures]


def _run(argv: Sequence[str]) -> int:
    parser = FlagParser("pyree-check-module", "Runs the check tests of a pyree module (.vmfb).")
    add_device_flags(parser)
    parser.add_flag("--module", metavar="FILE", help="the .vmfb module file to load")
    args = parser.parse_args(argv)
    if print_listings(args):
        return 0
    module = load_module(args.module, args.device)
    tests = [module[name] for name in module.function_names if not module[name].argument_types]
    if not tests:
        raise ToolError(
            f"module '{module.name}' exports no function without arguments, "
            "so there is nothing to check"
        )

    print(f"{_BAR} Running {len(tests)} tests from module '{module.name}'.")
    failed = []
    for test in tests:
        print(f"[ RUN      ] {test.name}")
        start = time.perf_counter()
        failures = run_test(test)
        ms = (time.perf_counter() - start) * 1e3
        for line in failures:
            print(f"  {line}")
        print(
            f"[  FAILED  ] {test.name} ({ms:.0f} ms)"
            if failures
            else f"[       OK ] {test.name} ({ms:.0f} ms)"
        )
        if failures:
            failed.append(test.name)
    print(f"{_BAR} {len(tests)} tests ran.")
    print(f"[  PASSED  ] {len(tests) - len(failed)} tests.")
    if failed:
        print(f"[  FAILED  ] {len(failed)} tests, listed below:")
        for name in failed:
            print(f"[  FAILED  ] {name}")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> None:
    tool_main(_run, argv)


if __name__ == "__main__":
    main()
