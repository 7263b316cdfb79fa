"""The flags and the `main` wrapper every pyree tool shares.

Flags are spelled as IREE spells them (``--device=local-task`` or ``--device local-task``;
flags.py parses them).
Whatever goes wrong reaches the user as one paragraph on stderr, ``error: ...``, never a
traceback: exit 2 for a bad command line (flags, input strings, function names), 1 for a module,
device or file that fails, 130 when interrupted.
"""

from __future__ import annotations

import os
import sys

import pyree.runtime as rt
from pyree.runtime import flags as runtime_flags
from pyree.runtime.hal import tool_process
from pyree.runtime.tools.flags import FlagParser, UsageError
from pyree.runtime.tools.io_format import InputError

TYPE_CHECKING = False  # annotations only (collections.abc: an import for the tools' start)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import SimpleNamespace
    from typing import NoReturn

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class ToolError(Exception):
    """A tool-level failure that is not the runtime's (e.g. nothing to check); exits 1."""


def add_device_flags(parser: FlagParser) -> None:
    parser.add_flag(
        "--device",
        default="local-task",
        metavar="URI",
        help="device URI: local-task, local-sync, cuda, cuda://0, vulkan, ... "
        "(default: local-task)",
    )
    parser.add_flag(
        "--list_drivers",
        switch=True,
        help="list installed HAL drivers, and why any is unavailable, then exit",
    )
    parser.add_flag(
        "--list_devices",
        const="",
        metavar="DRIVER",
        help="list the devices of every available driver (or of DRIVER), then exit",
    )
    parser.add_flag(
        "--dump_devices",
        const="",
        metavar="DRIVER",
        help="describe the devices of every installed driver (or of DRIVER) in IREE's layout, "
        "then exit",
    )
    for name, (default, help) in runtime_flags.FLAGS.items():
        parser.add_flag(f"--{name}", parse=_runtime_flag(name), default=default, metavar="N",
                        help=f"{help} (default: {default})")


def _runtime_flag(name: str) -> Callable[[str], int]:
    """A runtime flag's parser: it sets the flag as it reads it, through the same
    ``pyree.runtime.flags.parse_flags`` IREE's Python users call, so the device the tool opens
    next is created with it (IREE's flags are process-wide too)."""

    def parse(text: str) -> int:
        try:
            runtime_flags.parse_flags(f"--{name}={text}")
        except rt.InvocationError as e:
            raise UsageError(str(e)) from None
        return int(text)

    return parse


def add_parameter_flags(parser: FlagParser) -> None:
    parser.add_flag(
        "--parameters",
        repeated=True,
        metavar="[SCOPE=]FILE",
        help="a parameter file (.irpa or .safetensors) for the module's external constants of "
        "SCOPE (none: the empty scope); repeatable; CPU devices use it in place (docs/PARAMETERS.md)",
    )


def print_listings(args: SimpleNamespace) -> bool:
    """Answers --list_drivers / --list_devices / --dump_devices; returns whether one was asked
    for."""
    if args.list_drivers:
        for info in rt.list_drivers():
            state = "available" if info.available else f"unavailable: {info.reason}"
            print(f"{info.name:>12}: {state}")
    if args.list_devices is not None:
        for device in rt.list_devices(args.list_devices or None):
            print(f"{device.uri:<24} {device.name}")
    if args.dump_devices is not None:
        _dump_devices(args.dump_devices)
    return bool(args.list_drivers) or args.list_devices is not None \
        or args.dump_devices is not None


_HEADER = "# " + "=" * 76
_SEPARATOR = "# ===" + "-" * 70 + "==="


def _dump_devices(driver: str) -> None:
    """IREE's --dump_devices layout: a header per driver, a block per device. Every installed
    driver is shown (an unavailable one says why); a driver named and not available is an
    error, as in IREE."""
    infos = [info for info in rt.list_drivers() if not driver or info.name == driver]
    if driver and not (infos and infos[0].available):
        rt.list_devices(driver)  # raises the error that says why
    for index, info in enumerate(infos):
        if index:
            print()
        print(f"{_HEADER}\n# Enumerated devices for driver '{info.name}'\n{_HEADER}\n")
        if not info.available:
            print(f"#   unavailable: {info.reason}")
            continue
        for device in rt.list_devices(info.name):
            print(f"{_SEPARATOR}\n# --device={device.uri}\n#   {device.name}\n{_SEPARATOR}")


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
    """A tool's ``main``: ``run_tool``, then exit. Run as a process (``argv`` None), it first tells
    the drivers so (hal/tool_process.py), makes sure Ctrl-C is never lost in a finalizer, and
    ends with ``os._exit`` once stdout and stderr are flushed: the interpreter's teardown
    (module and thread clean-up) is a noticeable part of a short ``pyree-run-module``, for
    nothing a one-shot process keeps; every file a tool writes is closed before ``body``
    returns."""
    if argv is None:
        keep_standard_streams()
        os.environ.setdefault(tool_process.VARIABLE, "1")
        sys.unraisablehook = _interrupts_end_the_tool(sys.unraisablehook)
    code = run_tool(body, argv)
    if argv is not None:
        sys.exit(code)
    _exit(code)


def keep_standard_streams() -> None:
    """A tool started with stdout or stderr closed (a daemon, ``cmd >&-``) writes them to
    /dev/null: Python leaves ``sys.stdout`` None there, and the first print ended the tool
    with a traceback. The descriptor is taken first, so no file the tool opens becomes it."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "w", closefd=False))  # noqa: SIM115  (the process's own)


def _exit(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def _interrupts_end_the_tool(hook):
    """``sys.unraisablehook`` for a tool process: Ctrl-C that lands in a finalizer (a result's
    ``__del__`` as a benchmark drops it) is raised there, where Python can only report it as
    unraisable and carry on, so the tool never stopped; raised again from here it would be lost
    the same way. The tool ends here instead, as it would have (every other unraisable error
    goes to ``hook``)."""
    def end_or_report(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _exit(_fail("interrupted", EXIT_INTERRUPTED))
        hook(unraisable)
    return end_or_report


def _fail(message: str, code: int) -> int:
    sys.stdout.flush()
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return code
