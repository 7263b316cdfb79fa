"""``pyree-compile``: MLIR file in, ``.vmfb`` module file out (IREE's ``iree-compile`` flags).

    pyree-compile model.mlir -o model.vmfb --pyree-hal-target-backends=llvm-cpu

Every ``--pyree-*`` flag has its ``--iree-*`` spelling as an alias, so commands from IREE's
deployment guides work unchanged. Exit status: 0 ok, 1 compile error (one paragraph on stderr,
never a traceback), 2 usage error.

A compile that runs longer than ``PROGRESS_AFTER`` seconds (a large model) prints short stage
lines to stderr, so that a long silence is not mistaken for a hang; ``--pyree-progress`` prints
them from the start and ``--no-pyree-progress`` never. IREE has no such flag.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from importlib.metadata import PackageNotFoundError, version

from pyree import compiler
from pyree.compiler.errors import CompileError
from pyree.compiler.options import TARGET_BACKENDS, CompileOptions

# Seconds of silence before pyree-compile starts printing stage lines.
PROGRESS_AFTER = 2.0

# IREE's --iree-hal-target-device names -> our backends.
_DEVICE_BACKENDS = {"local": "llvm-cpu", "llvm-cpu": "llvm-cpu", "cuda": "cuda", "hip": "rocm",
                    "rocm": "rocm", "vulkan": "vulkan-spirv", "vulkan-spirv": "vulkan-spirv"}
# --iree-hal-target-backends spellings of our backends' names.
_BACKEND_ALIASES = {"hip": "rocm"}


# Type-rewrite flags (IREE's spellings and defaults): flag, CompileOptions field, default.
_DEMOTIONS = (("demote-f64-to-f32", "demote_f64_to_f32", "false"),
              ("demote-i64-to-i32", "demote_i64_to_i32", "true for StableHLO input, else false"),
              ("promote-bf16-to-f32", "promote_bf16_to_f32", "false"))


def _bool(text: str) -> bool:
    """An LLVM-style boolean flag value: ``--flag``, ``--flag=true``, ``--flag=false``."""
    value = {"true": True, "1": True, "false": False, "0": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pyree-compile",
        description="Compile an MLIR file (func/arith/math/tensor/linalg) into a self-contained "
                    "pyree module file (.vmfb).")
    p.add_argument("input", metavar="INPUT", help="MLIR file to compile, or '-' for stdin")
    p.add_argument("-o", "--output-file", "--output_file", dest="output", default="-",
                   metavar="OUTPUT", help="module file to write ('-' for stdout, the default)")
    p.add_argument("--pyree-hal-target-backends", "--iree-hal-target-backends",
                   "--iree-hal-local-target-device-backends", dest="backends", action="append",
                   metavar="LIST", help="comma-separated backends to compile for: "
                   + ", ".join(TARGET_BACKENDS) + " (default llvm-cpu)")
    p.add_argument("--pyree-hal-target-device", "--iree-hal-target-device", dest="devices",
                   action="append", metavar="LIST",
                   help="IREE's device spelling: " + ", ".join(sorted(_DEVICE_BACKENDS)))
    p.add_argument("--pyree-llvmcpu-target-cpu", "--iree-llvmcpu-target-cpu", dest="cpu",
                   default="host", metavar="CPU",
                   help="host (default), generic, or an LLVM CPU name such as znver4")
    p.add_argument("--pyree-cuda-target", "--iree-cuda-target", dest="cuda_target",
                   default="sm_80", metavar="TARGET",
                   help="sm_<N>, a code name or a product name (default sm_80)")
    p.add_argument("--pyree-rocm-target-chip", "--iree-rocm-target-chip", "--iree-rocm-target",
                   "--iree-hip-target", dest="rocm_target", default="gfx908", metavar="CHIP",
                   help="gfx<N> or an AMD product name, optionally with :sramecc+/- and "
                   ":xnack+/- (default gfx908)")
    p.add_argument("--pyree-rocm-link-bc", "--iree-rocm-link-bc", dest="rocm_link_bc", nargs="?",
                   const=True, default=False, type=_bool, metavar="BOOL",
                   help="link AMD's device libraries (ocml) and call their math functions "
                   "(default false: pyree composes math from basic arithmetic itself)")
    p.add_argument("--pyree-rocm-bc-dir", "--iree-rocm-bc-dir", "--iree-hip-bc-dir",
                   dest="rocm_bc_dir", default="", metavar="DIR",
                   help="the ROCm device-library bitcode directory for --iree-rocm-link-bc "
                   "(default: the first of $ROCM_PATH/amdgcn/bitcode, /opt/rocm/amdgcn/bitcode, "
                   "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode that exists)")
    p.add_argument("--pyree-vulkan-target", "--iree-vulkan-target", dest="vulkan_target",
                   default="", metavar="TARGET", help="a target from IREE's Vulkan guide")
    p.add_argument("--pyree-input-type", "--iree-input-type", dest="input_type", default="auto",
                   metavar="TYPE", help="auto (default: detect from the op names), none, "
                   "stablehlo, or tosa (needs pyree-base-compiler[tosa])")
    for flag, dest, default in _DEMOTIONS:
        p.add_argument(f"--pyree-input-{flag}", f"--iree-input-{flag}", dest=dest, nargs="?",
                       const=True, type=_bool, metavar="BOOL",
                       help=f"{flag.replace('-', ' ')} before lowering; function "
                       f"signatures change too (default: {default})")
    p.add_argument("--pyree-print-ir-after-all", "--mlir-print-ir-after-all", dest="print_ir",
                   action="store_true", help="print the IR after each stage to stderr")
    p.add_argument("--pyree-progress", dest="progress", action=argparse.BooleanOptionalAction,
                   help="print a line to stderr as each stage starts (default: only once a "
                   f"compile has run {PROGRESS_AFTER:g} s)")
    p.add_argument("--version", action="version", version=f"pyree-compile {_version()}")
    return p


class _StageLines:
    """The ``progress`` callback of the CLI: stage lines with elapsed time, held back until the
    compile has run ``delay`` seconds (a timer then prints what was held), so that short
    compiles stay silent."""

    def __init__(self, delay: float):
        self._start = time.monotonic()
        self._held: list[str] = []
        self._live = delay <= 0
        self._lock = threading.Lock()
        self._timer = threading.Timer(delay, self._go_live)
        self._timer.daemon = True
        if not self._live:
            self._timer.start()

    def __call__(self, line: str) -> None:
        line = f"pyree-compile: [{time.monotonic() - self._start:6.1f}s] {line}"
        with self._lock:
            if self._live:
                print(line, file=sys.stderr, flush=True)
            else:
                self._held.append(line)

    def _go_live(self) -> None:
        with self._lock:
            self._live = True
            for line in self._held:
                print(line, file=sys.stderr, flush=True)
            self._held.clear()

    def close(self) -> None:
        self._timer.cancel()


def _version() -> str:
    try:
        return version("pyree-base-compiler")
    except PackageNotFoundError:
        return "unknown"


def _options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> CompileOptions:
    backends: list[str] = []
    for item in args.backends or []:
        names = (b.strip() for b in item.split(","))
        backends += [_BACKEND_ALIASES.get(b, b) for b in names if b]
    for item in args.devices or []:
        for device in (d.strip() for d in item.split(",") if d.strip()):
            if device not in _DEVICE_BACKENDS:
                parser.error(f"unknown target device '{device}'; known devices: "
                             + ", ".join(sorted(_DEVICE_BACKENDS)))
            backends.append(_DEVICE_BACKENDS[device])
    for backend in backends:
        if backend not in TARGET_BACKENDS:
            parser.error(f"unknown target backend '{backend}'; available backends: "
                         + ", ".join(TARGET_BACKENDS))
    progress = None
    if args.progress is not False:
        progress = _StageLines(0.0 if args.progress else PROGRESS_AFTER)
    return CompileOptions(
        target_backends=list(dict.fromkeys(backends)) or ["llvm-cpu"],
        llvmcpu_target_cpu=args.cpu, cuda_target=args.cuda_target, rocm_target=args.rocm_target,
        rocm_link_bc=args.rocm_link_bc, rocm_bc_dir=args.rocm_bc_dir,
        vulkan_target=args.vulkan_target, input_type=args.input_type,
        demote_f64_to_f32=bool(args.demote_f64_to_f32), demote_i64_to_i32=args.demote_i64_to_i32,
        promote_bf16_to_f32=bool(args.promote_bf16_to_f32),
        print_ir_after_all=args.print_ir, progress=progress)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)  # exits with status 2 on usage errors
    options = _options(args, parser)
    try:
        if args.input == "-":
            module = compiler.compile_str(sys.stdin.read(), options, source_name="<stdin>")
        else:
            module = compiler.compile_file(args.input, options)
        if args.output == "-":
            sys.stdout.buffer.write(module)
            sys.stdout.buffer.flush()
        else:
            with open(args.output, "wb") as f:
                f.write(module)
        if options.progress:
            from pyree.compiler.pipeline import size_text

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
