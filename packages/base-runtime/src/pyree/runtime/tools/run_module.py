"""pyree-run-module: call one function of a module and print or save its results, like
iree-run-module.

    pyree-run-module --device=local-task --module=add.vmfb --function=add \\
        --input="4xf32=1 2 3 4" --input=4xf32=2 --output=@sum.npy

With ``--expected_output`` the results are compared instead of printed (expected_output.py):
``[SUCCESS] all function outputs matched their expected values.`` and exit 0, or one
``[FAILED]`` report per differing result and exit 1.
"""

from __future__ import annotations

import sys

from pyree.runtime.tools.cli import (
    FlagParser,
    UsageError,
    add_device_flags,
    add_parameter_flags,
    print_listings,
    tool_main,
)
from pyree.runtime.tools.expected_output import (
    add_expected_output_flags,
    check_results,
    parse_expected,
)
from pyree.runtime.tools.invocation import (
    add_invocation_flags,
    load_module,
    parse_arguments,
    print_statistics,
    select_function,
)
from pyree.runtime.tools.io_format import format_array, parse_output_spec, save_npy
from pyree.runtime.tools.tracing import add_trace_flag, traced

TYPE_CHECKING = False  # annotations only (collections.abc: an import for the tools' start)
if TYPE_CHECKING:
    from collections.abc import Sequence


def _parser() -> FlagParser:
    parser = FlagParser("pyree-run-module", "Runs one function of a pyree module (.vmfb).")
    add_device_flags(parser)
    add_invocation_flags(parser)
    add_parameter_flags(parser)
    parser.add_flag(
        "--output",
        repeated=True,
        metavar="SPEC",
        help="what to do with the next result: @file.npy writes it, +file.npy "
        "appends it, - prints it, an empty value drops it (default: print all)",
    )
    parser.add_flag(
        "--output_max_element_count",
        "--print_max_element_count",
        dest="print_max_element_count",
        parse=int,
        default=1024,
        metavar="N",
        help="elide printed results past N elements with ... (default: 1024)",
    )
    add_expected_output_flags(parser)
    add_trace_flag(parser)
    return parser


def _run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    if print_listings(args):
        return 0
    outputs = [parse_output_spec(text) for text in args.output]
    module = load_module(args.module, args.device, args.parameters)
    function = select_function(module, args.function)
    arguments = parse_arguments(function, args.input)
    if len(outputs) > len(function.result_types):
        raise UsageError(
            f"{len(outputs)} --output flags given, but @{function.name} returns "
            f"{len(function.result_types)} results"
        )
    if args.expected_output and outputs:
        raise UsageError("--output and --expected_output cannot be combined: the results are "
                         "either written or compared")
    expected = parse_expected(args.expected_output, len(function.result_types)) \
        if args.expected_output else None

    print(f"EXEC @{function.name}")
    sys.stdout.flush()
    with traced(args.pyree_trace):
        status = _call(function, arguments, outputs, expected, args)
    print_statistics(module, args.print_statistics)
    return status


def _call(function, arguments: list, outputs: list, expected, args) -> int:
    """Calls ``function`` and prints, writes or compares its results."""
    results = function(*arguments)
    if results is None:
        results = ()
    elif not isinstance(results, tuple):
        results = (results,)
    if expected is not None:
        return check_results(expected, [r.to_host_array() for r in results], args)
    for index, result in enumerate(results):
        action = outputs[index].action if index < len(outputs) else "print"
        if action == "print":
            print(f"result[{index}]: hal.buffer_view")
            print(format_array(result.to_host_array(), args.print_max_element_count))
        elif action != "ignore":
            save_npy(outputs[index], result.to_host_array())
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    tool_main(_run, argv)


if __name__ == "__main__":
    main()
