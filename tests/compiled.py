"""Module bytes memoized per (MLIR text, options) in a test process: a test that runs one program
on several inputs, states or devices compiles it once (pytest-xdist keeps a file's tests in one
worker). Only for tests of what a module does; a test of the compiler itself calls compile_str."""

from __future__ import annotations

import hashlib

from pyree.compiler import CompileOptions, compile_str

_MODULES: dict[tuple[bytes, str], bytes] = {}


def compiled(text: str, options: CompileOptions) -> bytes:
    # keyed by the text's digest: a model's text (ResNet-18's is 94 MB of weights) is not kept
    key = hashlib.sha256(text.encode()).digest(), repr(options)
    if key not in _MODULES:
        _MODULES[key] = compile_str(text, options)
    return _MODULES[key]
