"""``--iree-input-demote-f64-to-f32``, ``--iree-input-demote-i64-to-i32`` and
``--iree-input-promote-bf16-to-f32``: the parsed module with every f64 / i64 / bf16 element
type replaced, before lowering, as IREE's ``iree-util-demote-*`` passes do.

Types change everywhere: tensor element types, scalars, block arguments and function
signatures, so the compiled function takes and returns f32 / i32 (as IREE's does). Values
change only in constants (properties named ``value``: ``arith.constant``, the check/util
ops): other ops' typed attributes are structure (``arith.cmpi``'s predicate), as in IREE.
Casts that become same-type (``arith.extf`` f32->f64 is now f32->f32) are dropped; an op the
rewrite makes invalid (a bitcast whose sizes now differ: ``arith.bitcast`` f64->i64 with only
f64 demoted, JAX's f64 ``signbit``) and a random generator's 64-bit state (JAX's ``rbg``
keys) are refused by name, with the flags that keep the types.

An i64 constant outside i32's range is refused by name, except i64's own minimum and maximum,
which become i32's: they are the sentinels reductions start from (argmax's init), where IREE's
wrap-around would silently turn INT64_MIN into 0.
"""

from __future__ import annotations

import math

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.parser import location_of
from pyree.compiler.kernel.ir import DTYPES
from xdsl.dialects.builtin import (
    BFloat16Type,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    ShapedType,
    TensorType,
)
from xdsl.ir import Attribute, TypeAttribute
from xdsl.utils.exceptions import VerifyException

_I64 = (-(2**63), 2**63 - 1)
_I32 = (-(2**31), 2**31 - 1)
_CASTS = ("arith.extf", "arith.truncf", "arith.extsi", "arith.extui", "arith.trunci")
_BITCASTS = ("arith.bitcast", "stablehlo.bitcast_convert")


def demote_types(module: ModuleOp, f64_to_f32: bool, i64_to_i32: bool,
                 bf16_to_f32: bool) -> None:
    """Rewrites ``module`` in place; a no-op when every flag is off."""
    rewrite = _Rewrite(f64_to_f32, i64_to_i32, bf16_to_f32)
    if not rewrite.kinds:
        return
    for op in module.walk():  # a generator's state is words of bits: half of them is another key
        if op.name == "stablehlo.rng_bit_generator" and \
                rewrite.type(op.operands[0].type) is not op.operands[0].type:
            raise CompileError(f"'{op.name}' reads its state {op.operands[0].type} as 64-bit "
                               f"words, which {rewrite.flags()} would halve; {rewrite.off()}",
                               location_of(op))
    changed = False
    for op in list(module.walk()):
        for value in (*op.results, *(arg for r in op.regions for b in r.blocks for arg in b.args)):
            new = rewrite.type(value.type)
            if new is not value.type:
                value._type = new  # in place: uses keep their value
                changed = True
        for attrs in (op.properties, op.attributes):
            for name, attr in attrs.items():
                new = rewrite.value(attr, op) if name == "value" else \
                    rewrite.type(attr) if isinstance(attr, TypeAttribute) else attr
                if new is not attr:
                    attrs[name] = new
                    changed = True
    if not changed:
        return
    for op in list(module.walk()):
        if op.name in _CASTS and op.operands[0].type == op.results[0].type:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.detach()
            op.erase()
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
            if op.name in _BITCASTS and _bits(op.operands[0].type) != _bits(op.results[0].type):
                raise VerifyException(f"it casts {op.operands[0].type} to {op.results[0].type}")
        except (VerifyException, ValueError) as err:
            raise CompileError(f"'{op.name}' is invalid after {rewrite.flags()}: {err}; "
                               f"{rewrite.off()}", location_of(op)) from None


def f64_at_boundary(module: ModuleOp) -> bool:
    """Whether an f64 value crosses the module's boundary: a function's argument or result, or a
    global (state the caller sees across calls). Demoting only what lies inside keeps the
    signature the caller was compiled against."""
    f64 = _Rewrite(True, False, False)
    for op in module.walk():
        types = [op.properties.get("function_type"), op.properties.get("type")] \
            if op.name in ("func.func", "util.global", "ml_program.global") else []
        if any(t is not None and f64.type(t) is not t for t in types):
            return True
    return False


