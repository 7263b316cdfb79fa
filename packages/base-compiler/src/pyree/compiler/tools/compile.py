"""``pyree-compile``: MLIR file in, ``.vmfb`` module file out (IREE's ``iree-compile`` flags).

    pyree-compile model.mlir -o model.vmfb --pyree-hal-target-backends=llvm-cpu

The flags are the table in ``pyree.compiler.flags`` (docs/FLAGS.md): every ``--pyree-*`` flag
has its ``--iree-*`` spelling as an alias, so commands from IREE's deployment guides work
unchanged. Exit status: 0 ok, 1 compile error (one paragraph on stderr, never a traceback),
2 usage error, 130 interrupted (Ctrl-C).

A compile that runs longer than ``PROGRESS_AFTER`` seconds (a large model) prints short stage
lines to stderr, so that a long silence is not mistaken for a hang; ``--pyree-progress`` prints
them from the start and ``--no-pyree-progress`` never. IREE has no such flag.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from pyree.compiler.errors import CompileError
from pyree.compiler.flags import FlagError, add_compile_flags, flag_values
from pyree.compiler.options import TARGET_BACKENDS, CompileOptions
from pyree.compiler.output_file import write_output
from pyree.compiler.progress import StageLines
from pyree.compiler.tools import interrupt
from pyree.compiler.tools.standard_streams import keep_standard_streams
from pyree.compiler.tools.tool_parser import ToolParser

# Seconds of silence before pyree-compile starts printing stage lines.
PROGRESS_AFTER = 2.0


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        prog="pyree-compile", allow_abbrev=False,
        description="Compile an MLIR file (func/arith/math/tensor/linalg, StableHLO, TOSA) into "
                    "a self-contained pyree module file (.vmfb). docs/FLAGS.md lists every flag.")
    p.add_argument("input", metavar="INPUT", nargs="?",
                   help="MLIR file to compile, or '-' for stdin")
    p.add_argument("-o", "--output-file", "--output_file", dest="output", default="-",
                   metavar="OUTPUT", help="module file to write ('-' for stdout, the default)")
    add_compile_flags(p)
    p.add_argument("--pyree-hal-list-target-backends", "--iree-hal-list-target-backends",
                   dest="list_backends", action="store_true",
                   help="list the target backends and exit")
    p.add_argument("--pyree-llvmcpu-list-targets", "--iree-llvmcpu-list-targets",
                   dest="list_cpu_targets", action="store_true",
                   help="list the llvm-cpu target triple and CPU names and exit")
    return p


def _options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> CompileOptions:
    try:
        values = flag_values(args)
    except FlagError as e:
        parser.error(e.message)
    progress = values.pop("progress", None)  # --pyree-progress / --no-pyree-progress
    if progress is not False:
        values["progress"] = StageLines(0.0 if progress else PROGRESS_AFTER)
    return replace(CompileOptions(), **values)


def _print_listings(args: argparse.Namespace) -> bool:
    """Answers --iree-hal-list-target-backends / --iree-llvmcpu-list-targets."""
    if args.list_backends:
        print("Registered target backends:")
        for name in TARGET_BACKENDS:
            print(f"  {name}")
    if args.list_cpu_targets:
        from pyree.compiler.codegen.llvm_cpu.cpus import CPUS
        from pyree.compiler.codegen.llvm_cpu.targets import TRIPLE

        print(f"  Registered Targets:\n    x86-64     - 64-bit X86 ({TRIPLE})\n  CPUs: host, "
              f"generic, {', '.join(sorted(CPUS))}")
    return args.list_backends or args.list_cpu_targets


def main(argv: list[str] | None = None) -> int:
    """Compiles as the command line asks. Run as a process (``argv`` None), it ends with
    ``os._exit`` once stdout and stderr are flushed: freeing a large model's IR at the
    interpreter's exit took ~0.3 s of a 4 s MobileNet v2 compile, for nothing. Ctrl-C ends it
    within about a second, with one line and status 130 (interrupt.py)."""
    if argv is None:
        keep_standard_streams()
        interrupt.watch("pyree-compile")
    try:
        code = _compile(argv)
    except KeyboardInterrupt:
        code = interrupt.interrupted("pyree-compile")
    if argv is not None:
        return code
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def _compile(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)  # exits with status 2 on usage errors
    if _print_listings(args):
        return 0
    if args.input is None:
        parser.error("the following arguments are required: INPUT")
    options = _options(args, parser)
    try:
        from pyree.compiler.pipeline import compile_file, compile_str, size_text

        if args.input == "-":
            module = compile_str(sys.stdin.read(), options, source_name="<stdin>")
        else:
            module = compile_file(args.input, options)
        if args.output == "-":
            sys.stdout.buffer.write(module)
            sys.stdout.buffer.flush()
        else:
            write_output(args.output, module)
        if options.progress:
            where = "stdout" if args.output == "-" else args.output
            options.progress(f"wrote {where} ({size_text(len(module))})")
    except CompileError as err:
        print(err, file=sys.stderr)
        return 1
    except OSError as err:
        where = err.filename or args.output
        print(f"pyree-compile: error: {where}: {err.strerror or err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - a compiler bug: one paragraph, not a traceback
        print(f"pyree-compile: internal compiler error: {type(err).__name__}: {err}. "
              "Please report this with the input file.", file=sys.stderr)
        return 1
    finally:
        if options.progress:
            options.progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
