"""``--expected_output``: compare results with expected values, as iree-run-module does.

Each flag is one value in the ``--input`` format (``4xf32=1 2 3 4``, ``@golden.npy``), matched to
the results in order; ``(ignore)`` skips a result. Floats match within an absolute threshold per
element type (``--expected_f16_threshold`` 0.001, ``--expected_f32_threshold`` and
``--expected_f64_threshold`` 0.0001, IREE's defaults); every other type matches exactly. Unlike
IREE, whose ``|a - e| > t`` test lets NaN match anything, NaN matches only NaN and an infinity
only the same infinity. Values are compared as Python numbers (float64 for floats), without
numpy; a differing element is printed as the results are (``format_element``), as IREE does.
"""

from __future__ import annotations

from pyree.runtime.element_types import NAMES
from pyree.runtime.tools.cli import EXIT_FAILURE, FlagParser, UsageError
from pyree.runtime.tools.io_format import InputError, format_array, format_element, parse_value
from pyree.runtime.vm.host_array import HostArray

IGNORE = "(ignore)"
# IREE's default thresholds; bf16 takes the f16 flag's value.
_THRESHOLDS = {"f16": 0.001, "bf16": 0.001, "f32": 0.0001, "f64": 0.0001}


def add_expected_output_flags(parser: FlagParser) -> None:
    parser.add_flag(
        "--expected_output", repeated=True, metavar="VALUE",
        help="compare result N with this value (--input format, or (ignore)); print "
        "[SUCCESS] or [FAILED] and exit 1 on a mismatch")
    for name in ("f16", "f32", "f64"):
        default = _THRESHOLDS[name]
        parser.add_flag(
            f"--expected_{name}_threshold", parse=_threshold, default=default, metavar="T",
            help=f"largest absolute difference for {name} results to match (default {default})")


def _threshold(text: str) -> float:
    try:
        value = float(text.removesuffix("f"))
    except ValueError:
        raise UsageError(f"'{text}' is not a threshold: give a non-negative number") from None
    if not value >= 0:
        raise UsageError(f"'{text}' is not a threshold: give a non-negative number")
    return value


def parse_expected(texts: list[str], result_count: int) -> list[HostArray | None]:
    """The --expected_output values, checked up front (None: ignore that result)."""
    if len(texts) != result_count:
        raise UsageError(f"{len(texts)} --expected_output flags given, but the function returns "
                         f"{result_count} results (use --expected_output=(ignore) to skip one)")
    expected = []
    for index, text in enumerate(texts):
        if text.strip() == IGNORE:
            expected.append(None)
            continue
        try:
            expected.append(parse_value(text))
        except InputError as e:
            raise InputError(f"--expected_output {index + 1}: {e}") from None
    return expected


def check_results(expected: list[HostArray | None], actual: list[HostArray], args) -> int:
    """Prints the comparison as iree-run-module does; the exit code (0: all matched)."""
    failures = compare(expected, actual, _thresholds(args), args.print_max_element_count)
    for failure in failures:
        print(failure)
    if failures:
        return EXIT_FAILURE
    print("[SUCCESS] all function outputs matched their expected values.")
    return 0


def compare(expected: list[HostArray | None], actual: list[HostArray],
            thresholds: dict[str, float], max_elements: int) -> list[str]:
    """One ``[FAILED] result[i]: ...`` report per result that does not match (empty: all do)."""
    failures = []
    for index, (want, got) in enumerate(zip(expected, actual)):
        if want is None:
            continue
        problem = _mismatch(want, got, thresholds)
        if problem:
            failures.append(
                f"[FAILED] result[{index}]: {problem}; expected that the view is equal to "
                f"contents of a view of {want.type}\n"
                f"  expected:\n{format_array(want, max_elements)}\n"
                f"  actual:\n{format_array(got, max_elements)}")
    return failures


def _thresholds(args) -> dict[str, float]:
    return {"f16": args.expected_f16_threshold, "bf16": args.expected_f16_threshold,
            "f32": args.expected_f32_threshold, "f64": args.expected_f64_threshold}


def _mismatch(want: HostArray, got: HostArray, thresholds: dict[str, float]) -> str:
    if want.type != got.type:
        return f"the result is {got.type}, not {want.type}"
    t = want.element_type
    threshold = thresholds.get(NAMES[t])
    for i, (w, g) in enumerate(zip(want.values(), got.values())):
        if w == g or (threshold is not None and (abs(w - g) <= threshold or w != w and g != g)):
            continue
        return (f"element at index {i} ({format_element(g, t)}) does not match the expected "
                f"({format_element(w, t)})")
    return ""
