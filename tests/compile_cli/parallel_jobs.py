"""Job functions for test_parallel.py: module-level, so that a spawned worker can import them."""

from pyree.compiler.errors import CompileError


def square_or_fail(value: int) -> int:
    """value², but 3 is refused as a compile error and 5 raises as a compiler bug would."""
    if value == 3:
        raise CompileError("three is refused", "in.mlir:3:1")
    if value == 5:
        raise KeyError("five")
    return value * value


def square_slowly(value: int) -> int:
    """value², after 0.2 s: time enough for the parent to take every job it may take ahead."""
    import time

    time.sleep(0.2)
    return value * value


def pid_of(_) -> int:
    import os

    return os.getpid()


def spin_forever(path: str) -> None:
    """Writes the worker's pid to ``path``, then never returns (torch-mlir's loop on an ONNX
    Pad of mode wrap did that) and never reads its connection."""
    import os

    with open(path, "w") as f:
        f.write(str(os.getpid()))
    while True:
        pass
