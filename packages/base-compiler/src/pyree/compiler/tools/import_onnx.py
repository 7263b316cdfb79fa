"""``pyree-import-onnx``: ONNX file in, linalg-on-tensors MLIR out (IREE's ``iree-import-onnx``).

    pyree-import-onnx model.onnx -o model.mlir
    pyree-compile model.mlir -o model.vmfb --pyree-hal-target-backends=llvm-cpu

IREE's tool stops at the torch-onnx dialect and leaves the rest to iree-compile; pyree's
compiler reads linalg-on-tensors, so this tool also runs torch-mlir's lowering pipelines. The
flags are IREE's where they apply. Exit status: 0 ok, 1 import error (one paragraph on stderr,
never a traceback), 2 usage error, 130 interrupted (Ctrl-C). Needs
``pip install pyree-base-compiler[onnx]``.
"""

from __future__ import annotations

import argparse
import sys

from pyree.compiler.errors import CompileError
from pyree.compiler.output_file import write_output
from pyree.compiler.tools import interrupt
from pyree.compiler.tools.standard_streams import keep_standard_streams
from pyree.compiler.tools.tool_parser import ToolParser


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        prog="pyree-import-onnx",
        description="Import an ONNX model as linalg-on-tensors MLIR for pyree-compile "
                    "(through torch-mlir).")
    p.add_argument("input", metavar="INPUT", help="ONNX model file (.onnx)")
    p.add_argument("-o", dest="output", default="-", metavar="OUTPUT",
                   help="MLIR file to write ('-' for stdout, the default)")
    p.add_argument("--opset-version", type=int, metavar="N",
                   help="upgrade the model to this ONNX opset before importing")
    p.add_argument("--data-prop", default=True, action=argparse.BooleanOptionalAction,
                   help="let ONNX shape inference propagate constant shapes (default on)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="where the model's external data files are (default: its folder)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Imports as the command line asks; run as a process (``argv`` None), Ctrl-C ends it
    within about a second, with one line and status 130 (interrupt.py)."""
    if argv is None:
        keep_standard_streams()
        interrupt.watch("pyree-import-onnx")
    try:
        return _import(argv)
    except KeyboardInterrupt:
        return interrupt.interrupted("pyree-import-onnx")


def _import(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)  # exits with status 2 on usage errors
    from pyree.compiler.importers.onnx import import_onnx

    try:
        # torch-mlir runs in a worker process (importers/onnx_apart.py): it holds the GIL
        # through each pass pipeline, which would keep Ctrl-C waiting here for seconds, and
        # some models crash it
        text = import_onnx(args.input, opset_version=args.opset_version,
                           data_prop=args.data_prop, data_dir=args.data_dir)
        if args.output == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_output(args.output, text)
    except CompileError as err:
        print(err, file=sys.stderr)
        return 1
    except OSError as err:
        print(f"pyree-import-onnx: error: {err.filename or args.output}: {err.strerror or err}",
              file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - an importer bug: one paragraph, not a traceback
        print(f"pyree-import-onnx: internal error: {type(err).__name__}: {err}. "
              "Please report this with the model file.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
