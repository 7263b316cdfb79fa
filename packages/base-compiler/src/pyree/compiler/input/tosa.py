"""TOSA -> linalg-on-tensors MLIR text, with upstream MLIR's own TOSA passes run in-process
through torch-mlir's bindings (what IREE's ``--iree-input-type=tosa`` pipeline runs).

The result keeps the input's positions: it is printed with debug info, the location aliases
MLIR writes (``loc(#loc3)`` ... ``#loc3 = loc("-":4:8)``) are written out in place, and the
parser reads each op's ``loc(...)``, so an error in the converted text names the original
``file:line:col``. A TOSA op the passes cannot lower, and anything MLIR cannot parse, is one
CompileError with MLIR's diagnostics, never a crash: only text MLIR's parser accepted is run.

IREE's test ops (``util.unfoldable_constant``, ``check.expect_*``) have no MLIR dialect here;
they are rewritten to the generic form first (same line, same start column), which MLIR keeps
as unregistered ops and pyree's parser reads back.

Needs ``pip install pyree-base-compiler[tosa]`` (torch-mlir; not torch).
"""

from __future__ import annotations

import json
import re

from pyree.compiler.errors import CompileError
from pyree.compiler.extras import require

# include-apply-rescale: tosa.mul with a shift and tosa.rescale lower to tosa.apply_scale,
# which only this option lowers further (to arith). Named linalg ops are generalized: TOSA's
# depthwise convolution becomes linalg.depthwise_conv_2d_nhwc_hwcm, which pyree does not
# declare, and pyree finds convolutions by their indexing maps, so a linalg.generic loses nothing.
_QUANT_STORAGE = re.compile(r"[ui](\d+)")
# tosa-to-scf runs first, as IREE's TOSA input pipeline runs it: once tosa-to-linalg has
# rewritten the ops inside a cond_if / while_loop region, its tosa.yield no longer converts.
PIPELINE = ("builtin.module(func.func(tosa-optional-decompositions),canonicalize,"
            "func.func(tosa-infer-shapes,tosa-to-scf,tosa-make-broadcastable,"
            "tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith{include-apply-rescale=true},"
            "tosa-to-tensor,linalg-generalize-named-ops),canonicalize)")

_TYPE = r"[\w!.]+(?:<[^>\n]*>)?"
_END = r"[ \t]*(?://.*)?$"  # the end of the op's line, a comment included
_UNFOLDABLE = re.compile(rf"util\.unfoldable_constant\s+(.+?)\s*:\s*({_TYPE}){_END}", re.M)
_BARRIER = re.compile(rf"util\.optimization_barrier\s+(%[\w$.-]+)\s*:\s*({_TYPE}){_END}", re.M)
_CHECK = re.compile(rf"check\.(expect_\w+)\(\s*(%[\w$.-]+)\s*(?:,\s*(.+?))?"
                    rf"((?:\s*,\s*[ar]tol\s+[-+.\w]+)*)\s*\)\s*:\s*({_TYPE}){_END}", re.M)
_TOLERANCE = re.compile(r"([ar]tol)\s+([-+.\w]+)")
_BARE_TOLERANCE = re.compile(r",\s*([-+]?\d[\d.]*(?:e[-+]?\d+)?)\s*$")
_ALIAS_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\n", re.M)
_ALIAS_USE = re.compile(r"#loc\d*\b")
# A block or function argument's location (``%in: f32 loc(...)``); not every op's custom
# syntax reads one, and errors name ops, not arguments.
_ARG_LOC = re.compile(r"(%[\w$.-]+: [^,()\n]+?) loc\((?:#loc\d*|unknown|\"[^\"\n]*\":\d+:\d+)\)")
# tosa.pad becomes a tensor.pad whose widths are index constants (MLIR names them %c<value>,
# %c<value>_<n>) that canonicalize does not fold into its static widths; pyree needs them static.
_PAD = re.compile(r"(tensor\.pad %[\w$.-]+ (?:nofold )?)low\[([^\]]*)\] high\[([^\]]*)\]")
_INDEX_CONSTANT = re.compile(r"%c(-?\d+)(?:_\d+)?\b")
_STDIN_LOC = re.compile(r'"-":(\d+):(\d+)')
_FIRST_LOC = re.compile(r'"([^"]*)":(\d+):(\d+)')


