"""pyree-dump-module: what a module file holds, for people: functions and their signatures, host
program command counts, executables with their targets, payload sizes, exports and binding layouts,
constants, the external parameters (scope, key, type) it needs, and the file size. The file is
verified as the runtime verifies it before use, but no device is opened, so a module built for a
GPU can be inspected anywhere.

    pyree-dump-module add.vmfb
    pyree-dump-module --output=flatbuffer-json add.vmfb      # every field, as flatc prints it

A function with run-time sizes shows ``?`` for its dynamic dims, then each symbol with its
bounds and the argument dim it comes from, and each size that depends on them as a formula
(``result 0: [batch * 2, 3] f32, batch * 24 B``).

``--output`` takes iree-dump-module's modes: ``metadata`` (the report above; ``all``, IREE's
default, is the same: it adds VM bytecode disassembly, which a pyree module has none of),
``flatbuffer-json`` (the module's FlatBuffer table as ``flatc --json --defaults-json`` prints it
with schemas/module.fbs: field names from the schema, enums by name, data-segment payloads as
their offset and length) and ``flatbuffer-binary`` (the FlatBuffer's bytes, for flatc).
``disassembly`` is refused by name.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence

import pyree.runtime as rt
from pyree.runtime._fb import (
    BindingAccess,
    BufferKind,
    CheckKind,
    CommandKind,
    ElementType,
    ExecutableFormat,
)
from pyree.runtime.module.reader import read_trailer
from pyree.runtime.module.size_exprs import bare_symbol, spell, symbols
from pyree.runtime.tools.cli import FlagParser, UsageError, tool_main
from pyree.runtime.vm.loaded_module import read_module_file
from pyree.runtime.vm.reflection import declared_dims


def _enum_names(enum: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum).items() if not k.startswith("_")}


_ACCESS = _enum_names(BindingAccess)
_COMMAND = _enum_names(CommandKind)
_ELEMENT = _enum_names(ElementType)
_FORMAT = _enum_names(ExecutableFormat)
# The schema's enum-typed fields, (object-API class, attribute) -> names: flatc prints them by name.
_ENUM_FIELDS = {
    ("BindingLayoutT", "access"): _ACCESS, ("BufferRefT", "kind"): _enum_names(BufferKind),
    ("CheckT", "kind"): _enum_names(CheckKind), ("CommandT", "kind"): _COMMAND,
    ("ExecutableT", "format"): _FORMAT, ("TensorTypeT", "elementType"): _ELEMENT,
    ("BranchT", "conditionType"): _ELEMENT,
}
OUTPUTS = ("metadata", "all", "flatbuffer-json", "flatbuffer-binary", "disassembly")


def _text(value: str | bytes | None) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n} B ({n / 1024:.1f} KiB)" if n < 1 << 20 else f"{n} B ({n / (1 << 20):.1f} MiB)"


def _length(ref) -> int:
    return ref.length if ref is not None else 0


def _dims(values) -> str:
    return "x".join(str(v) for v in values) if values is not None else "?"


def _tensor_type(t) -> str:
    dims = ["?" if d < 0 else str(d) for d in (t.dims if t.dims is not None else [])]
    return "x".join(dims + [_ELEMENT.get(t.elementType, f"type{t.elementType}")])


def _pushed(expr) -> str:
    """A kernel's run-time size as a formula over the dispatch's push constants (``push0``...)."""
    code = list(expr.code)
    return spell(code, [f"push{k}" for k in range(max(symbols(code), default=0) + 1)])


def _bindings(bindings) -> str:
    """Each binding's access and the bytes it needs: a formula over the dispatch's push
    constants where the kernel has run-time sizes, at least its static floor."""
    def need(b) -> str:
        if b.minLengthExpr is None:
            return f"{b.minLength} B"
        formula = _pushed(b.minLengthExpr)
        return f"{formula} B (at least {b.minLength})" if b.minLength else f"{formula} B"

    return ", ".join(f"{_ACCESS.get(b.access, b.access)} >= {need(b)}" for b in bindings or [])


def _workgroups(x) -> str:
    """A CPU export's workgroup count: a formula where the kernel has run-time sizes."""
    if x.workgroupCountExpr is None:
        return str(x.workgroupCount)
    bound = f" (at most {x.workgroupCount})" if x.workgroupCount else ""
    return f"{_pushed(x.workgroupCountExpr)}{bound}"


def _loaded_variant(cpu, name: str) -> str:
    """Which of a CPU executable's variants the runtime would load on this host, or why none."""
    from pyree.runtime.errors import ModuleError
    from pyree.runtime.vm.executables import cpu_variant

    try:
        return cpu_variant(cpu, f"executable '{name}'").targetCpu
    except ModuleError as e:
        return f"none: {e}"


