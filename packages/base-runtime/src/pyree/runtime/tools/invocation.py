"""From flags to a call: load the module, pick the function, turn --input strings into arguments.

Inputs are checked against the function's signature here, so a wrong count, shape or element type
is reported against the --input that caused it rather than deep inside the runtime.
"""

from __future__ import annotations

import sys

import pyree.runtime as rt
from pyree.runtime.element_types import FLOAT_TYPES, I1, ITEMSIZES
from pyree.runtime.tools.cli import FlagParser, UsageError
from pyree.runtime.tools.io_format import InputError, parse_value
from pyree.runtime.vm.host_array import HostArray
from pyree.runtime.vm.tensor_type import TensorType

INTEGER_TYPES = frozenset(ITEMSIZES) - FLOAT_TYPES - {I1}


def add_invocation_flags(parser: FlagParser) -> None:
    """--module, --function, --input (each also under its pre-2023 IREE spelling)."""
    parser.add_flag("--module", "--module_file", metavar="FILE",
                    help="the .vmfb module file to load")
    parser.add_flag(
        "--function",
        "--entry_function",
        metavar="NAME",
        help="the exported function to call (default: the module's only function)",
    )
    parser.add_flag(
        "--input",
        "--function_input",
        repeated=True,
        metavar="VALUE",
        help="one argument, in order: 4xf32=1 2 3 4, 2x2xi32=[1 2][3 4], f32=2, "
        "1x8xf32=0 (splat), @file.npy",
    )
    parser.add_flag(
        "--print_statistics",
        const="true",
        parse=_boolean,
        default=False,
        metavar="BOOL",
        help="print the device's memory statistics on stderr after the run, as IREE's "
        "allocator statistics (peak, allocated, freed and live bytes by heap)",
    )


def _boolean(text: str) -> bool:
    if text.lower() in ("false", "0"):
        return False
    if text.lower() in ("true", "1"):
        return True
    raise UsageError(f"--print_statistics='{text}': expected true or false")


def print_statistics(module: rt.LoadedModule, asked: bool) -> None:
    """--print_statistics: where IREE's tools print theirs (stderr, once the run is over)."""
    if asked:
        print(module.device.statistics.format(), file=sys.stderr)


def load_module(path: str | None, device: str, parameters: list[str] = ()) -> rt.LoadedModule:
    """Loads ``path`` on ``device`` with the --parameters files (a missing --module is a usage
    error)."""
    if not path:
        raise UsageError("no module given: pass --module=file.vmfb")
    return rt.load_module(path, device=device, parameters=list(parameters))


def select_function(module: rt.LoadedModule, name: str | None) -> rt.Function:
    names = module.function_names
    listing = ", ".join(f"@{n}" for n in names) or "none"
    if name is None:
        if len(names) != 1:
            raise UsageError(
                f"module '{module.name}' exports {len(names)} functions ({listing}); "
                "choose one with --function"
            )
        name = names[0]
    if name not in names:
        raise UsageError(f"module '{module.name}' has no function '{name}'; it exports {listing}")
    return module[name]


def parse_arguments(function: rt.Function, inputs: list[str]) -> list[HostArray]:
    """Parses every --input and checks it against ``function``'s argument types."""
    expected = function.argument_types
    if len(inputs) != len(expected):
        signature = ", ".join(str(t) for t in expected)
        raise UsageError(
            f"@{function.name}({signature}) takes {len(expected)} inputs, "
            f"{len(inputs)} given with --input"
        )
    arguments = []
    for index, (text, want) in enumerate(zip(inputs, expected), start=1):
        where = f"--input {index} '{_abbreviate(text)}'"
        try:
            array = parse_value(text)
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
        array = _same_width(array, want.element_type)
        if array.element_type != want.element_type or not _shape_matches(array.shape,
                                                                          tuple(want.shape)):
            raise InputError(f"{where}: @{function.name} expects {want} here, got {array.type}")
        arguments.append(array)
    return arguments


def _same_width(array: HostArray, element_type: int) -> HostArray:
    """``array`` as ``element_type`` where both are integer types of one width (3xui64 for an
    i64 argument: the same bits), as the Python API and IREE's tools take them; MLIR's integers
    are signless. Otherwise ``array`` itself, for the caller to refuse."""
    have = array.element_type
    if have != element_type and {have, element_type} <= INTEGER_TYPES \
            and ITEMSIZES[have] == ITEMSIZES[element_type]:
        return HostArray(array.data, TensorType.of(element_type, array.shape))
    return array


def _shape_matches(actual: tuple[int, ...], declared: tuple[int, ...]) -> bool:
    return len(actual) == len(declared) and all(d < 0 or a == d for a, d in zip(actual, declared))


def _abbreviate(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