def tosa_to_linalg(text: str, source_name: str) -> str:
    """Linalg-on-tensors text of the TOSA program ``text``, its locations naming ``source_name``."""
    _refuse_run_time_dims(text, source_name)
    require("torch_mlir", "tosa", "--iree-input-type=tosa (converting TOSA to linalg)")
    from torch_mlir.ir import Context, DiagnosticSeverity, MLIRError, Module, WalkResult
    from torch_mlir.passmanager import PassManager

    diagnostics: list[tuple[str, str]] = []

    def collect(diag) -> bool:
        if diag.severity == DiagnosticSeverity.ERROR:
            diagnostics.append((_where(str(diag.location), source_name), diag.message))
        return True  # handled: not printed to stderr

    context = Context()
    context.allow_unregistered_dialects = True  # the check/util test ops
    context.emit_error_diagnostics = True
    handler = context.attach_diagnostic_handler(collect)
    try:
        with context:
            owners: dict = {}
            try:
                module = Module.parse(strip_quant_types(_generic_test_ops(other_spellings(text))))
                owners = _yield_owners(module, source_name, WalkResult)
                PassManager.parse(PIPELINE).run(module.operation)
            except MLIRError as err:
                found = diagnostics or [(_where(str(d.location), source_name), d.message)
                                        for d in err.error_diagnostics]
                found = [_name_owner(where, message, owners) for where, message in found]
                raise _error(found, f"cannot convert TOSA to linalg: {err}") from None
            left: list = []

            def visit(op):
                if op.name.startswith("tosa."):
                    left.append(op)
                return WalkResult.ADVANCE

            module.operation.walk(visit)
            if left:
                raise CompileError(f"TOSA op '{left[0].name}' has no lowering to linalg",
                                   _where(str(left[0].location), source_name))
            asm = module.operation.get_asm(enable_debug_info=True)
            return _static_pads(_inline_locations(asm, source_name))
    finally:
        handler.detach()


def _refuse_run_time_dims(text: str, source_name: str) -> None:
    """TOSA ops on ``?`` dims lower to broadcasts that branch on sizes (``scf.if`` on
    ``dim == 1``, a branch reading element 0 of a run-time dim), which pyree does not compile
    yet: refused at the first such op, by name, before any conversion."""
    for number, line in enumerate(text.splitlines(), 1):
        op = _TOSA_OP.search(line)
        if op and _RUN_TIME_DIM.search(line):
            raise CompileError(f"'{op.group(1)}' on tensors with run-time ('?') dims is not "
                               "supported yet (TOSA's broadcasts branch on their sizes)",
                               f"{source_name}:{number}:{op.start(1) + 1}")


_TOSA_OP = re.compile(r"\b(tosa\.\w+)")
_RUN_TIME_DIM = re.compile(r"tensor<[^>]*\?")


def _yield_owners(module, source_name: str, walk_result) -> dict[str, tuple[str, str]]:
    """Where each tosa.yield is -> (the op whose region it ends, where that op is)."""
    owners = {}

    def visit(op):
        if op.name == "tosa.yield":
            parent = op.parent
            owners[_where(str(op.location), source_name)] = (
                parent.name, _where(str(parent.location), source_name))
        return walk_result.ADVANCE

    module.operation.walk(visit)
    return owners


def _name_owner(where: str, message: str, owners: dict) -> tuple[str, str]:
    """A diagnostic about a region's tosa.yield as one about the op the user wrote."""
    if "'tosa.yield'" not in message or where not in owners:
        return where, message
    name, at = owners[where]
    return at, (f"cannot lower this '{name}': its region (ending in the tosa.yield at {where}) "
                "did not convert to scf")


# TOSA's spellings from MLIR versions before and after the one torch-mlir bundles, as the
# attribute dictionaries it reads (same line; columns after a rewrite move).
_SPELLINGS = (
    (re.compile(r"\bvalues\(([^()\n]*)\)"), r"{values = \1}"),              # const_shape
    (re.compile(r"\bmin_val\(([^()\n]*)\)\s*max_val\(([^()\n]*)\)"),
     r"{min_val = \1, max_val = \2}"),                                         # clamp
    (re.compile(r"\baxis\((\d+)\)"), r"{axis = \1 : i32}"),                    # reduce_*
    (re.compile(r"\bperms\(\[([^\]\n]*)\]\)"), r"{perms = array<i32: \1>}"),   # transpose
    (re.compile(r'("tosa\.const"\(\)\s*<?\{\s*)value(\s*=)'), r"\1values\2"),  # older const
    (re.compile(r"\b(kernel|stride|pad) = \[([^\]\n]*)\]"), r"\1 = array<i64: \2>"),
)


