"""Module bytes memoized per (MLIR text, options) in a test process: a test that runs one program
on several inputs, states or devices compiles it once (pytest-xdist keeps a file's tests in one
worker). Only for tests of what a module does; a test of the compiler itself calls compile_str."""

from __future__ import annotations

from pyree.compiler import CompileOptions, compile_str

_MODULES: dict[tuple[str, str], bytes] = {}


def compiled(text: str, options: CompileOptions) -> bytes:
    key = text, repr(options)
    if key not in _MODULES:
        _MODULES[key] = compile_str(text, options)
    return _MODULES[key]
