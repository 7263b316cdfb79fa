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
    parser.add_flag("--device")
    assert parser.parse_args(["--device=cuda://0"]).device == "cuda://0"
    assert parser.parse_args(["--device", "vulkan"]).device == "vulkan"
    assert parser.parse_args(["--device=a", "--device=b"]).device == "b"  # the last one wins
    assert parser.parse_args([]).device is None
    with pytest.raises(UsageError, match=r"unrecognized arguments: --dev=cuda \(see tool --help\)"):
        parser.parse_args(["--dev=cuda"])
    with pytest.raises(UsageError, match=r"argument --device: expected one argument"):
        parser.parse_args(["--device", "--other"])


def _parser() -> FlagParser:
    parser = FlagParser("tool", "test")
    parser.add_flag("--on", switch=True, help="a switch")
    parser.add_flag("--list", const="", metavar="WHAT")
    parser.add_flag("--value", "--old_value", dest="value", parse=int, default=3)
    parser.add_flag("--item", repeated=True)
    parser.add_flag("--format", choices=("a", "b"), default="a")
    return parser


def test_switches_take_iree_booleans():
    parse = _parser().parse_args
    assert parse([]).on is False and parse(["--on"]).on is True
    assert [parse([f"--on={text}"]).on for text in ("true", "1", "False", "0")] == [
        True, True, False, False]
    with pytest.raises(UsageError, match=r"argument --on: expected true or false, got 'yes'"):
        parse(["--on=yes"])


def test_optional_values_repeats_aliases_and_negative_numbers():
    parse = _parser().parse_args
    assert parse([]).list is None and parse(["--list"]).list == ""
    assert parse(["--list", "--on"]).list == "" and parse(["--list", "cuda"]).list == "cuda"
    assert parse(["--old_value", "-7"]).value == -7 and parse([]).value == 3
    args = parse(["--item=-", "--item", "-", "--item=", "--item=x=1"])
    assert args.item == ["-", "-", "", "x=1"]
    assert parse([]).item == [] and parse([]).item is not parse([]).item


def test_bad_values_name_the_flag():
    parse = _parser().parse_args
    with pytest.raises(UsageError, match=r"argument --value/--old_value: invalid int value: 'x'"):
        parse(["--value=x"])
    with pytest.raises(UsageError, match=r"argument --format: invalid choice: 'c' \(choose from "
                                         r"'a', 'b'\)"):
        parse(["--format=c"])
    with pytest.raises(UsageError, match=r"unrecognized arguments: --valu=1 stray"):
        parse(["--valu=1", "stray"])


def test_positional_arguments_are_required():
    parser = FlagParser("tool", "test")
    parser.add_flag("module")
    assert parser.parse_args(["m.vmfb"]).module == "m.vmfb"
    with pytest.raises(UsageError, match=r"the following arguments are required: module"):
        parser.parse_args([])


def test_flagfiles_expand_in_place_and_nest(tmp_path):
    inner = tmp_path / "inner.txt"
    inner.write_text("--item=2\n")
    outer = tmp_path / "outer.txt"
    outer.write_text(f"# a comment\n\n--item=1\n--flagfile={inner}\n--item=3\n")
    args = _parser().parse_args(["--item=0", "--flagfile", str(outer), "--item=4"])
    assert args.item == ["0", "1", "2", "3", "4"]
    with pytest.raises(UsageError, match=r"--flagfile=.*absent.txt: cannot read it"):
        _parser().parse_args([f"--flagfile={tmp_path / 'absent.txt'}"])
    loop = tmp_path / "loop.txt"
    loop.write_text(f"--flagfile={loop}\n")
    with pytest.raises(UsageError, match=r"nest more than 8 deep"):
        _parser().parse_args([f"--flagfile={loop}"])


def test_help_lists_every_spelling(capsys):
    with pytest.raises(SystemExit) as exit:
        _parser().parse_args(["--on", "--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tool [--flag=VALUE ...]\n\ntest\n")
    for spelling in ("--on\n      a switch", "--list[=WHAT]", "--value=VALUE, --old_value=VALUE",
                     "--format=a|b", "--flagfile=PATH", "--help"):
        assert spelling in out


def test_tools_run_with_stdout_closed(tmp_path):
    """Started with stdout closed (a daemon, ``cmd >&-``), every tool runs as it would with it
    open: Python left ``sys.stdout`` None and the first print was a traceback (pyree-compile
    had written its module, then failed)."""
    import subprocess
    import sys

    source = tmp_path / "add.mlir"
    source.write_text("func.func @add(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {\n"
                      "  %0 = arith.addf %a, %b : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}\n")
    module = tmp_path / "add.vmfb"
    closed = dict(stdout=None, stderr=subprocess.PIPE, text=True, close_fds=True,
                  preexec_fn=lambda: __import__("os").close(1))
    runs = [["pyree.compiler.tools.compile", str(source), "-o", str(module)],
            ["pyree.runtime.tools.run_module", f"--module={module}", "--input=3xf32=1",
             "--input=3xf32=2"],
            ["pyree.runtime.tools.dump_module", str(module)]]
    for args in runs:
        proc = subprocess.run([sys.executable, "-m", *args], **closed)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert module.stat().st_size > 0


def test_dump_module_refuses_a_device_instead_of_reading_it_forever():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.dump_module", "/dev/zero"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "'/dev/zero' is not a regular file" in proc.stderr