# The older tosa.mul: two operands and a ``shift`` attribute (custom or generic form).
_MUL_SHIFT = re.compile(
    r'(?P<lead>\s*)(?P<res>%[\w.$-]+)\s*=\s*(?:tosa\.mul\s+(?P<a>%[\w.$#-]+),\s*(?P<b>%[\w.$#-]+)'
    r'|"tosa\.mul"\((?P<ga>%[\w.$#-]+),\s*(?P<gb>%[\w.$#-]+)\))\s*'
    r'(?:<\{|\{)\s*shift\s*=\s*(?P<shift>-?\d+)\s*:\s*i8\s*(?:\}>|\})\s*:\s*'
    r'\((?P<ta>[^,()]+),\s*(?P<tb>[^,()]+)\)\s*->\s*\(?(?P<tr>[^,()]+?)\)?\s*$')


def _mul_shift(line: str, n: int) -> str:
    """``%r = tosa.mul %a, %b {shift = s : i8} : (A, B) -> R`` as TOSA 1.0 writes it: the shift
    is a ``tensor<1xi8>`` constant operand, defined on the same line (no line moves)."""
    m = _MUL_SHIFT.fullmatch(line)
    if m is None:
        return line
    a, b = m["a"] or m["ga"], m["b"] or m["gb"]
    shift = f"%__pyree_mul_shift_{n}"
    return (f'{m["lead"]}{shift} = "tosa.const"() <{{values = dense<{m["shift"]}> : tensor<1xi8>}}> '
            f': () -> tensor<1xi8> {m["res"]} = tosa.mul {a}, {b}, {shift} : '
            f'({m["ta"].strip()}, {m["tb"].strip()}, tensor<1xi8>) -> {m["tr"].strip()}')


# tosa.fully_connected (dropped by TOSA 1.0) on floats: x @ w^T + b.
_FULLY_CONNECTED = re.compile(
    r'(?P<lead>\s*)(?P<res>%[\w.$-]+)\s*=\s*(?:tosa\.fully_connected\s+(?P<x>%[\w.$#-]+),\s*'
    r'(?P<w>%[\w.$#-]+),\s*(?P<b>%[\w.$#-]+)|"tosa\.fully_connected"\((?P<gx>%[\w.$#-]+),\s*'
    r'(?P<gw>%[\w.$#-]+),\s*(?P<gb>%[\w.$#-]+)\))\s*:\s*\((?P<tx>tensor<\d+x\d+x(?P<e>[bf]\w+)>),\s*'
    r'(?P<tw>tensor<\d+x\d+x(?P=e)>),\s*(?P<tb>tensor<\d+x(?P=e)>)\)\s*->\s*\(?'
    r'(?P<tr>tensor<\d+x\d+x(?P=e)>)\)?\s*$')


def _fully_connected(line: str, n: int) -> str:
    """A float ``tosa.fully_connected`` (TOSA before 1.0) as the linalg ops it means, on the same
    line: the bias broadcast over the rows, then the rows of x dotted with the rows of w."""
    m = _FULLY_CONNECTED.fullmatch(line)
    if m is None:
        return line
    x, w, b = m["x"] or m["gx"], m["w"] or m["gw"], m["b"] or m["gb"]
    e, tr, p = m["e"], m["tr"], f"%__pyree_fc{n}"
    return (f"{m['lead']}{p}_e = tensor.empty() : {tr} "
            f"{p}_b = linalg.broadcast ins({b} : {m['tb']}) outs({p}_e : {tr}) dimensions = [0] "
            f"{m['res']} = linalg.generic {{indexing_maps = [affine_map<(n, o, i) -> (n, i)>, "
            f"affine_map<(n, o, i) -> (o, i)>, affine_map<(n, o, i) -> (n, o)>], iterator_types = "
            f'["parallel", "parallel", "reduction"]}} ins({x}, {w} : {m["tx"]}, {m["tw"]}) '
            f"outs({p}_b : {tr}) {{ ^bb0({p}_x: {e}, {p}_w: {e}, {p}_a: {e}): "
            f"{p}_m = arith.mulf {p}_x, {p}_w : {e} {p}_s = arith.addf {p}_a, {p}_m : {e} "
            f"linalg.yield {p}_s : {e} }} -> {tr}")


