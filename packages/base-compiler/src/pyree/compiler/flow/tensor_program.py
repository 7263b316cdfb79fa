"""The tensor program: a function after normalization, as a list of ops on SSA tensor values.

The MLIR front end (``pyree.compiler.input``) lowers every accepted op (arith/math on tensors,
linalg named ops and generics, tensor slicing/padding, constants, check ops) into these few ops.
Dispatch-region formation (``pyree.compiler.flow.regions``) then fuses ``Generic`` ops into
kernels. ``Generic`` reuses the kernel IR's expressions: inside a Generic, ``Load(binding=i)``
reads ``inputs[i]`` and ``Result.binding = k`` writes ``results[k]``; fusion only rebinds indices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np
from pyree.compiler.kernel import Result, itemsize


@dataclass(eq=False)
class Value:
    """An SSA tensor value. Identity is the object: two Values are equal only if they are one."""

    dtype: str
    shape: tuple[int, ...]
    name: str = ""

    @property
    def num_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * itemsize(self.dtype)

    def __repr__(self) -> str:
        return f"%{self.name or id(self)}: {'x'.join(map(str, self.shape + (self.dtype,)))}"


@dataclass(eq=False)
class Generic:
    """linalg.generic, normalized: loops parallel-first, outs reads made explicit.

    A parallel-only generic that reads its outs operand has it as an ordinary input. A reduction's
    starting value is ``Result.init`` (usually a Load of the outs operand, or a Const when the outs
    came from a fill that normalization folded in).
    """

    inputs: list[Value]
    results: list[Value]
    outputs: tuple[Result, ...]
    loop_ranges: tuple[int, ...]
    num_parallel: int
    location: str = ""
    # The source op's name (e.g. "linalg.matmul"), for --pyree-print-ir-after-all and errors.
    origin: str = "linalg.generic"


@dataclass(eq=False)
class Constant:
    """A constant tensor: dense bytes, or a splat (one scalar everywhere) stored as a fill."""

    result: Value
    data: np.ndarray | None = None  # shape == result.shape, dtype matches; None for splats
    splat: Union[float, int, bool, None] = None
    location: str = ""


@dataclass(eq=False)
class View:
    """The same bytes under another shape (collapse/expand_shape, reshape): no data moves."""

    result: Value
    source: Value
    byte_offset: int = 0
    location: str = ""


@dataclass(eq=False)
class Check:
    """IREE's check dialect. kind: expect_true, expect_false, expect_all_true, expect_eq,
    expect_almost_eq (the *_const forms arrive with ``rhs`` a Constant's value)."""

    kind: str
    lhs: Value
    rhs: Value | None = None
    atol: float = 1e-4
    rtol: float = 0.0
    location: str = ""


Op = Union[Generic, Constant, View, Check]


@dataclass(eq=False)
class Function:
    name: str
    arguments: list[Value]
    ops: list[Op]
    results: list[Value]
    location: str = ""


@dataclass(eq=False)
class Program:
    functions: list[Function] = field(default_factory=list)
    name: str = "module"
