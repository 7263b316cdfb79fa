"""The runtime tools' flag table and its parser: IREE's spellings, without argparse.

A tool declares its flags (``add_flag``) and gets a namespace back: ``--name=value`` or ``--name
value``; a switch as ``--name`` or ``--name=true|false|1|0``; a flag with ``const`` takes its
value only after ``=`` or as the next argument that is not a flag; repeated flags collect a list,
other flags keep the last value; ``--flagfile=PATH`` (IREE's) reads more flags from PATH, one per
line (blank lines and ``#`` lines skipped), in its place. Abbreviations are refused. Every mistake
is a UsageError naming the flag, in argparse's words (``unrecognized arguments: ...``,
``argument --x: invalid int value: 'y'``), without argparse: its import with gettext and locale,
and its parse, are a noticeable part of every tool's start.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

TYPE_CHECKING = False  # annotations only (collections.abc: an import for the tools' start)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


class UsageError(Exception):
    """The command line asks for something that cannot be done; the message says what and where."""


class Flag:
    """One flag (or, named without ``--``, a required positional argument)."""

    def __init__(self, names: Sequence[str], *, default=None, help: str = "", metavar: str = "",
                 dest: str = "", parse: Callable[[str], object] | None = None,
                 choices: Sequence[str] = (), switch: bool = False, repeated: bool = False,
                 const: str | None = None):
        self.names, self.help, self.parse, self.choices = tuple(names), help, parse, choices
        self.switch, self.repeated, self.const = switch, repeated, const
        self.default = False if switch else default
        self.positional = not names[0].startswith("-")
        self.dest = dest or names[0].lstrip("-").replace("-", "_")
        self.metavar = metavar or "|".join(choices) or (
            self.dest if self.positional else self.dest.upper())

    def convert(self, text: str):
        """``text`` as this flag's value (UsageError when it is not one)."""
        if self.switch:
            if text.lower() not in _BOOLEANS:
                raise UsageError(f"{self._label()}: expected true or false, got '{text}'")
            return _BOOLEANS[text.lower()]
        if self.choices and text not in self.choices:
            choices = ", ".join(f"'{c}'" for c in self.choices)
            raise UsageError(f"{self._label()}: invalid choice: '{text}' (choose from {choices})")
        if self.parse is None:
            return text
        try:
            return self.parse(text)
        except ValueError:
            raise UsageError(f"{self._label()}: invalid {self.parse.__name__} value: "
                             f"'{text}'") from None

    def _label(self) -> str:
        return f"argument {'/'.join(self.names)}"

    def spelling(self) -> str:
        """How --help shows it: ``--device=URI, --other=URI``, ``--list_drivers``."""
        if self.positional:
            return self.metavar
        value = "" if self.switch else f"[={self.metavar}]" if self.const is not None \
            else f"={self.metavar}"
        return ", ".join(name + value for name in self.names)


class FlagParser:
    """A tool's flags, parsed in one pass over the command line."""

    def __init__(self, prog: str, description: str):
        self.prog, self.description = prog, description
        self.flags: list[Flag] = []
        self._by_name: dict[str, Flag] = {}
        self.add_flag("--flagfile", metavar="PATH", help="read more flags from PATH, one per line")

    def add_flag(self, *names: str, **options) -> None:
        """Declares a flag (Flag's keywords); its value is ``args.<dest>`` after parsing."""
        flag = Flag(names, **options)
        self.flags.append(flag)
        self._by_name.update(dict.fromkeys(names, flag))

    def parse_args(self, argv: Sequence[str]) -> SimpleNamespace:
        """The flags' values (defaults where not given); ``--help`` prints the help and exits."""
        argv = _expand_flagfiles(list(argv))
        values = {f.dest: list(f.default or ()) if f.repeated else f.default for f in self.flags}
        positionals, unknown = [], []
        index = 0
        while index < len(argv):
            item = argv[index]
            index += 1
            if item in ("-h", "--help"):
                print(self.help())
                raise SystemExit(0)
            if item == "--version":
                from pyree.runtime import __version__

                print(f"{self.prog} {__version__} (pyree-base-runtime)")
                raise SystemExit(0)
            if not _is_flag(item):
                positionals.append(item)
                continue
            name, has_value, text = item.partition("=")
            flag = self._by_name.get(name)
            if flag is None or flag.positional:
                unknown.append(item)
                continue
            if not has_value:
                if flag.switch:
                    text = "true"
                elif index < len(argv) and not _is_flag(argv[index]):
                    text, index = argv[index], index + 1
                elif flag.const is not None:
                    text = flag.const
                else:
                    raise self._error(f"{flag._label()}: expected one argument")
            try:
                value = flag.convert(text)
            except UsageError as e:
                raise self._error(str(e)) from None
            if flag.repeated:
                values[flag.dest].append(value)
            else:
                values[flag.dest] = value
        wanted = [f for f in self.flags if f.positional]
        if len(positionals) < len(wanted):
            missing = ", ".join(f.dest for f in wanted[len(positionals):])
            raise self._error(f"the following arguments are required: {missing}")
        values.update((f.dest, text) for f, text in zip(wanted, positionals))
        unknown += positionals[len(wanted):]
        if unknown:
            raise self._error(f"unrecognized arguments: {' '.join(unknown)}")
        return SimpleNamespace(**values)

    def _error(self, message: str) -> UsageError:
        return UsageError(f"{message} (see {self.prog} --help)")

    def help(self) -> str:
        """Usage, description and one paragraph per flag, wrapped to the terminal."""
        import textwrap

        width = _terminal_width() - 2
        positionals = "".join(f" {f.metavar}" for f in self.flags if f.positional)
        lines = [f"usage: {self.prog} [--flag=VALUE ...]{positionals}", "", self.description, "",
                 "flags:"]
        for flag in self.flags + [Flag(["--help"], switch=True, help="show this help and exit"),
                                  Flag(["--version"], switch=True,
                                       help="show the tool's version and exit")]:
            lines.append(f"  {flag.spelling()}")
            lines += textwrap.wrap(flag.help, width, initial_indent=" " * 6,
                                   subsequent_indent=" " * 6)
        return "\n".join(lines)


def _is_flag(item: str) -> bool:
    """Whether a command-line item names a flag: ``-`` alone and negative numbers are values."""
    if not item.startswith("-") or item == "-":
        return False
    try:
        float(item)
    except ValueError:
        return True
    return False


def _terminal_width() -> int:
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


def _expand_flagfiles(argv: list[str], depth: int = 0) -> list[str]:
    expanded: list[str] = []
    items = iter(argv)
    for item in items:
        if item != "--flagfile" and not item.startswith("--flagfile="):
            expanded.append(item)
            continue
        path = item.partition("=")[2] if "=" in item else next(items, "")
        if not path:
            raise UsageError("--flagfile needs a file: --flagfile=flags.txt")
        if depth > 8:
            raise UsageError(f"--flagfile={path}: flag files nest more than 8 deep")
        try:
            with open(path) as f:
                lines = [line.strip() for line in f]
        except OSError as e:
            raise UsageError(f"--flagfile={path}: cannot read it ({e.strerror or e})") from None
        flags = [line for line in lines if line and not line.startswith("#")]
        expanded += _expand_flagfiles(flags, depth + 1)
    return expanded