def other_spellings(text: str) -> str:
    """``text`` with the TOSA spellings of other MLIR versions in the bundled version's form."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if "tosa." in line:
            for pattern, replacement in _SPELLINGS:
                line = pattern.sub(replacement, line)
            if "shift" in line:
                line = _mul_shift(line, i)
            if "fully_connected" in line:
                line = _fully_connected(line, i)
            lines[i] = line
    return "\n".join(lines)


def strip_quant_types(text: str) -> str:
    """TFLite's TOSA carries ``!quant.uniform<i8:f32, 0.5:-1>`` element types; TOSA 1.0 ops take
    their scales and zero points as operands, so the type is only its storage integer, which is
    what MLIR's TOSA-to-linalg passes accept (``u8`` storage is ``i8``: rescale's
    ``input_unsigned`` / ``output_unsigned`` say how to read it). Same line, columns after a
    stripped type move."""
    out, pos = [], 0
    while (start := text.find("!quant.", pos)) != -1:
        open_at = text.find("<", start)
        depth, end = 0, open_at
        for end in range(open_at, len(text)):
            depth += {"<": 1, ">": -1}.get(text[end], 0)
            if depth == 0:
                break
        storage = _QUANT_STORAGE.match(text, open_at + 1)
        if storage is None:
            raise CompileError(f"unsupported quantized type {text[start:end + 1]}")
        bits = storage.group(1)
        out += [text[pos:start], f"i{bits}"]
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


def _generic_test_ops(text: str) -> str:
    """IREE's util/check test ops in the generic form an unregistered op is written in."""
    text = _UNFOLDABLE.sub(r'"util.unfoldable_constant"() <{value = \1 : \2}> : () -> \2', text)
    text = _BARRIER.sub(r'"util.optimization_barrier"(\1) : (\2) -> \2', text)

    def check(m: re.Match) -> str:
        name, lhs, second, tolerances, type_ = m.groups()
        props = [f"{k} = {v} : f32" for k, v in _TOLERANCE.findall(tolerances or "")]
        bare = _BARE_TOLERANCE.search(second or "")  # IREE's older spelling: ", 1.0e-4"
        if bare:
            second = second[:bare.start()]
            props.append(f"atol = {bare.group(1)} : f32")
        operands, types = [lhs], [type_]
        if second and second.startswith("%"):
            operands.append(second)
            types.append(type_)
        elif second:
            props.append(f"value = {second}")
        attrs = f" <{{{', '.join(props)}}}>" if props else ""
        return f'"check.{name}"({", ".join(operands)}){attrs} : ({", ".join(types)}) -> ()'

    return _CHECK.sub(check, text)


def _inline_locations(asm: str, source_name: str) -> str:
    """``asm`` with every op's location written where it is used and naming ``source_name``."""
    asm = _ARG_LOC.sub(r"\1", asm)
    aliases: dict[str, str] = {}

    def define(m: re.Match) -> str:
        aliases[m.group(1)] = m.group(2)
        return ""

    asm = _ALIAS_DEF.sub(define, asm)

    def resolve(m: re.Match) -> str:
        return _ALIAS_USE.sub(resolve, aliases.get(m.group(0), "unknown"))

    asm = _ALIAS_USE.sub(resolve, asm)
    return _STDIN_LOC.sub(lambda m: f"{json.dumps(source_name)}:{m.group(1)}:{m.group(2)}", asm)


def _static_pads(asm: str) -> str:
    """``asm`` with every tensor.pad's constant widths written as numbers."""
    def static(widths: str) -> str:
        return _INDEX_CONSTANT.sub(r"\1", widths)

    return _PAD.sub(lambda m: f"{m.group(1)}low[{static(m.group(2))}] high[{static(m.group(3))}]",
                    asm)


def _where(location: str, source_name: str) -> str:
    """``file:line:col`` of the first position in an MLIR location's text (or '')."""
    m = _FIRST_LOC.search(location)
    if not m:
        return ""
    return f"{source_name if m.group(1) == '-' else m.group(1)}:{m.group(2)}:{m.group(3)}"


def _error(diagnostics: list[tuple[str, str]], fallback: str) -> CompileError:
    """The first error diagnostic as a CompileError at its position; the rest as notes."""
    if not diagnostics:
        return CompileError(fallback)
    (where, message), rest = diagnostics[0], diagnostics[1:]
    notes = "".join(f"\n  {w or '<unknown>'}: {m}" for w, m in dict.fromkeys(rest))
    return CompileError(message + notes, where)
