"""The shared main wrapper: every kind of failure becomes one ``error:`` line and its exit code."""

import pytest
from pyree.runtime.errors import ModuleError
from pyree.runtime.tools.cli import FlagParser, ToolError, UsageError, run_tool
from pyree.runtime.tools.io_format import InputError


def _raising(error: BaseException):
    def body(argv):
        raise error

    return body


@pytest.mark.parametrize(
    "error, code, message",
    [
        (UsageError("bad flag"), 2, "error: bad flag"),
        (InputError("--input 1 'x': bad"), 2, "error: --input 1 'x': bad"),
        (ModuleError("module is damaged\n  (checksum)"), 1, "error: module is damaged (checksum)"),
        (ToolError("nothing to check"), 1, "error: nothing to check"),
        (FileNotFoundError(2, "No such file or directory", "m.vmfb"), 1,
         "error: m.vmfb: No such file or directory"),
        (KeyboardInterrupt(), 130, "error: interrupted"),
        (ZeroDivisionError("division by zero"), 1,
         "error: internal error (ZeroDivisionError): division by zero"),
    ],
)
def test_failures_become_one_line_and_an_exit_code(capsys, error, code, message):
    assert run_tool(_raising(error), []) == code
    assert capsys.readouterr().err == message + "\n"


def test_success_passes_the_body_exit_code_and_arguments():
    assert run_tool(lambda argv: len(argv), ["a", "b", "c"]) == 3


def test_flag_parser_accepts_both_spellings_and_refuses_abbreviations():
    parser = FlagParser("tool", "test")
    parser.add_argument("--device")
    assert parser.parse_args(["--device=cuda://0"]).device == "cuda://0"
    assert parser.parse_args(["--device", "vulkan"]).device == "vulkan"
    with pytest.raises(UsageError, match=r"unrecognized arguments: --dev=cuda \(see tool --help\)"):
        parser.parse_args(["--dev=cuda"])
