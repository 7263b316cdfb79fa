"""The module reader's unpack (pyree.runtime.module.unpack) gives the tree the generated object
API gives: the same classes, fields and values, on random trees that set or leave out every
field of every table (each scalar type's extremes, -0.0, inf and NaN, empty vectors, non-ASCII
strings) and on the compiler's output for every target, read through ``read_module``."""

from __future__ import annotations

import importlib
import math
import random
import struct

import flatbuffers
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.runtime import _fb
from pyree.runtime.module.bounds import check_bounds
from pyree.runtime.module.layout import DATA_REF, ROOT, TABLES
from pyree.runtime.module.unpack import unpack
from tooling import require_tool

FLOATS = (0.0, -0.0, 1.5, -3.25e-7, math.inf, -math.inf, math.nan)


def _compiler_class(name: str):
    return getattr(importlib.import_module(f"pyree.compiler._fb.{name}"), f"{name}T")


def _scalar(rng: random.Random, fmt: str):
    code = fmt[1:]
    if code == "?":
        return rng.random() < 0.5
    if code in "fd":
        return rng.choice(FLOATS)
    bits = 8 * struct.calcsize(fmt)
    low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if code.islower() else (0, (1 << bits) - 1)
    return rng.choice((low, high, 0, 1, rng.randint(low, high)))


def _text(rng: random.Random) -> str:
    return "".join(rng.choice("ab_0é✓") for _ in range(rng.randrange(6)))


def _tree(rng: random.Random, name: str, depth: int):
    """A compiler-side T object of table ``name``, each field set or left out at random."""
    out = _compiler_class(name)()
    for attribute, kind in TABLES[name]:
        if rng.random() < 0.2:
            continue   # absent: the default
        if kind == DATA_REF:
            value = _compiler_class("DataRef")()
            value.offset, value.length = _scalar(rng, "<Q"), _scalar(rng, "<Q")
        elif kind == "string":
            value = _text(rng)
        elif isinstance(kind, str):
            value = _scalar(rng, kind)
        elif kind[0] == "vector":
            value = [_scalar(rng, kind[1]) for _ in range(rng.randrange(4))]
        elif kind[0] == "strings":
            value = [_text(rng) for _ in range(rng.randrange(3))]
        elif depth > 4:
            continue
        elif kind[0] == "table":
            value = _tree(rng, kind[1], depth + 1)
        else:
            value = [_tree(rng, kind[1], depth + 1) for _ in range(rng.randrange(3))]
        setattr(out, attribute, value)
    return out


def _same(a, b, where: str = "root") -> None:
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{where}: {a} vs {b}"
    elif hasattr(a, "__dict__"):
        assert list(vars(a)) == list(vars(b)), where
        for key, value in vars(a).items():
            _same(value, vars(b)[key], f"{where}.{key}")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def _generated(buf):
    return _fb.ModuleT.InitFromObj(_fb.Module.GetRootAs(buf, 0))


@pytest.mark.parametrize("seed", range(40))
def test_random_trees_unpack_as_the_generated_code_does(seed):
    builder = flatbuffers.Builder(1024)
    builder.Finish(_tree(random.Random(seed), ROOT, 0).Pack(builder), file_identifier=b"PYRE")
    buf = bytes(builder.Output())
    check_bounds(buf)
    _same(_generated(buf), unpack(buf))


def test_the_compilers_modules_unpack_as_the_generated_code_does():
    require_tool("ptxas", env="PYREE_PTXAS")
    require_tool("ld.lld", env="PYREE_LLD")
    text = """
    func.func @f(%a: tensor<?x5xf32>, %b: tensor<5xf32>) -> tensor<?x5xf32> {
      %c = arith.constant dense<[1.0, -0.0, 2.5, 3.0, -1.0]> : tensor<5xf32>
      %i0 = arith.constant 0 : index
      %d = tensor.dim %a, %i0 : tensor<?x5xf32>
      %0 = tensor.empty(%d) : tensor<?x5xf32>
      %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
          affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
          iterator_types = ["parallel", "parallel"]}
          ins(%a, %b, %c : tensor<?x5xf32>, tensor<5xf32>, tensor<5xf32>) outs(%0 : tensor<?x5xf32>) {
        ^bb0(%x: f32, %y: f32, %z: f32, %o: f32):
          %s = arith.addf %x, %y : f32
          %t = arith.mulf %s, %z : f32
          linalg.yield %t : f32
      } -> tensor<?x5xf32>
      return %r : tensor<?x5xf32>
    }
    """
    data = compile_str(text, CompileOptions(
        target_backends=["llvm-cpu", "cuda", "vulkan-spirv", "rocm"]))
    module = rt.read_module(data)
    assert module.tree.functions[0].symbols  # a function with run-time sizes
    root = memoryview(data)[:int.from_bytes(data[-40:-32], "little")]
    _same(_generated(root), unpack(root))
