"""Semantic checks of an unpacked module, so nothing downstream can index out of range.

Every DataRef lies in the data segment; a constant has inline data or names a parameter (the
parameter's bytes are checked against its type when they are loaded); every dispatch names an
export that every executable has, with matching binding counts and long-enough bindings; every
BufferRef lies inside its buffer; fills, copies and checks are well-formed; types are known and
static. Messages name the place (function, command index, binding index). Strings are decoded
to str and scalar vectors (None when absent) made lists of int in place, so consumers of the
tree never see bytes.

Code is checked against itself where the runtime can read it: a CPU library must be a whole ELF
shared object whose exports are kernels it defines, and whose export records (where the compiler
wrote them) equal the module's export table (hal/images/cpu_library.py); a GPU export may not
launch more blocks than its bindings have bytes. Each function gets ``clears``, the zero-fills a
call runs first so that it never reads or returns memory it did not write (coverage.py).

A function with run-time sizes (schema 1.5: symbols) is checked here for what holds at every
size: its symbols, every SizeExpr's form (size_exprs.py), its types' dynamic dims, and that each
symbol is bound by an argument's dim. What depends on the sizes (every range, every binding's
length) is checked per size, when the VM first records that size, by the very checks a static
function gets here (``function.verify_size``, on the instance.py copy for those sizes).
"""

from __future__ import annotations

import math

from pyree.runtime.element_types import FLOAT_TYPES, ITEMSIZES, NAMES, spell
from pyree.runtime.errors import ModuleError
from pyree.runtime.module import size_exprs
from pyree.runtime.module.coverage import clears
from pyree.runtime.module.instance import U32, grid, instantiate
from pyree.runtime.records import Record

ALIGNMENT = 64
MAX_ALLOCATION = 1 << 48  # no real function needs more; a larger size is a damaged file
FORMATS = {0: "cpu", 1: "cuda", 2: "rocm", 3: "spirv"}
BUFFER_KINDS = {0: "argument", 1: "result", 2: "transient", 3: "constant", 4: "readback"}
COMMAND_KINDS = {0: "dispatch", 1: "copy", 2: "fill", 3: "barrier", 4: "check", 5: "branch"}
CHECK_KINDS = {0: "expect_true", 1: "expect_false", 2: "expect_all_true", 3: "expect_eq",
               4: "expect_almost_eq"}
BINDING_ACCESS = {0: "read", 1: "write", 2: "read_write"}


class _Buffers(Record):
    """Byte sizes of the buffers a function's BufferRefs may name."""

    arguments: list[int]
    results: list[int]
    transient: int
    constants: list[int]
    readback: int
    commands: int  # how many commands the function has: a branch may target 0..commands


def _fail(where: str, what: str) -> ModuleError:
    return ModuleError(f"module file is invalid: {where}: {what}")


class _Sized(Exception):
    """A SizeExpr (or a dynamic dim) met while a function without symbols is checked as static:
    its expressions are constants, evaluated once at load (``_Verifier.function``)."""


def _text(value, where: str) -> str:
    if value is None:
        return ""
    try:
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError:
        raise _fail(where, "a string is not valid UTF-8") from None


def _ints(value) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value]


def _code_tables(member):
    """(label suffix, table) of an executable's member and of each of its CPU variants."""
    yield "", member
    for j, variant in enumerate(getattr(member, "variants", None) or []):
        yield f" variant {j} ('{variant.targetCpu}')", variant


def _bindings(export) -> list[tuple]:
    """A verified export's bindings as (access, min length, min length SizeExpr code or None,
    alignment)."""
    return [(b.access, b.minLength, _ints(b.minLengthExpr.code) if b.minLengthExpr else None,
             b.alignment) for b in export.bindings]


