"""MLIR text -> verified xDSL module, with every op's source position and no dangling resources.

xDSL's parser drops positions once an op is built; ``_LocatingParser`` records where each op
starts as a ``FileLineColLoc`` so that every later error names ``file:line:col``. Ops of
dialects we do not know are refused by name while parsing (their custom syntax cannot be
parsed anyway); ops of known dialects that the lowering does not handle are refused there.
``dense_resource`` constants are resolved against the file's ``{-# dialect_resources #-}``
blobs into ordinary dense attributes, so the module stands alone.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.dialects import REPLACED_OPS, Check, Util
from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects import arith, builtin, cf, func, linalg, math, scf, tensor
from xdsl.dialects.builtin import (
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Dialect, Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

# Snippets longer than this (a megabyte of hex on one line) are left out of error messages.
_MAX_SNIPPET = 160


def parse_mlir(text: str, source_name: str = "<string>") -> ModuleOp:
    """Parses and verifies ``text``; raises CompileError (with file:line:col) on bad input."""
    if not text.strip():
        raise CompileError("the input is empty: expected MLIR with at least one func.func", source_name)
    ctx, resources = _context()
    parser = _LocatingParser(ctx, text, source_name)
    try:
        module = parser.parse_module()
    except ParseError as err:
        raise _from_parse_error(err) from None
    except CompileError:
        raise
    except Exception as err:  # noqa: BLE001 - xDSL builders assert on odd-but-parseable input
        where = str(parser.current_span().get_location())
        raise CompileError(f"could not parse this op: {err}", where) from None
    _verify(module)
    _resolve_resources(module, resources)
    return module


def location_of(op: Operation) -> str:
    """``file:line:col`` of an op parsed by ``parse_mlir`` (empty when unknown)."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return ""


def _context() -> tuple[Context, OpAsmDialectInterface]:
    # A fresh builtin dialect per parse: xDSL keeps resource blobs on the dialect object, and
    # the module-level one would leak blobs from one file into the next.
    resources = OpAsmDialectInterface()
    ctx = Context()
    ctx.load_dialect(Dialect("builtin", list(builtin.Builtin.operations),
                             list(builtin.Builtin.attributes), [resources]))
    replaced = {op.name: op for op in REPLACED_OPS}
    for dialect in (func.Func, arith.Arith, math.Math, tensor.Tensor, linalg.Linalg, scf.Scf,
                    cf.Cf, Check, Util):
        ops = [replaced.pop(op.name, op) for op in dialect.operations]
        ops += [op for name, op in list(replaced.items()) if name.startswith(dialect.name + ".")]
        for op in ops:
            replaced.pop(op.name, None)
        ctx.load_dialect(Dialect(dialect.name, ops, list(dialect.attributes)))
    return ctx, resources


class _LocatingParser(Parser):
    def __init__(self, ctx: Context, text: str, name: str):
        super().__init__(ctx, text, name)
        self._op_start: Span | None = None
        self._first_use: dict[str, Span] = {}

    def current_span(self) -> Span:
        return self._current_token.span

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as err:
            # xDSL reports undefined values at the end of the file; point at the first use.
            undefined = [n for n in self.forward_ssa_references if n in self._first_use]
            if undefined and err.msg.startswith("values used but not defined"):
                name = undefined[0]
                raise ParseError(self._first_use[name], f"use of undefined value %{name}") from None
            raise

    def parse_comma_separated_list(self, delimiter, parse, context_msg=""):
        # xDSL's linalg.generic reads results `-> (T1, T2)` as one function type; MLIR writes
        # several results in parentheses. Only linalg.generic lists attributes undelimited.
        if (delimiter == self.Delimiter.NONE and parse == self.parse_attribute
                and self._current_token.kind == MLIRTokenKind.L_PAREN):
            delimiter = self.Delimiter.PAREN
        return super().parse_comma_separated_list(delimiter, parse, context_msg)

    def resolve_operand(self, operand, type):
        self._first_use.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        self._op_start = start
        op = super().parse_operation()
        if not isinstance(op.location, FileLineColLoc):
            where = start.get_location()
            op.location = FileLineColLoc(StringAttr(where.file), IntAttr(where.line),
                                         IntAttr(where.col))
        return op

    def _get_op_by_name(self, name: str) -> type[Operation]:
        op_type = self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack)
        if op_type is None:
            self.raise_error(f"unsupported op '{name}'", self._op_start)
        return op_type


def _from_parse_error(err: ParseError) -> CompileError:
    span = err.span
    where = str(span.get_location())
    lines = span.print_with_context().splitlines()[1:]  # the source line(s) and the carets
    snippet = "\n".join("  " + line for line in lines if line.strip())
    if lines and len(lines[0]) <= _MAX_SNIPPET and len(lines) <= 4:
        return CompileError(f"{err.msg}\n{snippet}", where)
    return CompileError(err.msg, where)


def _verify(module: ModuleOp) -> None:
    for op in module.walk():
        try:
            op.verify_()
        except VerifyException as err:
            raise CompileError(f"invalid '{op.name}': {err}", location_of(op)) from None
        except Exception as err:  # noqa: BLE001 - xDSL verifiers assert on some malformed ops
            raise CompileError(f"invalid '{op.name}': {err or type(err).__name__}",
                               location_of(op)) from None


def _resolve_resources(module: ModuleOp, resources: OpAsmDialectInterface) -> None:
    for op in module.walk():
        value = op.properties.get("value")
        if not isinstance(value, DenseResourceAttr):
            continue
        key = value.resource_handle.data
        blob = resources.lookup(key)
        if not blob:
            raise CompileError(f"dense_resource '{key}' has no blob in the file's "
                               "dialect_resources section", location_of(op))
        raw = bytes.fromhex(blob[2:])[4:]  # the first 4 bytes are the blob's alignment
        shaped = value.type
        count = 1
        for dim in shaped.get_shape():
            count *= dim
        element_bytes = max(1, shaped.get_element_type().compile_time_size)
        if len(raw) != count * element_bytes:
            raise CompileError(f"dense_resource '{key}' holds {len(raw)} bytes, but {shaped} "
                               f"needs {count * element_bytes}", location_of(op))
        op.properties["value"] = DenseIntOrFPElementsAttr(shaped, BytesAttr(raw))