def _grid(x) -> str:
    """A GPU export's grid: formulas where the kernel has run-time sizes."""
    if x.gridSizeExpr is None:
        return _dims(x.gridSize)
    return "(" + ", ".join(_pushed(e) for e in x.gridSizeExpr) + ")"


def _sized_type(t, names) -> str:
    """A type's shape with each dynamic dim's formula, then its element type:
    ``[batch * 2, 3] f32``."""
    dims = ", ".join(map(str, declared_dims(t, names)))
    return f"[{dims}] {_ELEMENT.get(t.elementType, f'type{t.elementType}')}"


def _symbols(f) -> list[str]:
    """A function's run-time sizes: its symbols (bounds, where each comes from) and what
    depends on them."""
    names = [_text(s.name) for s in f.symbols]
    lines = []
    for k, s in enumerate(f.symbols):
        bound = f"in [{s.min}, {s.max}]" if s.max != -1 else f">= {s.min}"
        multiple = f", a multiple of {s.divisor}" if s.divisor != 1 else ""
        source = next((f"argument {a} dim {d}" for a, t in enumerate(f.arguments)
                       for d, e in zip([d for d, n in enumerate(t.dims) if n == -1],
                                       t.dynamicDims or []) if bare_symbol(list(e.code)) == k), "")
        lines.append(f"    symbol {names[k]} {bound}{multiple} (from {source})")
    for c in f.sizeChecks or []:
        lines.append(f"    guard {spell(list(c.condition.code), names)}: \"{_text(c.message)}\" "
                     f"({_text(c.location)})")
    for i, t in enumerate(f.results):
        size = f"{spell(list(f.resultSizeExprs[i].code), names)} B" if f.resultSizeExprs \
            else _size(f.resultSizes[i])
        lines.append(f"    result {i}: {_sized_type(t, names)}, {size}")
    return lines


def _parameter_name(p) -> str:
    """IREE's spelling: ``"scope"::"key"``, or ``"key"`` in the empty scope."""
    scope, key = _text(p.scope), _text(p.key)
    return f'"{scope}"::"{key}"' if scope else f'"{key}"'


def format_function(f) -> list[str]:
    arguments = ", ".join(_tensor_type(t) for t in f.arguments or [])
    results = ", ".join(_tensor_type(t) for t in f.results or [])
    counts = Counter(c.kind for c in f.commands or [])
    commands = (
        ", ".join(f"{n} {_COMMAND.get(kind, f'kind{kind}')}" for kind, n in sorted(counts.items()))
        or "none"
    )
    transient = _size(f.transientSize)
    if f.symbols and f.transientSizeExpr is not None:
        transient = f"{spell(list(f.transientSizeExpr.code), [_text(s.name) for s in f.symbols])} B"
    lines = [
        f"  @{_text(f.name)}({arguments}) -> ({results})",
        *(_symbols(f) if f.symbols else []),
        *(f"    result {r}: tied to argument {a} (updated in place where the caller donates it)"
          for r, a in enumerate(f.tiedResults or []) if a != -1),
        f"    commands: {commands}",
        f"    transient: {transient}",
    ]
    if f.location:
        lines.append(f"    location: {_text(f.location)}")
    return lines


def format_executable(index: int, e) -> list[str]:
    kind = _FORMAT.get(e.format, f"format{e.format}")
    lines = [f"  [{index}] {_text(e.name) or '(unnamed)'}: {kind}"]
    if e.cpu is not None:
        cpu, variants = e.cpu, e.cpu.variants or []
        features = ", ".join(_text(x) for x in cpu.cpuFeatures or []) or "none"
        lines += [
            f"    target: {_text(cpu.format)}, cpu {_text(cpu.targetCpu)}, features: {features}",
            f"    library: {_size(_length(cpu.library))}",
        ]
        for v in variants:
            features = ", ".join(_text(x) for x in v.cpuFeatures or []) or "none"
            lines.append(f"    variant: cpu {_text(v.targetCpu)}, features: {features}; "
                         f"library: {_size(_length(v.library))}")
        if variants:
            lines.append(f"    this host loads: {_loaded_variant(cpu, _text(e.name))}")
        for i, x in enumerate(cpu.exports or []):
            others = [f"{_text(v.targetCpu)}: {_workgroups(v.exports[i])}" for v in variants
                      if _workgroups(v.exports[i]) != _workgroups(x)]
            lines.append(f"    export {i} {_text(x.symbol)}: workgroups {_workgroups(x)}"
                         + (f" ({', '.join(others)})" if others else "")
                         + f"; bindings [{_bindings(x.bindings)}]")
        return lines
    if e.cuda is not None:
        gpu, cubin = e.cuda, _length(e.cuda.cubin)
        lines += [
            f"    target: {_text(gpu.targetArch)}",
            f"    ptx: {_size(_length(gpu.ptx))}; cubin: "
            + (f"{_size(cubin)} ({_text(gpu.cubinArch)})" if cubin else "none"),
        ]
    elif e.rocm is not None:
        gpu = e.rocm
        lines += [
            f"    target: {_text(gpu.targetArch)}",
            f"    code object: {_size(_length(gpu.codeObject))}",
        ]
    elif e.spirv is not None:
        gpu = e.spirv
        lines += [f"    target: {_text(gpu.target)}", f"    spir-v: {_size(_length(gpu.code))}"]
    else:
        return lines
    for i, x in enumerate(gpu.exports or []):
        lines.append(
            f"    export {i} {_text(x.name)}: grid {_grid(x)}, "
            f"block {_dims(x.blockSize)}, shared {x.sharedMemoryBytes} B; "
            f"bindings [{_bindings(x.bindings)}]"
        )
    return lines