def _ties(function, where: str) -> dict[int, int]:
    """{result: argument} of a function's tied results (schema 1.10), each pair of one type,
    no argument tied twice."""
    ties = {}
    given = _ints(function.tiedResults)
    if given and len(given) != len(function.results):
        raise _fail(where, f"ties {len(given)} results but has {len(function.results)}")
    for r, a in enumerate(given):
        if a == -1:
            continue
        if not 0 <= a < len(function.arguments) or a in ties.values():
            raise _fail(f"{where} result {r}", f"is tied to argument {a}, which is not an "
                                               f"argument of its own")
        t, u = function.results[r], function.arguments[a]
        if t.elementType != u.elementType or _ints(t.dims) != _ints(u.dims):
            raise _fail(f"{where} result {r}", f"is tied to argument {a} of another type")
        ties[r] = a
    return ties


def tensor_bytes(t) -> int:
    """Bytes of a verified TensorType."""
    return math.prod(t.dims) * ITEMSIZES[t.elementType]


class _Verifier:
    def __init__(self, module):
        self.tree = module.tree
        self.data = module.data
        self.data_size = len(module.data)

    def run(self) -> None:
        tree = self.tree
        tree.name = _text(tree.name, "module name")
        tree.producer = _text(tree.producer, "module producer")
        tree.functions = tree.functions or []
        tree.constants = tree.constants or []
        tree.executables = tree.executables or []
        constant_sizes = [self.constant(c, f"constant {i}") for i, c in enumerate(tree.constants)]
        executables = [self.executable(e, i) for i, e in enumerate(tree.executables)]
        # per executable, per export, per binding: (min length, min length program or None,
        # alignment or 0)
        self.exports = [[needs for needs, _ in exports] for exports in executables]
        # per kernel: its binding layouts where every executable's code attests the same ones
        kernels = min((len(exports) for exports in executables), default=0)
        attested = [{exports[k][1] for exports in executables} for k in range(kernels)]
        self.trusted = [next(iter(a)) if len(a) == 1 else None for a in attested]
        self.kernels(tree)
        self.constant_sizes = constant_sizes
        # every export table whose grids a dispatch must fit: each executable's, each variant's
        self.tables = [(f"executable {e}{variant}", table.exports)
                       for e, executable in enumerate(tree.executables)
                       for variant, table in _code_tables(getattr(executable,
                                                                  FORMATS[executable.format]))]
        names = set()
        for i, function in enumerate(tree.functions):
            function.name = _text(function.name, f"function {i} name")
            where = f"function '{function.name}'"
            if not function.name or function.name in names:
                raise _fail(f"function {i}", f"name {function.name!r} is empty or repeated")
            names.add(function.name)
            tree.functions[i] = self.function(function, where)
        if tree.initializer is not None:
            init = tree.initializer
            init.name = _text(init.name, "initializer name")
            if init.arguments or init.results or init.symbols:
                raise _fail("initializer", "takes arguments, returns results or has run-time "
                                           "sizes; an initializer has none")
            tree.initializer = self.function(init, "initializer")
        elif any(c.computed for c in tree.constants):
            raise _fail("module", "has computed constants but no initializer to compute them")

    # -- types and data ------------------------------------------------------------------------

    def tensor_type(self, t, where: str) -> int:
        if t is None:
            raise _fail(where, "type is missing")
        if t.elementType not in NAMES:
            raise _fail(where, f"unknown element type {t.elementType}")
        t.dims = _ints(t.dims)
        for d in t.dims:
            if d < -1:
                raise _fail(where, f"invalid dimension {d}")
        if -1 in t.dims or t.dynamicDims:
            raise _Sized
        return tensor_bytes(t)

    def sized_type(self, t, where: str) -> None:
        """A type of a function with symbols: its element type and dims (-1 where dynamic)."""
        try:
            self.tensor_type(t, where)
        except _Sized:
            pass

    def data_ref(self, ref, where: str) -> None:
        if ref is None:
            raise _fail(where, "data reference is missing")
        if ref.length and ref.offset % ALIGNMENT:
            raise _fail(where, f"data offset {ref.offset} is not 64-byte aligned")
        if ref.offset + ref.length > self.data_size:
            raise _fail(where, f"data [{ref.offset}, +{ref.length}) lies outside the "
                               f"{self.data_size}-byte data segment")

    def constant(self, constant, where: str) -> int:
        try:
            size = self.tensor_type(constant.type, f"{where} type")
        except _Sized:
            raise _fail(where, "a constant's type has a dynamic dimension") from None
        if constant.parameter is not None:
            parameter = constant.parameter
            parameter.scope = _text(parameter.scope, f"{where} parameter scope")
            parameter.key = _text(parameter.key, f"{where} parameter key")
            if constant.data is not None:
                raise _fail(where, "has both inline data and a parameter reference")
            if not parameter.key:
                raise _fail(where, "parameter key is empty")
            if constant.computed:
                raise _fail(where, "is both a parameter reference and computed at load")
            return size
        if constant.computed:
            if constant.data is not None or constant.mutable:
                raise _fail(where, "is computed at load but has inline data or is mutable")
            return size
        self.data_ref(constant.data, f"{where} data")
        if constant.data.length != size:
            raise _fail(where, f"has {constant.data.length} bytes of data but its type "
                               f"{spell(constant.type.elementType, constant.type.dims)} needs {size}")
        return size

    # -- executables ---------------------------------------------------------------------------

    def executable(self, executable, index: int) -> list[tuple[list[tuple], tuple | None]]:
        """Checks one executable; returns per export its bindings' (minimum length, minimum
        length program or None, alignment or 0) and, where its code attests them, its binding
        layouts as (access, min length) pairs (never for an export whose lengths are programs:
        the code attests its static floors only)."""
        executable.name = _text(executable.name, f"executable {index} name")
        where = f"executable {index} ('{executable.name}')"
        if executable.format not in FORMATS:
            raise _fail(where, f"unknown executable format {executable.format}")
        fmt = FORMATS[executable.format]
        member = getattr(executable, fmt)
        if member is None:
            raise _fail(where, f"format is {fmt} but its {fmt} table is missing")
        if fmt == "cpu":
            return self.cpu_executable(member, where)
        code_field = {"cuda": "ptx", "rocm": "codeObject", "spirv": "code"}[fmt]
        self.data_ref(getattr(member, code_field), f"{where} code")
        if fmt == "cuda":
            member.targetArch = _text(member.targetArch, where)
            member.cubinArch = _text(member.cubinArch, where)
            self.data_ref(member.cubin, f"{where} cubin")
        elif fmt == "rocm":
            member.targetArch = _text(member.targetArch, where)
        else:
            member.target = _text(member.target, where)
        member.exports = member.exports or []
        return [(self.export(e, fmt, f"{where} export {k}"), None)
                for k, e in enumerate(member.exports)]

    def cpu_executable(self, member, where: str) -> list[tuple[list[tuple], tuple | None]]:
        """A CPU executable and its variants (schema 1.7), each checked as a whole executable;
        a variant must declare the same bindings for each export as the executable itself (the
        host program is one for all), and has no variants of its own."""
        checked = self.cpu_code(member, where)
        for j, variant in enumerate(member.variants or []):
            if variant is None:
                raise _fail(f"{where} variant {j}", "the table is missing")
            variant.targetCpu = _text(variant.targetCpu, f"{where} variant {j}")
            here = f"{where} variant {j} ('{variant.targetCpu}')"
            if variant.variants:
                raise _fail(here, "has variants of its own; only the executable itself may")
            self.cpu_code(variant, here)
            if len(variant.exports) != len(member.exports):
                raise _fail(here, f"has {len(variant.exports)} exports but the executable has "
                                  f"{len(member.exports)}")
            for k, (theirs, ours) in enumerate(zip(variant.exports, member.exports)):
                if _bindings(theirs) != _bindings(ours):
                    raise _fail(f"{here} export {k}", f"declares bindings (access, bytes, "
                                                      f"SizeExpr, alignment) {_bindings(theirs)} but the "
                                                      f"executable's export {k} declares "
                                                      f"{_bindings(ours)}")
        return checked

    def cpu_code(self, member, where: str) -> list[tuple[list[tuple], tuple | None]]:
        """One CPU library and its export table, checked against the library's own records."""
        member.format = _text(member.format, where)
        member.targetCpu = _text(member.targetCpu, where)
        member.cpuFeatures = [_text(f, where) for f in member.cpuFeatures or []]
        self.data_ref(member.library, f"{where} library")
        if member.library.length == 0:
            raise _fail(where, "the CPU library is empty")
        member.exports = member.exports or []
        lengths = [self.export(e, "cpu", f"{where} export {k}")
                   for k, e in enumerate(member.exports)]
        records = self.cpu_records(member, where)
        if records is None:
            return [(need, None) for need in lengths]
        layouts = []
        for k, (export, record) in enumerate(zip(member.exports, records)):
            declared = tuple((b.access, b.minLength) for b in export.bindings)
            if (export.workgroupCount, declared) != (record.workgroup_count, record.bindings):
                raise _fail(f"{where} export {k} ('{export.symbol}')",
                            f"declares {export.workgroupCount} workgroups and bindings (access, "
                            f"bytes) {list(declared)}, but its kernel was compiled for "
                            f"{record.workgroup_count} and {list(record.bindings)}")
            dynamic = export.workgroupCountExpr is not None or \
                any(program is not None for _, program, _ in lengths[k])
            layouts.append(None if dynamic else declared)
        return list(zip(lengths, layouts))

    def cpu_records(self, member, where: str):
        """Checks the CPU library and its exports' symbols; returns its export records, or None
        for a library without them."""
        from pyree.runtime.hal.images import ImageError
        from pyree.runtime.hal.images.cpu_library import (
            check_kernel_symbols,
            export_records,
            read_library,
        )

        image = self.data[member.library.offset:member.library.offset + member.library.length]
        names = [export.symbol for export in member.exports]
        try:
            library = read_library(image, member.format)
            return export_records(library, check_kernel_symbols(library, names), names)
        except ImageError as e:
            raise _fail(f"{where} library", str(e)) from None

    def export(self, export, fmt: str, where: str) -> list[tuple[int, list[int] | None, int]]:
        if fmt == "cpu":
            export.symbol = _text(export.symbol, where)
            if not export.symbol:
                raise _fail(where, "symbol name is empty")
            if export.workgroupCount >= 1 << 32:
                raise _fail(where, f"workgroup count {export.workgroupCount} exceeds 2^32-1")
        else:
            export.name = _text(export.name, where)
            export.gridSize, export.blockSize = _ints(export.gridSize), _ints(export.blockSize)
            if len(export.gridSize) != 3 or len(export.blockSize) != 3:
                raise _fail(where, f"grid and block sizes must have 3 entries, got "
                                   f"{len(export.gridSize)} and {len(export.blockSize)}")
        export.bindings = export.bindings or []
        grid = [export.workgroupCountExpr] if fmt == "cpu" and export.workgroupCountExpr \
            else export.gridSizeExpr if fmt != "cpu" else None
        if grid is not None:  # a kernel with run-time sizes: its grid per dispatch
            if len(grid) != (1 if fmt == "cpu" else 3):
                raise _fail(where, f"its grid has {len(grid)} SizeExprs, not 3 (x, y, z)")
            for axis, program in zip("xyz", grid):
                problem = size_exprs.problem(_ints(program.code if program else None), 1 << 32)
                if problem:
                    raise _fail(where, f"its workgroup count {axis} SizeExpr {problem}")
        needs = []
        for b, layout in enumerate(export.bindings):
            if layout.access not in BINDING_ACCESS:
                raise _fail(f"{where} binding {b}", f"unknown access {layout.access}")
            program = None
            if layout.minLengthExpr is not None:  # over the dispatch's push constants
                program = _ints(layout.minLengthExpr.code)
                problem = size_exprs.problem(program, 1 << 32)
                if problem:
                    raise _fail(f"{where} binding {b}", f"its minimum length SizeExpr {problem}")
            if layout.alignment & (layout.alignment - 1):
                raise _fail(f"{where} binding {b}", f"alignment {layout.alignment} is not a power "
                                                    f"of two")
            needs.append((layout.minLength, program, layout.alignment))
        lengths = [layout.minLength for layout in export.bindings]
        if fmt != "cpu" and math.prod(export.gridSize) > max(1, sum(lengths)):
            raise _fail(where, f"grid {tuple(export.gridSize)} launches more blocks than its "
                               f"bindings have bytes ({sum(lengths)}): every block of a kernel "
                               f"touches bytes of its own")
        return needs

    def kernels(self, tree) -> None:
        """Each kernel's name and source ops (schema 1.4): one per kernel where present."""
        tree.kernels = tree.kernels or []
        for k, info in enumerate(tree.kernels):
            where = f"kernel info {k}"
            info.name = _text(info.name, where)
            info.sources = [_text(s, where) for s in info.sources or []]
        for e, exports in enumerate(self.exports):
            if tree.kernels and len(tree.kernels) != len(exports):
                raise _fail("kernel infos", f"{len(tree.kernels)} kernels are described but "
                                            f"executable {e} has {len(exports)} exports")

    # -- functions -----------------------------------------------------------------------------

    def function(self, function, where: str):
        """Checks a function; returns it, or the static function that its expressions come to
        where it has SizeExprs but no symbols (constants, evaluated here once)."""
        function.location = _text(function.location, where)
        for k, check in enumerate(function.sizeChecks or []):
            if check is not None:  # a missing one: instantiate names it
                check.message = _text(check.message, f"{where} size check {k}")
                check.location = _text(check.location, f"{where} size check {k}")
        if function.sizeChecks and not function.symbols:
            raise _fail(where, "has size checks but no symbols: a shape guard needs run-time "
                               "sizes")
        if function.symbols:
            self.dynamic(function, where)
            return function
        try:
            self.static(function, where)
            return function
        except _Sized:
            pass

        def constant(label: str, code: list[int], limit: int = size_exprs.LIMIT) -> int:
            self.program(code, 0, where, label)
            try:
                value = size_exprs.evaluate(code, ())
            except size_exprs.SizeError as e:
                raise _fail(where, f"{label} `{size_exprs.spell(code)}` is {e}") from None
            if value > limit:
                raise _fail(where, f"{label} is {value}, past its limit {limit}")
            return value

        static = instantiate(function, constant, where)
        self.static(static, where)
        return static

    def static(self, function, where: str) -> None:
        """Checks a function of static sizes (at load, or a dynamic one's copy at one size) and
        sets its ``clears``; raises _Sized at a SizeExpr."""
        if function.resultSizeExprs is not None or function.transientSizeExpr is not None:
            raise _Sized
        function.arguments = function.arguments or []
        function.results = function.results or []
        function.resultSizes = _ints(function.resultSizes)
        function.commands = function.commands or []
        arguments = [self.tensor_type(t, f"{where} argument {i}")
                     for i, t in enumerate(function.arguments)]
        results = [self.tensor_type(t, f"{where} result {i}") for i, t in enumerate(function.results)]
        if len(function.resultSizes) != len(results):
            raise _fail(where, f"has {len(results)} results but {len(function.resultSizes)} "
                               f"result sizes")
        for i, (need, size) in enumerate(zip(results, function.resultSizes)):
            if size < need or size > MAX_ALLOCATION:
                raise _fail(f"{where} result {i}", f"allocation of {size} bytes cannot hold its "
                                                   f"{need}-byte value")
        function.ties = _ties(function, where)
        if function.transientSize > MAX_ALLOCATION:
            raise _fail(where, f"transient size {function.transientSize} is implausibly large")
        if function.readbackSize > MAX_ALLOCATION:
            raise _fail(where, f"readback size {function.readbackSize} is implausibly large")
        buffers = _Buffers(arguments, function.resultSizes, function.transientSize,
                           self.constant_sizes, function.readbackSize, len(function.commands))
        for c, command in enumerate(function.commands):
            self.command(command, buffers, f"{where} command {c}")
        # Allocations in whole 4-byte words, so that the clears are too (a Vulkan fill takes only
        # those); every reference was checked against the sizes as written.
        function.resultSizes = [size + -size % 4 for size in function.resultSizes]
        function.transientSize += -function.transientSize % 4
        function.readbackSize += -function.readbackSize % 4
        function.clears = clears(function, self.trusted, tensor_bytes)

    def program(self, code: list[int], symbols: int, where: str, label: str) -> None:
        problem = size_exprs.problem(code, symbols)
        if problem:
            raise _fail(where, f"{label}: its SizeExpr {problem}")

    def dynamic(self, function, where: str) -> None:
        """What holds at every size of a function with symbols: the symbols, the form of every
        SizeExpr (checked by the walk that evaluates them per size), each symbol bound by a bare
        dynamic dim of an argument. Sets ``verify_size``: the checks of ``static`` for the
        function's copy at one size."""
        for k, symbol in enumerate(function.symbols):
            symbol.name = _text(symbol.name, f"{where} symbol {k}") or f"s{k}"
            low, high, divisor = symbol.min, symbol.max, symbol.divisor
            if not (0 <= low <= size_exprs.LIMIT and (high == -1 or low <= high <= size_exprs.LIMIT)
                    and 1 <= divisor <= size_exprs.LIMIT):
                raise _fail(f"{where} symbol {k} ('{symbol.name}')",
                            f"bounds min={low} max={high} divisor={divisor} are not sizes "
                            f"(0 <= min <= max or max = -1, divisor >= 1)")
        for i, t in enumerate(function.arguments or []):
            self.sized_type(t, f"{where} argument {i}")
        for i, t in enumerate(function.results or []):
            self.sized_type(t, f"{where} result {i}")
        count = len(function.symbols)

        def check(label: str, code: list[int], limit: int = 0) -> int:
            self.program(code, count, where, label)
            return 1

        instantiate(function, check, where)
        bound = set()
        for t in function.arguments or []:
            for expr in t.dynamicDims or []:
                k = size_exprs.bare_symbol(_ints(expr.code))
                bound.add(k)
        unbound = [s.name for k, s in enumerate(function.symbols) if k not in bound]
        if unbound:
            raise _fail(where, f"symbol {', '.join(unbound)} is not a dim of any argument "
                               f"(a bare dynamic dim binds each symbol from a call's shapes)")
        function.verify_size = self.static

    def command(self, command, buffers: _Buffers, where: str) -> None:
        if command.kind not in COMMAND_KINDS:
            raise _fail(where, f"unknown command kind {command.kind}")
        kind = COMMAND_KINDS[command.kind]
        if kind == "barrier":
            return
        member = getattr(command, kind)
        if member is None:
            raise _fail(where, f"kind is {kind} but its {kind} table is missing")
        getattr(self, kind)(member, buffers, f"{where} ({kind})")

    def dispatch(self, dispatch, buffers: _Buffers, where: str) -> None:
        if dispatch.pushConstantExprs is not None:
            raise _Sized
        dispatch.bindings = dispatch.bindings or []
        dispatch.pushConstants = _ints(dispatch.pushConstants)
        if not self.exports:
            raise _fail(where, "the module has no executables to dispatch")
        for e, exports in enumerate(self.exports):
            if dispatch.kernel >= len(exports):
                raise _fail(where, f"kernel {dispatch.kernel} is out of range: executable {e} "
                                   f"has {len(exports)} exports")
            needs = exports[dispatch.kernel]
            if len(needs) != len(dispatch.bindings):
                raise _fail(where, f"has {len(dispatch.bindings)} bindings but executable {e} "
                                   f"export {dispatch.kernel} declares {len(needs)}")
            for b, (ref, need) in enumerate(zip(dispatch.bindings, needs)):
                min_length = self.min_length(need, dispatch.pushConstants, f"{where} binding {b}")
                if ref.length < min_length:
                    raise _fail(f"{where} binding {b}", f"length {ref.length} is shorter than the "
                                                        f"{min_length} bytes the kernel touches")
                alignment = need[2]
                if alignment and ref.offset % alignment:
                    raise _fail(f"{where} binding {b}", f"offset {ref.offset} is not a multiple "
                                                        f"of the {alignment} bytes the kernel "
                                                        f"aligns its elements to")
        for b, ref in enumerate(dispatch.bindings):
            self.buffer_ref(ref, buffers, f"{where} binding {b}")
        for label, exports in self.tables:
            self.check_grid(exports[dispatch.kernel], dispatch, f"{where}: {label}'s grid")

    def check_grid(self, export, dispatch, where: str) -> None:
        """A kernel with run-time sizes: its grid over this dispatch's push constants (every
        value a workgroup count: 32 bits, within a CPU export's bound where it has one), and no
        more workgroups than the dispatch's bindings have bytes, as for a static grid."""
        try:
            counts = grid(export, dispatch.pushConstants)
        except IndexError:
            raise _fail(where, f"reads a push constant past the dispatch's "
                               f"{len(dispatch.pushConstants)}") from None
        except size_exprs.SizeError as e:
            raise _fail(where, f"is {e}") from None
        if counts is None:
            return
        bound = getattr(export, "workgroupCount", 0)
        if max(counts) > U32 or bound and counts[0] > bound:
            raise _fail(where, f"is {counts}, past the {bound or U32} workgroups its export "
                               f"allows")
        touched = sum(ref.length for ref in dispatch.bindings)
        if math.prod(counts) > max(1, touched):
            raise _fail(where, f"{counts} launches more workgroups than the dispatch's bindings "
                               f"have bytes ({touched}): every workgroup of a kernel touches "
                               f"bytes of its own")

    def min_length(self, need: tuple, push_constants: list[int], where: str) -> int:
        """The bytes a binding must have: its export's minimum length, or, for a kernel with
        run-time sizes, what its program computes over the dispatch's push constants (symbol k
        is push constant k), the static minimum its floor."""
        floor, program, _ = need
        if program is None:
            return floor
        highest = max(size_exprs.symbols(program), default=-1)
        if highest >= len(push_constants):
            raise _fail(where, f"its kernel's minimum length reads push constant {highest}, but "
                               f"the dispatch has {len(push_constants)}")
        try:
            return max(floor, size_exprs.evaluate(program, push_constants))
        except size_exprs.SizeError as e:
            raise _fail(where, f"its kernel's minimum length `{size_exprs.spell(program)}` is "
                               f"{e}") from None

    def copy(self, copy, buffers: _Buffers, where: str) -> None:
        self.buffer_ref(copy.source, buffers, f"{where} source")
        self.buffer_ref(copy.target, buffers, f"{where} target")
        if copy.source.length != copy.target.length:
            raise _fail(where, f"source length {copy.source.length} differs from target "
                               f"length {copy.target.length}")

    def fill(self, fill, buffers: _Buffers, where: str) -> None:
        self.buffer_ref(fill.target, buffers, f"{where} target")
        if fill.patternLength not in (1, 2, 4, 8):
            raise _fail(where, f"pattern length {fill.patternLength} is not 1, 2, 4 or 8")
        if fill.target.length % fill.patternLength:
            raise _fail(where, f"target length {fill.target.length} is not a multiple of the "
                               f"pattern length {fill.patternLength}")

    def check(self, check, buffers: _Buffers, where: str) -> None:
        check.location = _text(check.location, where)
        if check.message is not None:  # absent stays absent, as flatc prints the table
            check.message = _text(check.message, where)
        if check.kind not in CHECK_KINDS:
            raise _fail(where, f"unknown check kind {check.kind}")
        kind = CHECK_KINDS[check.kind]
        operands = [("lhs", check.lhs, check.lhsType)]
        if kind in ("expect_eq", "expect_almost_eq"):
            operands.append(("rhs", check.rhs, check.rhsType))
        for name, ref, t in operands:
            size = self.tensor_type(t, f"{where} {name} type")
            self.buffer_ref(ref, buffers, f"{where} {name}")
            if ref.length != size:
                raise _fail(where, f"{name} is {ref.length} bytes but its type "
                                   f"{spell(t.elementType, t.dims)} needs {size}")
        lhs = check.lhsType
        if kind in ("expect_true", "expect_false") and math.prod(lhs.dims) != 1:
            raise _fail(where, f"{kind} needs a single value, got {spell(lhs.elementType, lhs.dims)}")
        if len(operands) == 2:
            rhs = check.rhsType
            if (lhs.elementType, lhs.dims) != (rhs.elementType, rhs.dims):
                raise _fail(where, f"compares {spell(lhs.elementType, lhs.dims)} with "
                                   f"{spell(rhs.elementType, rhs.dims)}")
        if kind == "expect_almost_eq":
            if lhs.elementType not in FLOAT_TYPES:
                raise _fail(where, f"expect_almost_eq needs floats, got {NAMES[lhs.elementType]}")
            if not (math.isfinite(check.atol) and math.isfinite(check.rtol)
                    and check.atol >= 0 and check.rtol >= 0):
                raise _fail(where, f"tolerances atol={check.atol} rtol={check.rtol} must be "
                                   f"finite and not negative")

    def branch(self, branch, buffers: _Buffers, where: str) -> None:
        if branch.target > buffers.commands:
            raise _fail(where, f"target {branch.target} is past the function's "
                               f"{buffers.commands} commands")
        if branch.conditionSize is not None:
            if branch.condition is not None:
                raise _fail(where, "has both a condition and a size condition")
            raise _Sized  # decided per size (module/instance.py)
        if branch.condition is None:
            return
        t = branch.conditionType
        if t not in NAMES or t in FLOAT_TYPES:
            raise _fail(where, f"condition type {NAMES.get(t, t)} is not an integer type")
        self.buffer_ref(branch.condition, buffers, f"{where} condition")
        if branch.condition.length != ITEMSIZES[t]:
            raise _fail(where, f"condition is {branch.condition.length} bytes but a "
                               f"{NAMES[t]} needs {ITEMSIZES[t]}")

    def buffer_ref(self, ref, buffers: _Buffers, where: str) -> None:
        if ref is None:
            raise _fail(where, "buffer reference is missing")
        if ref.offsetExpr is not None or ref.lengthExpr is not None:
            raise _Sized
        if ref.kind not in BUFFER_KINDS:
            raise _fail(where, f"unknown buffer kind {ref.kind}")
        kind = BUFFER_KINDS[ref.kind]
        if kind in ("transient", "readback"):
            size = getattr(buffers, kind)
        else:
            sizes = {"argument": buffers.arguments, "result": buffers.results,
                     "constant": buffers.constants}[kind]
            if ref.index >= len(sizes):
                raise _fail(where, f"{kind} {ref.index} is out of range (there are {len(sizes)})")
            size = sizes[ref.index]
        if ref.offset + ref.length > size:
            name = kind if kind in ("transient", "readback") else f"{kind} {ref.index}"
            raise _fail(where, f"bytes [{ref.offset}, +{ref.length}) lie outside {name} of "
                               f"{size} bytes")


def verify(module) -> None:
    """Raises ModuleError naming the first semantic problem of an unpacked module."""
    _Verifier(module).run()
