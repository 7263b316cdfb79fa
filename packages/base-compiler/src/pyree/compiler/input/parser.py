"""MLIR text -> verified xDSL module, with every op's source position and no dangling resources.

xDSL's parser drops positions once an op is built; ``_LocatingParser`` records where each op
starts as a ``FileLineColLoc`` so that every later error names ``file:line:col``. Ops of
dialects we do not know are refused by name while parsing (their custom syntax cannot be
parsed anyway); ops of known dialects that the lowering does not handle are refused there.
``dense_resource`` constants are resolved against the file's ``{-# dialect_resources #-}``
blobs into ordinary dense attributes, so the module stands alone.

Weights make up nearly all of a real model's text (ResNet-18: 94 MB of hex, as resource blobs
from torch-mlir's FX importer or as inline ``dense<"0x...">`` from its ONNX importer). xDSL would
lex every hex digit through a regex, so ``_Blobs`` cuts them out first: each long hex string
becomes a short placeholder (``dense_resource<__pyree_hex_N>``, a resource blob ``"0x"``) and
is decoded once with ``bytes.fromhex`` when its constant is resolved. Positions are mapped back
to the original text, so ``file:line:col`` stays exact.
"""

from __future__ import annotations

import bisect
import functools
import importlib
import re

from pyree.compiler.errors import CompileError
from pyree.compiler.input import literals
from pyree.compiler.input.dialects import (
    REPLACED_OPS,
    Flow,
    LinalgExt,
    MLProgram,
    Stream,
    TMTensor,
    Util,
)
from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects import arith, builtin, func, linalg, math, tensor
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    BytesAttr,
    CallSiteLoc,
    ComplexType,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FileLineColLoc,
    FloatAttr,
    FusedLoc,
    IndexType,
    IntAttr,
    IntegerType,
    ModuleOp,
    NameLoc,
    RankedStructure,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Dialect, Operation
from xdsl.irdl import base
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

# Snippets longer than this (a megabyte of hex on one line) are left out of error messages.
_MAX_SNIPPET = 160
# Inline hex literals at least this long (in digits) are cut out of the text xDSL parses.
_MIN_CUT_HEX = 256
_INLINE_HEX = re.compile(rf'dense<"0x([0-9A-Fa-f]{{{_MIN_CUT_HEX},}})">')
# A blob in the resource section; keys that need quoting are left to xDSL.
_RESOURCE_BLOB = re.compile(r'([A-Za-z_][\w.$-]*)\s*:\s*"0x([0-9A-Fa-f]*)"')
_BLOB_HEAD = re.compile(r'([A-Za-z_][\w.$-]*)\s*:\s*"0x')  # _RESOURCE_BLOB up to its digits
_HEX_DIGITS = re.compile(r"[0-9A-Fa-f]*")
_PLACEHOLDER = "__pyree_hex_"
_SHAPED_TYPES = ("tensor", "vector", "memref")
_SHAPED_TYPE = re.compile(r'(?:tensor|vector|memref)<[^<>"]*>')
# A one-line op's explicit location at the end of its line.
_LINE_LOC = re.compile(r'loc\("([^"\n]*)":(\d+):(\d+)\)\s*$')


def parse_mlir(text: str, source_name: str = "<string>") -> ModuleOp:
    """Parses and verifies ``text``; raises CompileError (with file:line:col) on bad input."""
    if not text or text.isspace():
        raise CompileError("the input is empty: expected MLIR with at least one func.func", source_name)
    text = hoist_trailing_aliases(text)
    ctx, resources = _context()
    blobs = _Blobs(text)
    parser = _LocatingParser(ctx, blobs, source_name)
    try:
        module = parser.parse_module()
    except ParseError as err:
        raise _from_parse_error(err, parser) from None
    except CompileError:
        raise
    except Exception as err:  # noqa: BLE001 - xDSL builders assert on odd-but-parseable input
        where = parser.where(parser.current_span().start)
        raise CompileError(f"could not parse this op: {err}", where) from None
    _verify(module)
    _resolve_resources(module, blobs, resources)
    return module


_LOC_RANGE = re.compile(r'(loc\("[^"\n]*":\d+:\d+)\s+to\s+(?:\d+)?:\d+\)')
_ALIAS_LINE = re.compile(r"#[\w$.-]+\s*=\s*loc\(.*\)\s*")