def f64_math_inside(module: ModuleOp) -> bool:
    """Whether a math-dialect op (exp, pow, tanh, ...) computes on f64."""
    f64 = _Rewrite(True, False, False)
    return any(op.name.startswith("math.") and any(f64.type(v.type) is not v.type
                                                   for v in (*op.operands, *op.results))
               for op in module.walk())


def _bits(t: Attribute) -> int | None:
    """The bits a bitcast's operand or result holds (None: a run-time size decides)."""
    if not isinstance(t, ShapedType):
        return getattr(t, "bitwidth", None)
    shape = t.get_shape()
    element = getattr(t.element_type, "bitwidth", None)
    return None if -1 in shape or element is None else math.prod(shape) * element


class _Rewrite:
    """The type map of the active flags, applied to types and to constant values."""

    def __init__(self, f64_to_f32: bool, i64_to_i32: bool, bf16_to_f32: bool):
        self.kinds = {k for k, on in (("f64", f64_to_f32), ("i64", i64_to_i32),
                                      ("bf16", bf16_to_f32)) if on}

    def flags(self) -> str:
        names = {"f64": "--iree-input-demote-f64-to-f32", "i64": "--iree-input-demote-i64-to-i32",
                 "bf16": "--iree-input-promote-bf16-to-f32"}
        return ", ".join(names[k] for k in sorted(self.kinds))

    def off(self) -> str:
        """How to compile without the active flags."""
        flags = " ".join(f"{flag}=false" for flag in self.flags().split(", "))
        return f"compile with {flags} to keep the types"

    def _kind(self, t: Attribute) -> str | None:
        if isinstance(t, Float64Type):
            kind = "f64"
        elif isinstance(t, BFloat16Type):
            kind = "bf16"
        elif isinstance(t, IntegerType) and t.width.data == 64:
            kind = "i64"
        else:
            return None
        return kind if kind in self.kinds else None

    def type(self, t: Attribute) -> Attribute:
        kind = self._kind(t)
        if kind == "i64":
            return IntegerType(32, t.signedness.data)
        if kind:
            return Float32Type()
        if isinstance(t, TensorType):
            element = self.type(t.element_type)
            return t if element is t.element_type else TensorType(element, t.shape, t.encoding)
        if isinstance(t, FunctionType):
            inputs, outputs = [self.type(i) for i in t.inputs], [self.type(o) for o in t.outputs]
            if [*inputs, *outputs] != [*t.inputs, *t.outputs]:
                return FunctionType.from_lists(inputs, outputs)
        return t

    def value(self, attr: Attribute, op) -> Attribute:
        if isinstance(attr, FloatAttr) and self._kind(attr.type):
            return FloatAttr(float(np.float32(attr.value.data)), self.type(attr.type))
        if isinstance(attr, IntegerAttr) and self._kind(attr.type):
            return IntegerAttr(self._int32(np.array([attr.value.data]), op)[0].item(),
                               self.type(attr.type))
        if isinstance(attr, DenseIntOrFPElementsAttr):
            kind = self._kind(attr.get_element_type())
            if kind:
                data = np.frombuffer(attr.data.data, DTYPES[kind])
                data = self._int32(data, op) if kind == "i64" else data.astype(np.float32)
                return DenseIntOrFPElementsAttr(self.type(attr.type), BytesAttr(data.tobytes()))
        return attr

    @staticmethod
    def _int32(data: np.ndarray, op) -> np.ndarray:
        data = np.where(data == _I64[0], _I32[0], np.where(data == _I64[1], _I32[1], data))
        outside = data[(data < _I32[0]) | (data > _I32[1])]
        if outside.size:
            raise CompileError(f"'{op.name}' holds {int(outside[0])}, which i32 cannot hold: "
                               "--iree-input-demote-i64-to-i32 cannot demote it",
                               location_of(op))
        return data.astype(np.int32)
