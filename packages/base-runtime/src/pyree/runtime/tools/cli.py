"""Flag parsing and the `main` wrapper every pyree tool shares.

Flags are spelled as IREE spells them (``--device=local-task`` or ``--device local-task``).
Whatever goes wrong reaches the user as one paragraph on stderr, ``error: ...``, never a
traceback: exit 2 for a bad command line (flags, input strings, function names), 1 for a module,
device or file that fails, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence

import pyree.runtime as rt
from pyree.runtime.tools.io_format import InputError

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """The command line asks for something that cannot be done; the message says what and where."""


class ToolError(Exception):
    """A tool-level failure that is not the runtime's (e.g. nothing to check); exits 1."""


class FlagParser(argparse.ArgumentParser):
    """argparse for IREE-style flags; raises UsageError instead of printing usage and exiting.
    ``--flagfile=PATH`` (IREE's) reads more flags from PATH, one per line (blank lines and lines
    starting with ``#`` skipped), in its place on the command line."""

    def __init__(self, prog: str, description: str):
        super().__init__(prog=prog, description=description, allow_abbrev=False,
                         formatter_class=_help_formatter())
        self.add_argument("--flagfile", metavar="PATH",
                          help="read more flags from PATH, one per line")

    def parse_known_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(_expand_flagfiles(argv), namespace)

    def error(self, message: str):
        raise UsageError(f"{message} (see {self.prog} --help)")


def _help_formatter():
    """argparse's help formatter at the terminal's width, found with os alone: argparse's own
    lookup (shutil.get_terminal_size, on every add_argument) imports shutil, and with it bz2,
    lzma and zlib: ~3 ms of every tool's start."""
    columns = os.environ.get("COLUMNS", "")
    if not columns.isdigit() or int(columns) <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    return functools.partial(argparse.HelpFormatter, width=int(columns) - 2)


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


def add_device_flags(parser: FlagParser) -> None:
    parser.add_argument(
        "--device",
        default="local-task",
        help="device URI: local-task, local-sync, cuda, cuda://0, vulkan, ... "
        "(default: local-task)",
    )
    parser.add_argument(
        "--list_drivers",
        action="store_true",
        help="list installed HAL drivers, and why any is unavailable, then exit",
    )
    parser.add_argument(
        "--list_devices",
        nargs="?",
        const="",
        metavar="DRIVER",
        help="list the devices of every available driver (or of DRIVER), then exit",
    )


def add_parameter_flags(parser: FlagParser) -> None:
    parser.add_argument(
        "--parameters",
        action="append",
        default=[],
        metavar="[SCOPE=]FILE",
        help="a parameter file (.irpa or .safetensors) for the module's external constants of "
        "SCOPE (none: the empty scope); repeatable, mapped rather than read (docs/PARAMETERS.md)",
    )


def print_listings(args: argparse.Namespace) -> bool:
    """Answers --list_drivers / --list_devices; returns whether either was asked for."""
    if args.list_drivers:
        for info in rt.list_drivers():
            state = "available" if info.available else f"unavailable: {info.reason}"
            print(f"{info.name:>12}: {state}")
    if args.list_devices is not None:
        for device in rt.list_devices(args.list_devices or None):
            print(f"{device.uri:<24} {device.name}")
    return bool(args.list_drivers) or args.list_devices is not None


def run_tool(body: Callable[[Sequence[str]], int], argv: Sequence[str] | None) -> int:
    """Runs ``body(argv)``; turns every failure into one ``error:`` paragraph and an exit code."""
    try:
        return body(sys.argv[1:] if argv is None else list(argv))
    except (UsageError, InputError) as e:
        return _fail(str(e), EXIT_USAGE)
    except (rt.PyreeError, ToolError) as e:
        return _fail(str(e), EXIT_FAILURE)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        return _fail(f"{where}{e.strerror or e}", EXIT_FAILURE)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except MemoryError as e:
        return _fail(f"out of host memory: {e}", EXIT_FAILURE)
    except Exception as e:  # a bug in pyree itself: still one paragraph, never a traceback
        return _fail(f"internal error ({type(e).__name__}): {e}", EXIT_FAILURE)


def tool_main(body: Callable[[Sequence[str]], int], argv: Sequence[str] | None) -> None:
    """A tool's ``main``: ``run_tool``, then exit. Run as a process (``argv`` None), it ends with
    ``os._exit`` once stdout and stderr are flushed: the interpreter's teardown (module and thread
    clean-up) was ~4 ms of a 57 ms ``pyree-run-module`` (issue 13), for nothing a one-shot process
    keeps; every file a tool writes is closed before ``body`` returns."""
    code = run_tool(body, argv)
    if argv is not None:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def _fail(message: str, code: int) -> int:
    sys.stdout.flush()
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return code