def hoist_trailing_aliases(text: str) -> str:
    """Location aliases that MLIR prints after the module (``#loc5 = loc(...)``, what
    ``jax.export``'s ``mlir_module()`` writes) moved onto the first line, where xDSL, which
    reads an alias only after its definition, meets them before their uses; a range is read
    as its start. Their lines stay,
    empty, and they join the first line at its end when it is itself an alias, so no other
    op's line or column moves."""
    if not _ends_in_aliases(text):  # (splitting a model's 94 MB into lines costs 0.1 s)
        return text
    lines = text.split("\n")
    end = len(lines)
    while end > 0 and (not lines[end - 1].strip() or _ALIAS_LINE.fullmatch(lines[end - 1])):
        end -= 1
    moved = [line.strip() for line in lines[end:] if line.strip()]
    if not moved or end == 0:
        return text
    lines[end:] = [""] * (len(lines) - end)
    # A range (``"f.py":8:6 to :78``, newer MLIR) as its start, which is what xDSL reads.
    joined = _LOC_RANGE.sub(r"\1)", " ".join(moved))
    lines[0] = (f"{lines[0]} {joined}" if _ALIAS_LINE.fullmatch(lines[0])
                else f"{joined} {lines[0]}")
    return "\n".join(lines)


def _ends_in_aliases(text: str) -> bool:
    """Whether ``hoist_trailing_aliases`` moves anything: the lines after the last other
    non-empty line hold an alias, and some line comes before them. Read from the end."""
    stop, aliases = len(text), False
    while True:
        start = text.rfind("\n", 0, stop) + 1
        line = text[start:stop]
        if line.strip() and not _ALIAS_LINE.fullmatch(line):
            return aliases
        aliases = aliases or bool(line.strip())
        if start == 0:
            return False
        stop = start - 1


def location_of(op: Operation) -> str:
    """``file:line:col`` of an op parsed by ``parse_mlir`` (empty when unknown)."""
    loc = _file_line_col(op.location)
    return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}" if loc else ""


def _file_line_col(loc) -> FileLineColLoc | None:
    """The position an explicit location names: fused, named and call-site ones wrap it."""
    if isinstance(loc, FileLineColLoc):
        return loc
    if isinstance(loc, NameLoc):
        return _file_line_col(loc.location)
    if isinstance(loc, CallSiteLoc):
        return _file_line_col(loc.callee)
    if isinstance(loc, FusedLoc):
        return next(filter(None, map(_file_line_col, loc.locations)), None)
    return None


def _context() -> tuple[Context, OpAsmDialectInterface]:
    # A fresh builtin dialect per parse: xDSL keeps resource blobs on the dialect object, and
    # the module-level one would leak blobs from one file into the next.
    resources = OpAsmDialectInterface()
    ctx = Context()
    ctx.load_dialect(Dialect("builtin", list(builtin.Builtin.operations),
                             list(builtin.Builtin.attributes), [resources]))
    for dialect in (func.Func, arith.Arith, math.Math, tensor.Tensor, linalg.Linalg, Util, Stream,
                    Flow, TMTensor, LinalgExt, MLProgram):
        ctx.load_dialect(_with_replacements(dialect))
    for name, load in _LAZY_DIALECTS.items():
        ctx.register_dialect(name, functools.partial(_lazy_dialect, load))
    return ctx, resources


def _lazy_dialect(load) -> Dialect:
    return _with_replacements(load())


def _with_replacements(dialect: Dialect) -> Dialect:
    """``dialect`` with pyree's declaration of an op in place of xDSL's, and the ops xDSL lacks."""
    names = {op.name for op in dialect.operations}
    ops = [_REPLACED.get(op.name, op) for op in dialect.operations]
    ops += [op for name, op in _REPLACED.items()
            if name.startswith(dialect.name + ".") and name not in names]
    return Dialect(dialect.name, ops, list(dialect.attributes))


_REPLACED = {op.name: op for op in REPLACED_OPS}