def format_module(module, file_size: int) -> str:
    """The whole report for a verified module tree (pyree.runtime._fb ModuleT)."""
    functions = module.functions or []
    executables = module.executables or []
    constants = [c for c in module.constants or [] if c.parameter is None and not c.computed]
    parameters = [c for c in module.constants or [] if c.parameter is not None]
    computed = [c for c in module.constants or [] if c.computed]
    constant_bytes = sum(_length(c.data) for c in constants)
    lines = [
        f"module: {_text(module.name)}",
        f"producer: {_text(module.producer) or 'unknown'}",
        f"schema version: {module.schemaVersionMajor}.{module.schemaVersionMinor}",
        f"functions ({len(functions)}):",
    ]
    for f in functions:
        lines += format_function(f)
    if module.initializer is not None:
        lines.append("initializer (run once at load):")
        lines += format_function(module.initializer)
    lines.append(f"executables ({len(executables)}):")
    for i, e in enumerate(executables):
        lines += format_executable(i, e)
    lines += [
        f"constants: {len(constants)}, {_size(constant_bytes)}",
        *([f"parameters ({len(parameters)}):"] if parameters else []),
        *(f"  {_parameter_name(c.parameter)}: {_tensor_type(c.type)}" for c in parameters),
        *([f"computed at load ({len(computed)}):"] if computed else []),
        *(f"  {_tensor_type(c.type)}" for c in computed),
        f"file size: {_size(file_size)}",
    ]
    return "\n".join(lines)


def to_json(value, owner: str = "", field: str = ""):
    """An object-API value as flatc's JSON holds it: tables as objects of their set fields
    (snake_case, as the schema spells them), enums by name, vectors as lists."""
    if isinstance(value, list):
        return [to_json(item, owner, field) for item in value]
    if isinstance(value, int) and (owner, field) in _ENUM_FIELDS:
        return _ENUM_FIELDS[owner, field].get(value, value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if not hasattr(value, "__dict__"):
        return value
    kind = type(value).__name__
    return {_snake(name): to_json(getattr(value, name), kind, name)
            for name in _schema_fields(type(value)) if getattr(value, name) is not None}


@functools.cache
def _schema_fields(table: type) -> tuple[str, ...]:
    """The fields an object-API class declares, in schema order (what its constructor sets):
    not what the verifier attaches to a verified tree for the VM's own use."""
    return tuple(vars(table()))


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _run(argv: Sequence[str]) -> int:
    parser = FlagParser("pyree-dump-module", "Describes the contents of a pyree module (.vmfb).")
    parser.add_flag("module", help="the .vmfb module file")
    parser.add_flag("--output", choices=OUTPUTS, default="metadata",
                    help="metadata (default; all is the same), flatbuffer-json (every field of "
                    "the module's FlatBuffer, as flatc prints it) or flatbuffer-binary (its bytes)")
    args = parser.parse_args(argv)
    if args.output == "disassembly":
        raise UsageError("--output=disassembly is not supported: a pyree module has no VM "
                         "bytecode; its functions are command lists, which --output=metadata "
                         "counts and --output=flatbuffer-json lists in full")
    data = read_module_file(args.module)  # (a device such as /dev/zero refused, not read on)
    module = rt.read_module(data)
    if args.output == "flatbuffer-json":
        print(json.dumps(to_json(module.tree), indent=2))
    elif args.output == "flatbuffer-binary":
        sys.stdout.buffer.write(data[:read_trailer(data)[0]])
        sys.stdout.buffer.flush()
    else:
        print(format_module(module.tree, len(data)))
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    tool_main(_run, argv)


if __name__ == "__main__":
    main()
