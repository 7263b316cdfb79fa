"""Modules with run-time sizes (schema 1.5) at load and in the tools: every damaged SizeExpr or
symbol is a ModuleError naming the place; constant expressions in a function without symbols
are evaluated once, at load; pyree-run-module takes an input of any size for a ``?`` dim, and
pyree-dump-module shows ``?``, the symbols with their bounds and the sizes as formulas."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from tools.tool_process import assert_clean_error, run_tool

from .module_factory import (
    ARG,
    RESULT,
    copy,
    expr,
    ref,
    sized_builder,
    sym,
    tensor,
    times,
)


def _fn(module, name):
    return next(f for f in module.functions if f.name == name)


def _code(obj, code):
    obj.code = code


MUTATIONS = {
    "unknown opcode": (
        lambda m: _code(_fn(m, "copy").resultSizeExprs[0], [1, 0, 0, 4, 14]),
        r"function 'copy': result 0 size: its SizeExpr has the unknown opcode 14 at entry 4"),
    "select of two values": (
        lambda m: _code(_fn(m, "copy").resultSizeExprs[0], [1, 0, 0, 4, 13]),
        r"function 'copy': result 0 size: its SizeExpr applies opcode 13 at entry 4 to fewer "
        r"than three values"),
    "a damaged shape guard": (
        lambda m: setattr(_fn(m, "copy"), "sizeChecks", [_guard([1, 0, 11])]),
        r"function 'copy': size check 0: its SizeExpr applies opcode 11 at entry 2 to fewer "
        r"than two values"),
    "a shape guard without symbols": (
        lambda m: setattr(_fn(m, "copy"), "sizeChecks", [_guard([0, 1])]) or
        setattr(_fn(m, "copy"), "symbols", None),
        r"function 'copy': has size checks but no symbols"),
    "symbol out of range": (
        lambda m: _code(_fn(m, "concat").results[0].dynamicDims[0], [1, 3]),
        r"function 'concat': result 0 dim 0: its SizeExpr names symbol 3 at entry 0, but there "
        r"are 1"),
    "missing operand": (
        lambda m: _code(_fn(m, "copy").commands[0].copy.target.lengthExpr, [1, 0, 0]),
        r"function 'copy': command 0 \(copy\) target length: its SizeExpr ends inside opcode 0 "
        r"at entry 2"),
    "two values left": (
        lambda m: _code(_fn(m, "scale").commands[0].dispatch.pushConstantExprs[0], [1, 0, 1, 0]),
        r"function 'scale': command 0 \(dispatch\) push constant 0: its SizeExpr leaves 2 "
        r"values on the stack, not one"),
    "operator without operands": (
        lambda m: _code(_fn(m, "scale").commands[0].dispatch.pushConstantExprs[1], [1, 0, 2]),
        r"function 'scale': command 0 \(dispatch\) push constant 1: its SizeExpr applies "
        r"opcode 2 at entry 2 to fewer than two values"),
    "empty program": (
        lambda m: _code(_fn(m, "staged").transientSizeExpr, []),
        r"function 'staged': transient size: its SizeExpr is empty"),
    "endless program": (
        lambda m: _code(_fn(m, "copy").arguments[0].dynamicDims[0], [1, 0] + [1, 0, 2] * 400),
        r"function 'copy': argument 0 dim 0: its SizeExpr has 1202 entries, more than the 1024"),
    "negative constant": (
        lambda m: _code(_fn(m, "copy").commands[0].copy.source.offsetExpr or
                        _set_offset(_fn(m, "copy").commands[0].copy.source), [0, -4]),
        r"function 'copy': command 0 \(copy\) source offset: its SizeExpr pushes the constant "
        r"-4 at entry 0, outside \[0, 2\^53\]"),
    "dynamic dim without its program": (
        lambda m: setattr(_fn(m, "concat").arguments[1], "dynamicDims", None),
        r"function 'concat': argument 1: has 1 dynamic dims but 0 SizeExprs for them"),
    "a symbol no argument binds": (
        lambda m: _code(_fn(m, "copy").arguments[0].dynamicDims[0], times(sym(0), 2)),
        r"function 'copy': symbol n is not a dim of any argument"),
    "bounds that are no sizes": (
        lambda m: setattr(_fn(m, "rows").symbols[0], "max", 0),
        r"function 'rows' symbol 0 \('batch'\): bounds min=1 max=0 divisor=1 are not sizes"),
    "divisor zero": (
        lambda m: setattr(_fn(m, "rows").symbols[1], "divisor", 0),
        r"function 'rows' symbol 1 \('seq'\): bounds min=0 max=512 divisor=0 are not sizes"),
    "a kernel's workgroup count": (
        lambda m: _code(m.executables[0].cpu.exports[0].workgroupCountExpr, [1, 0, 0, 64, 14]),
        r"executable 0 \('kernels'\) export 0: its workgroup count x SizeExpr has the unknown "
        r"opcode 14 at entry 4"),
    "a kernel's minimum length": (
        lambda m: _code(m.executables[0].cpu.exports[0].bindings[1].minLengthExpr, [1, 0, 7]),
        r"executable 0 \('kernels'\) export 0 binding 1: its minimum length SizeExpr applies "
        r"opcode 7 at entry 2 to fewer than two values"),
    "a constant of dynamic shape": (
        lambda m: m.constants.append(_dynamic_constant(m)),
        r"constant 0: a constant's type has a dynamic dimension"),
}


def _guard(code: list[int], message: str = "at most 8 rows", location: str = "m.mlir:3:5"):
    from pyree.compiler._fb.SizeCheck import SizeCheckT

    check = SizeCheckT()
    check.condition, check.message, check.location = expr(code), message, location
    return check


def test_a_shape_guard_refuses_a_call_naming_its_message(kernel_library, rng):
    """Schema 1.6: a size check (here n <= 8, spelled with a select: n < 9 ? 1 : 0) is
    evaluated when a call's sizes are bound; a failing one is an InvocationError quoting it,
    every call at that size, and other sizes still run."""
    builder = sized_builder(kernel_library)
    _fn(builder.module, "copy").sizeChecks = [_guard([1, 0, 0, 9, 11, 0, 1, 0, 0, 13])]
    module = rt.load_module(builder.finish(), device="local-sync")
    for n in (0, 1, 8):
        x = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(module.copy(x).to_host(), x)
    for _ in range(2):
        with pytest.raises(rt.InvocationError, match=r"function 'copy' at n=9: at most 8 rows "
                           r"\(the shape guard `\(1 if \(n < 9\) else 0\)` at m.mlir:3:5 fails\)"):
            module.copy(np.ones(9, np.float32))


def _set_offset(r):
    r.offsetExpr = expr([0, 0])
    return r.offsetExpr


def _dynamic_constant(m):
    from pyree.compiler._fb.Constant import ConstantT
    from pyree.compiler._fb.DataRef import DataRefT

    c = ConstantT()
    c.type, c.data = tensor(0, -1), DataRefT()
    return c


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_damaged_size_is_refused_at_load(kernel_library, name):
    mutate, message = MUTATIONS[name]
    builder = sized_builder(kernel_library)
    mutate(builder.module)
    with pytest.raises(rt.ModuleError, match=message):
        rt.load_module(builder.finish(), device="local-sync")


def test_constant_sizes_without_symbols_are_evaluated_at_load(kernel_library, rng):
    """A function whose ranges are SizeExprs of constants only is a static function."""
    builder = sized_builder(kernel_library)
    f = _fn(builder.module, "copy")
    f.symbols, f.resultSizeExprs = None, [expr([0, 6, 0, 4, 4])]
    f.arguments, f.results = [tensor(0, 6)], [tensor(0, 6)]
    f.commands = [copy(ref(ARG, 0, [0, 24]), ref(RESULT, 0, [0, 3, 0, 8, 4]))]
    module = rt.load_module(builder.finish(), device="local-sync")
    x = rng.standard_normal(6).astype(np.float32)
    np.testing.assert_array_equal(module.copy(x).to_host(), x)
    assert module.copy._plan is not None and module.copy.recorded_sizes == []
    f.commands = [copy(ref(ARG, 0, [0, 24]), ref(RESULT, 0, [0, 3, 0, 8, 3]))]
    with pytest.raises(rt.ModuleError, match=r"function 'copy': command 0 \(copy\) target "
                                             r"length `3 - 8` is -5, which is negative"):
        rt.load_module(builder.finish(), device="local-sync")


def test_a_grid_past_its_exports_bound_or_its_push_constants(kernel_library, rng):
    """scale_n's workgroup count, ceildiv(n, 64), held to a bound of 2; then reading push
    constant 2 of a dispatch that has 2."""
    builder = sized_builder(kernel_library)
    export = builder.module.executables[0].cpu.exports[0]
    export.workgroupCount = 2
    module = rt.load_module(builder.finish(), device="local-sync")
    x = rng.standard_normal(128).astype(np.float32)
    np.testing.assert_array_equal(module.scale(x).to_host(), x * np.float32(2.5))
    with pytest.raises(rt.ModuleError, match=r"function 'scale' at n=129 command 0 \(dispatch\): "
                                             r"executable 0's grid: is \(3, 1, 1\), past the 2 "
                                             r"workgroups its export allows"):
        module.scale(np.zeros(129, np.float32))
    export.workgroupCount, export.workgroupCountExpr.code = 0, [1, 2]
    module = rt.load_module(builder.finish(), device="local-sync")
    with pytest.raises(rt.ModuleError, match=r"function 'scale' at n=3 command 0 \(dispatch\): "
                                             r"executable 0's grid: reads a push constant past "
                                             r"the dispatch's 2"):
        module.scale(np.zeros(3, np.float32))


@pytest.fixture(scope="module")
def sized_path(tmp_path_factory, sized_bytes) -> str:
    path = tmp_path_factory.mktemp("sized") / "sized.vmfb"
    path.write_bytes(sized_bytes)
    return str(path)


def test_run_module_takes_any_size_for_a_dynamic_dim(sized_path, tmp_path):
    rng = np.random.default_rng()
    a, b = (rng.integers(-99, 99, (7, 3)).astype(np.float32) / 4 for _ in range(2))
    text = [" ".join(str(v) for v in x.flat) for x in (a, b)]
    out = tmp_path / "out.npy"
    proc = run_tool("run_module", f"--module={sized_path}", "--function=concat",
                    f"--input=7x3xf32={text[0]}", f"--input=7x3xf32={text[1]}", f"--output=@{out}")
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(out), np.concatenate([a, b]))
    proc = run_tool("run_module", f"--module={sized_path}", "--function=copy",
                    "--input=3xf32=1.5 -2 0.25")
    assert proc.returncode == 0, proc.stderr
    assert "3xf32=1.5 -2 0.25" in proc.stdout


def test_run_module_names_the_dims_that_disagree(sized_path):
    proc = run_tool("run_module", f"--module={sized_path}", "--function=concat",
                    "--input=7x3xf32=1", "--input=6x3xf32=2")
    assert_clean_error(proc, 1, "function 'concat': argument 1 dim 0 is 6 but argument 0 dim 0 "
                                "(symbol `batch`) is 7")
    proc = run_tool("run_module", f"--module={sized_path}", "--function=rows",
                    "--input=2x9xf32=1")
    assert_clean_error(proc, 1, "`seq` (argument 0 dim 1) is 9, not a multiple of 8")


def test_dump_module_shows_symbols_and_formulas(sized_path):
    proc = run_tool("dump_module", sized_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    concat = lines.index("  @concat(?x3xf32, ?x3xf32) -> (?x3xf32)")
    assert lines[concat + 1:concat + 3] == [
        "    symbol batch in [1, 64] (from argument 0 dim 0)",
        "    result 0: [batch * 2, 3] f32, batch * 24 B"]
    rows = lines.index("  @rows(?x?xf32) -> (?x?xf32)")
    assert lines[rows + 1:rows + 4] == [
        "    symbol batch in [1, 64] (from argument 0 dim 0)",
        "    symbol seq in [0, 512], a multiple of 8 (from argument 0 dim 1)",
        "    result 0: [batch, seq] f32, batch * seq * 4 B"]
    assert "    transient: n * 4 B" in lines
    assert "    export 0 scale_n_f32: workgroups ceildiv(push0, 64); bindings [read >= push0 * 4 " \
           "B, write >= push0 * 4 B]" in lines