# Dialects that a torch-mlir model's text does not use, imported when a text first names one of
# their ops or attributes (xDSL's lazily registered dialects): declaring their op classes was
# part of every compile's start.
_LAZY_DIALECTS = {
    "scf": lambda: importlib.import_module("xdsl.dialects.scf").Scf,
    "cf": lambda: importlib.import_module("xdsl.dialects.cf").Cf,
    "check": lambda: importlib.import_module("pyree.compiler.input.dialects.check").Check,
    "stablehlo": lambda: importlib.import_module("pyree.compiler.input.dialects.stablehlo").StableHLO,
    "chlo": lambda: importlib.import_module("pyree.compiler.input.dialects.stablehlo").CHLO,
    "sdy": lambda: importlib.import_module("pyree.compiler.input.dialects.sdy").Shardy,
    # torch-mlir's complex values in linalg bodies (view_as_complex, polar): input/complex_body.py
    "complex": lambda: importlib.import_module("xdsl.dialects.complex").Complex,
    # of affine, only the index arithmetic torch-mlir writes on run-time sizes
    "affine": lambda: Dialect("affine", [importlib.import_module("xdsl.dialects.affine").ApplyOp], []),
}


class _Blobs:
    """The input with its long hex strings cut out (``text``, what xDSL parses), the span of
    each cut string's data by placeholder or resource key, and the map from positions in
    ``text`` back to the input."""

    def __init__(self, source: str):
        self.source = source
        self.spans: dict[str, tuple[int, int]] = {}  # key -> hex digits of the data in source
        self._ends: list[int] = []  # where each placeholder ends in ``text``
        self._shifts: list[int] = []  # source position - text position after that end
        self._bytes: dict[str, bytes] = {}  # key -> its data, for blobs decoded while cutting
        pieces: list[str] = []
        done = text_len = 0

        def cut(start: int, end: int, data: tuple[int, int], key: str, placeholder: str) -> None:
            nonlocal done, text_len
            pieces.extend((source[done:start], placeholder))
            text_len += start - done + len(placeholder)
            self._ends.append(text_len)
            self._shifts.append(end - text_len)
            self.spans[key] = data
            done = end

        for n, m in enumerate(_INLINE_HEX.finditer(source)):
            key = f"{_PLACEHOLDER}{n}"
            cut(m.start(), m.end(), m.span(1), key, f"dense_resource<{key}>")
        section = source.rfind("{-#")
        if section >= done and source[-4096:].rstrip().endswith("#-}"):
            for key, start, end, data in _resource_blobs(source, section):
                # A resource blob starts with 4 bytes (8 digits) of alignment.
                cut(start - 3, end + 1, (start + 8, end), key, '"0x"')
                if data is None:
                    self._bytes.pop(key, None)
                else:
                    self._bytes[key] = data
        pieces.append(source[done:])
        self.text = "".join(pieces)
        self._newlines: list[int] | None = None

    def location(self, pos: int) -> tuple[int, int]:
        """(line, column), one-based, in the source of position ``pos`` in ``text``;
        cutting never removes a newline, so lines agree and only columns move."""
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_left(self._newlines, pos)
        line_start = self._newlines[line - 1] + 1 if line else 0
        return line + 1, self._source_pos(pos) - self._source_pos(line_start) + 1

    def _source_pos(self, pos: int) -> int:
        k = bisect.bisect_right(self._ends, pos)
        return pos + (self._shifts[k - 1] if k else 0)

    def decode(self, key: str) -> bytes | None:
        """The data of a cut string (None if ``key`` was not cut); ValueError if not hex bytes."""
        span = self.spans.get(key)
        if span is None:
            return None
        data = self._bytes.get(key)
        return bytes.fromhex(self.source[span[0]:span[1]]) if data is None else data


def _resource_blobs(source: str, pos: int):
    """(key, start, end of its hex digits, its data or None) of each blob that
    ``_RESOURCE_BLOB.finditer(source, pos)`` matches, in order. The regex would read the digits
    one by one (ResNet-18: 94 MB); here a blob's end is its closing quote, found at once, and
    ``bytes.fromhex`` reads the digits (as ``_Blobs.decode`` would later): bytes of exactly
    half as many digits prove every digit hex. A blob not proven so is left to the regex."""
    while (head := _BLOB_HEAD.search(source, pos)) is not None:
        start = head.end()
        end = source.find('"', start)
        data = _blob_data(source, start, end) if end >= 0 else None
        if data is not None:
            yield head.group(1), start, end, data
            pos = end + 1
            continue
        m = _RESOURCE_BLOB.search(source, head.start())  # what finditer would match next
        if m is None:
            return
        yield m.group(1), m.start(2), m.end(2), None
        pos = m.end()


def _blob_data(source: str, start: int, end: int) -> bytes | None:
    """The data after the 8 digits of alignment of the blob whose digits are source[start:end],
    if they are all hex digits; None if that is not proven."""
    if end - start < 8 or not _HEX_DIGITS.fullmatch(source, start, start + 8):
        return None
    try:
        data = bytes.fromhex(source[start + 8:end])
    except ValueError:
        return None
    return data if 2 * len(data) == end - start - 8 else None  # (fromhex skips whitespace)


class _LocatingParser(Parser):
    def __init__(self, ctx: Context, blobs: _Blobs, name: str):
        super().__init__(ctx, blobs.text, name)
        self._blobs = blobs
        self._name = name
        self._op_start: Span | None = None
        self._first_use: dict[str, Span] = {}
        self._after_location = None  # the token after the last loc(...) read
        self._types: dict[str, object] = {}  # shaped types by their text, as parsed once

    def parse_optional_type(self):
        # A model spells the same few shaped types thousands of times (MobileNet v2: 3,259,
        # ~100 distinct), and xDSL parses each afresh. One whose text nests no brackets and
        # holds no string means the same everywhere in a file: it is parsed once.
        token = self._current_token
        if token.kind == MLIRTokenKind.BARE_IDENT and token.text in _SHAPED_TYPES:
            m = _SHAPED_TYPE.match(self._blobs.text, token.span.start)
            if m is not None:
                type = self._types.get(m.group())
                if type is not None:
                    self._resume_from(m.end())
                    return type
                type = super().parse_optional_type()
                if type is not None and not self._blobs.text[m.end():self.pos].strip():
                    self._types[m.group()] = type
                return type
        return super().parse_optional_type()

    def current_span(self) -> Span:
        return self._current_token.span

    def where(self, pos: int) -> str:
        line, col = self._blobs.location(pos)
        return f"{self._name}:{line}:{col}"

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

    def parse_optional_location(self):
        location = super().parse_optional_location()
        if location is not None:
            self._after_location = self._current_token
        return location

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        self._op_start = start
        op = super().parse_operation()
        explicit = self._current_token is self._after_location  # the op ended with loc(...)
        if explicit:  # converted text (--iree-input-type=tosa) names its source's positions
            op.location = _file_line_col(op.location) or UnknownLoc()
        else:
            line, col = self._blobs.location(start.start)
            op.location = FileLineColLoc(StringAttr(self._name), IntAttr(line), IntAttr(col))
        return op

    def _get_op_by_name(self, name: str) -> type[Operation]:
        op_type = self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack)
        if op_type is None:
            self.raise_error(f"unsupported op '{name}'", self._op_start)
        return op_type

    # Float literals as MLIR reads them (hex = bit pattern, out of range = ±inf): literals.py.
    def parse_optional_builtin_int_or_float_attr(self):
        start = self.pos
        spelling = self._current_token.text
        value = self.parse_optional_number()
        if value is not None and self._current_token.kind == MLIRTokenKind.COLON:
            type = self._parse_attribute_type()
            if (dtype := literals.float_dtype(type)) is not None:
                try:
                    return FloatAttr(float(literals.float_value(value, spelling, dtype)), type)
                except ValueError as err:
                    self.raise_error(str(err), start, self.pos)
        self._resume_from(start)
        return super().parse_optional_builtin_int_or_float_attr()

    def _parse_dense_literal_type(self):
        # xDSL's own builds its type constraint afresh for every dense literal, a large part of
        # parsing a model with many constants; the constraint is built once here.
        start = self.pos
        type = self.expect(self.parse_optional_type, "Dense attribute must be typed!")
        if not _dense_literal_types().verifies(type):
            self.raise_error("Expected memref, vector or tensor type of integer, index, float, "
                             "or complex type", start, self.pos)
        if any(dim == DYNAMIC_INDEX for dim in type.get_shape()):
            self.raise_error("Dense literal attribute should have a static shape.", start, self.pos)
        return type

    def parse_dense_int_or_fp_elements_attr(self, type):
        # A large splat keeps its one element (literals.compact_splat).
        start = self.pos
        self.parse_punctuation("<", " in dense attribute")
        hex_text = elements = shape = None
        if self._current_token.kind == MLIRTokenKind.STRING_LIT:
            hex_text = self.parse_optional_str_literal()
        elif self._current_token.kind != MLIRTokenKind.GREATER:
            elements, shape = self._parse_tensor_literal()
        if hex_text is not None or elements is not None:
            self.parse_punctuation(">", " in dense attribute")
            literal_type = type
            if literal_type is None:
                self.parse_punctuation(":", " in dense attribute")
                literal_type = self._parse_dense_literal_type()
            element = literal_type.get_element_type()
            if elements is not None and literals.float_dtype(element) is not None:
                try:
                    return literals.dense_floats(
                        literal_type, [(e.value, e.span.text) for e in elements], shape)
                except ValueError as err:
                    self.raise_error(str(err), start, self.pos)
            if literals.compact_splat(literal_type) and isinstance(element, (IntegerType, IndexType)):
                raw = self._splat_bytes(hex_text, elements, shape, element)
                if raw is not None:
                    return DenseIntOrFPElementsAttr(literal_type, BytesAttr(raw))
        self._resume_from(start)
        return super().parse_dense_int_or_fp_elements_attr(type)

    def _splat_bytes(self, hex_text, elements, shape, element) -> bytes | None:
        """The one element of an integer splat literal (``dense<7>``, ``dense<"0x07000000">``),
        packed; None for anything else, which xDSL reads."""
        if hex_text is not None:
            try:
                raw = bytes.fromhex(hex_text[2:])
            except ValueError:
                return None
            return raw if hex_text[:2].lower() == "0x" and len(raw) == element.compile_time_size \
                else None
        if shape or len(elements) != 1:
            return None
        value = elements[0].to_type(self, element)
        if isinstance(element, IntegerType):
            value = element.get_normalized_value(value)
        return element.pack([value])


@functools.cache
def _dense_literal_types():
    return base(RankedStructure[IntegerType | IndexType | AnyFloat | ComplexType])


def _from_parse_error(err: ParseError, parser: _LocatingParser) -> CompileError:
    span = err.span
    where = parser.where(span.start)
    text = parser._blobs.text
    end = text.find("\n", span.start)
    line = text[text.rfind("\n", 0, span.start) + 1:end if end >= 0 else None]
    if m := _LINE_LOC.search(line):  # converted text: the op's own loc names the source
        return CompileError(err.msg, f"{m.group(1)}:{m.group(2)}:{m.group(3)}")
    lines = span.print_with_context().splitlines()[1:]  # the source line(s) and the carets
    snippet = "\n".join("  " + line for line in lines if line.strip())
    if (lines and len(lines[0]) <= _MAX_SNIPPET and len(lines) <= 4
            and _PLACEHOLDER not in lines[0]):  # a line with a cut blob is not what the user wrote
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


def _resolve_resources(module: ModuleOp, blobs: _Blobs, resources: OpAsmDialectInterface) -> None:
    for op in module.walk():
        prop = "initial_value" if op.name == "util.global" else "value"
        value = op.properties.get(prop)
        if not isinstance(value, DenseResourceAttr):
            continue
        key = value.resource_handle.data
        what = "this dense<\"0x...\"> literal" if key.startswith(_PLACEHOLDER) \
            else f"dense_resource '{key}'"
        try:
            raw = blobs.decode(key)
        except ValueError:
            raise CompileError(f"{what}: the data is not whole bytes of hex digits",
                               location_of(op)) from None
        if raw is None:  # a blob xDSL parsed itself (a key that needs quoting)
            blob = resources.lookup(key)
            if not blob:
                raise CompileError(f"{what} has no blob in the file's dialect_resources section",
                                   location_of(op))
            raw = bytes.fromhex(blob[2:])[4:]  # the first 4 bytes are the blob's alignment
        shaped = value.type
        count = 1
        for dim in shaped.get_shape():
            count *= dim
        element_bytes = max(1, shaped.get_element_type().compile_time_size)
        if len(raw) != count * element_bytes:
            raise CompileError(f"{what} holds {len(raw)} bytes, but {shaped} "
                               f"needs {count * element_bytes}", location_of(op))
        op.properties[prop] = DenseIntOrFPElementsAttr(shaped, BytesAttr(raw))
