"""xDSL module -> tensor program: walks each public function's ops in order, inlining calls.

The per-op rules live with their dialect (``linalg_ops``, ``tensor_ops``, ``scalar``); this
file holds the dispatch and the small rules for constants, elementwise ops and checks.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input import cfg, control_flow, linalg_ext_ops, scatter, sort_scan, tensor_ops
from pyree.compiler.input.complex_body import complex_tensors
from pyree.compiler.input.constants import dense_contents, scalar_const
from pyree.compiler.input.flow_tensor import RULES as FLOW_TENSOR_RULES
from pyree.compiler.input.function import Dim, Entry, FunctionLowering, Tuple
from pyree.compiler.input.globals import (
    GLOBAL_OPS,
    lower_global_load,
    lower_global_store,
    read_globals,
    write_back,
)
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.linalg_ops import is_structured, lower_structured
from pyree.compiler.input.pack import RULES as PACK_RULES
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.run_time_sizes import (
    is_size_arithmetic,
    lower_affine_apply,
    lower_assume_int,
    lower_dim,
    size_arithmetic,
)
from pyree.compiler.input.scalar import is_scalar_op, lower_scalar_op
from pyree.compiler.input.softmax import lower_softmax
from pyree.compiler.input.types import is_tensor, tensor_type_of
from pyree.compiler.kernel import AffineExpr, Const, Result
from pyree.compiler.sizes import equated
from pyree.compiler.tensor_program import (
    Check,
    Constant,
    Function,
    Generic,
    Program,
    SizeCheck,
    Value,
)
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TupleType
from xdsl.ir import Operation, Region

# Module-level ops that describe, for a compiler that splits work across devices, what pyree
# never does: JAX's Shardy mesh of a sharded program (``sdy.mesh @mesh = <["x"=1]>``).
_DESCRIPTIVE_MODULE_OPS = ("sdy.mesh",)


def lower_to_tensor_program(module: ModuleOp, name: str = "module",
                            scatter_atomics: bool = False,
                            scatter_dtypes: frozenset[str] | None = None,
                            line_walks: bool = False, dispatch_cost: float = 1.0) -> Program:
    """The tensor program of ``module``'s public functions (private ones are not exported;
    ``func.call``s of them are inlined). ``scatter_atomics``: every target writes a scatter at
    computed places (``input/scatter.py``), of ``scatter_dtypes`` only where not None;
    ``line_walks``: every target walks a line (``Backend.line_walks``); ``dispatch_cost``: the
    targets' highest ``Backend.dispatch_cost``."""
    program = Program(name=module.sym_name.data if module.sym_name else name)
    functions = {op.sym_name.data: op for op in module.body.block.ops
                 if isinstance(op, func.FuncOp)}
    globals = read_globals(module)
    computations = _called_computations(module)
    for op in module.body.block.ops:
        if isinstance(op, func.FuncOp):
            if (op.sym_visibility is None or op.sym_visibility.data == "public") \
                    and op.sym_name.data not in computations:
                program.functions.append(_lower_function(op, functions, globals, scatter_atomics,
                                                         scatter_dtypes, line_walks, dispatch_cost))
        elif op.name not in GLOBAL_OPS and op.name not in _DESCRIPTIVE_MODULE_OPS:
            raise CompileError(f"unsupported op '{op.name}' at module level", location_of(op))
    return program


def _called_computations(module: ModuleOp) -> set[str]:
    """Functions an op names in ``called_computations`` (a custom call's comparator: JAX's
    ``approx_max_k`` leaves its ``top_k_gt_f32_comparator`` public): computations, which end in
    ``stablehlo.return``, not entry points."""
    names = set()
    for op in module.walk():
        attr = op.attributes.get("called_computations")
        for ref in getattr(attr, "data", ()):
            names.add(ref.root_reference.data if hasattr(ref, "root_reference") else str(ref))
    return names


def _lower_function(op: func.FuncOp, functions: dict[str, func.FuncOp], globals: dict,
                    scatter_atomics: bool = False,
                    scatter_dtypes: frozenset[str] | None = None,
                    line_walks: bool = False, dispatch_cost: float = 1.0) -> Function:
    fn = FunctionLowering(op, functions, globals)
    fn.scatter_atomics, fn.scatter_dtypes = scatter_atomics, scatter_dtypes
    fn.line_walks, fn.dispatch_cost = line_walks, dispatch_cost
    entries, arguments = [], []
    for i, arg in enumerate(_region(op).blocks[0].args):
        entry, values = _argument(fn, arg.type, arg.name_hint or f"arg{i}")
        entries.append(entry)
        arguments += values
    results = [fn.value_of(e, fn.where) for e in _flattened(_lower_body(fn, op, entries))]
    write_back(fn)
    return fn.finish(arguments, results)


def _argument(fn: FunctionLowering, t, name: str) -> tuple[Entry, list[Value]]:
    """An exported function's argument and the module arguments it takes: a tensor is one;
    an XLA tuple (``--iree-input-type=stablehlo_xla``) is its elements, flattened in order,
    as IREE flattens them."""
    if isinstance(t, TupleType):
        parts = [_argument(fn, e, f"{name}_{k}") for k, e in enumerate(t.types)]
        return Tuple([entry for entry, _ in parts]), [v for _, values in parts for v in values]
    dtype, shape = tensor_type_of(t, fn.where, dynamic=True)
    value = fn.new_value(dtype, tuple(fn.new_symbol() if d is None else d for d in shape), name)
    return value, [value]


def _flattened(entries: list[Entry]) -> list[Entry]:
    """An exported function's results, a returned tuple's elements in its place, in order."""
    out = []
    for entry in entries:
        out += _flattened(entry.elements) if isinstance(entry, Tuple) else [entry]
    return out


def _region(op: func.FuncOp) -> Region:
    if not op.body.blocks:
        raise CompileError(f"function @{op.sym_name.data} has no body (external functions "
                           "are not supported)", location_of(op))
    return op.body


def _lower_body(fn: FunctionLowering, op: func.FuncOp, arguments: list[Entry]) -> list[Entry]:
    """Lowers ``op``'s body, entered with ``arguments``, into ``fn``; what it returns."""
    region = _region(op)
    if len(region.blocks) > 1:
        return cfg.lower_cfg(fn, region, arguments, _lower_op, location_of(op))
    block = region.block
    for arg, value in zip(block.args, arguments, strict=True):
        fn.env[arg] = value
    for inner in block.ops:
        where = location_of(inner)
        if isinstance(inner, func.ReturnOp):
            return [fn.entry(v, where) for v in inner.operands]
        _lower_op(fn, inner, where)
    raise CompileError("function has no return", location_of(op))


def _lower_call(fn: FunctionLowering, op: func.CallOp) -> None:
    """Inlines the callee: its arguments are bound to the call's operands, the call's
    results to what it returns (nested calls likewise)."""
    where = location_of(op)
    returned = inline_function(fn, op.callee.root_reference.data,
                               [fn.entry(v, where) for v in op.arguments], where, "call of")
    for result, entry in zip(op.res, returned):
        fn.env[result] = entry


def inline_function(fn: FunctionLowering, name: str, arguments: list[Entry], where: str,
                    what: str) -> list[Entry]:
    """Lowers function ``@name``'s body into ``fn``, entered with ``arguments`` (a call's or a
    composite's operands); what it returns. ``what`` names the inlining in the error of a
    recursion (which cannot be inlined)."""
    with fn.callee(name, where, what) as callee:
        return _lower_body(fn, callee, arguments)


def _lower_op(fn: FunctionLowering, op: Operation, where: str) -> None:
    """Lowers one op by its rule. A rule that fails other than by a CompileError met a form it
    does not check for (a verified op can still hold attributes that contradict its types):
    that is reported as an error at the op, never as a traceback."""
    try:
        if op.name.startswith(("stablehlo.", "chlo.")) and not _stablehlo_rules:
            _add_stablehlo_rules()
        if is_structured(op):
            lower_structured(fn, op)
        elif op.name in _RULES:
            _RULES[op.name](fn, op)
        elif is_scalar_op(op.name):
            _lower_elementwise(fn, op, where)
        else:
            raise CompileError(f"unsupported op '{op.name}'", where)
    except CompileError:
        raise
    except Exception as err:  # noqa: BLE001 - see the docstring
        raise CompileError(f"cannot lower this '{op.name}' ({type(err).__name__}: {err}): its "
                           "operands, types or attributes do not fit together, or pyree does "
                           "not handle this form of it", where) from None


def _lower_constant(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    result = op.results[0]
    dtype, shape = tensor_type_of(result.type, where)
    if not is_tensor(result.type):
        fn.env[result] = scalar_const(op.value, dtype, where)
        return
    data, splat = dense_contents(op.value, dtype, shape, where)
    fn.emit(Constant(fn.result_value(result, where), data=data, splat=splat, location=where))


def _lower_elementwise(fn: FunctionLowering, op: Operation, where: str) -> None:
    """arith/math on tensors (one Generic over the shape) or on scalars (folded or rank-0)."""
    inputs = Inputs()
    if is_tensor(op.results[0].type):
        rank = len(op.results[0].type.get_shape())
        index = tuple(AffineExpr(tuple(int(d == e) for d in range(rank))) for e in range(rank))
        # A scalar operand (arith.select's condition) is the same for every element.
        args = [inputs.load(fn.tensor(v, where), index) if is_tensor(v.type)
                else fn.scalar(v, inputs, where) for v in op.operands]
        values = lower_scalar_op(op, args, where)
        results = [fn.result_value(r, where) for r in op.results]
        fn.emit(Generic(inputs.values, results,
                        tuple(Result(i, index, v) for i, v in enumerate(values)),
                        results[0].shape, rank, where, op.name))
        return
    entries = [fn.entry(v, where) for v in op.operands]
    if is_size_arithmetic(op, entries):
        fn.env[op.results[0]] = size_arithmetic(fn, op, entries, where)
        return
    args = [fn.scalar(v, inputs, where) for v in op.operands]
    for result, value in zip(op.results, lower_scalar_op(op, args, where)):
        fn.define_scalar(result, value, inputs, where, op.name)


def _lower_assert(fn: FunctionLowering, op: Operation) -> None:
    """cf.assert: a host-side check of its i1 condition that fails with the assert's message
    (as a check: the call raises CheckError, pyree-check-module lists it). On run-time sizes
    (torch-mlir's shape guards) it is decided at compile time where the sizes decide it (a
    guard that holds is dropped), else the runtime checks it when a call's sizes are bound and
    refuses the call (InvocationError with the message) before anything runs."""
    where = location_of(op)
    message = op.msg.data or "assertion failed"
    entry = fn.entry(op.arg, where)
    if isinstance(entry, Const) and entry.dtype == "i1" and bool(entry.value):
        return
    if isinstance(entry, Dim):
        if fn.ops is not fn.top_ops:
            raise CompileError("cf.assert on run-time sizes inside a control-flow block is not "
                               "supported: pyree checks sizes once per call, before anything "
                               "runs", where)
        equal = equated(entry.size)
        if equal is not None and fn.unifiable(*equal):
            fn.unify(*equal, where)  # the argument checks then say which dims differ
        else:
            fn.size_checks.append(SizeCheck(entry.size, message, where))
        return
    fn.emit(Check("expect_true", fn.tensor(op.arg, where), location=where, message=message))


def _lower_barrier(fn: FunctionLowering, op: Operation) -> None:
    for operand, result in zip(op.operands, op.results):
        fn.env[result] = fn.entry(operand, location_of(op))


def _lower_check(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    kind = op.name.removeprefix("check.").removesuffix("_const")
    lhs = fn.tensor(op.operands[0], where)
    rhs = None
    if len(op.operands) > 1:
        rhs = fn.tensor(op.operands[1], where)
    elif "value" in op.properties:
        data, splat = dense_contents(op.value, lhs.dtype, lhs.shape, where)
        rhs = fn.new_value(lhs.dtype, lhs.shape, "expected")
        fn.emit(Constant(rhs, data=data, splat=splat, location=where))
    tolerances = {}
    for key in ("atol", "rtol"):
        attr = op.properties.get(key)
        if attr is not None:
            tolerances[key] = float(attr.value.data)
    fn.emit(Check(kind, lhs, rhs, location=where, **tolerances))


_RULES = {
    "arith.constant": _lower_constant,
    "util.unfoldable_constant": _lower_constant,
    "tensor.empty": tensor_ops.lower_empty,
    "tensor.dim": lower_dim,
    "affine.apply": lower_affine_apply,
    "linalg.init_tensor": tensor_ops.lower_empty,
    "tensor.gather": tensor_ops.lower_gather,
    "tensor.cast": tensor_ops.lower_cast,
    "tensor.collapse_shape": tensor_ops.lower_reshape,
    "tensor.expand_shape": tensor_ops.lower_reshape,
    "tensor.reshape": tensor_ops.lower_reshape,
    "tensor.extract_slice": tensor_ops.lower_extract_slice,
    "tensor.insert_slice": tensor_ops.lower_insert_slice,
    "tensor.pad": tensor_ops.lower_pad,
    "tensor.extract": tensor_ops.lower_extract,
    "tensor.insert": tensor_ops.lower_insert,
    "tensor.from_elements": tensor_ops.lower_from_elements,
    "tensor.generate": tensor_ops.lower_generate,
    "tensor.bitcast": tensor_ops.lower_bitcast,
    "tensor.splat": tensor_ops.lower_splat,
    "tensor.concat": tensor_ops.lower_concat,
    "func.call": _lower_call,
    "scf.if": lambda fn, op: control_flow.lower_if(fn, op, _lower_op),
    "scf.for": lambda fn, op: control_flow.lower_for(fn, op, _lower_op),
    "scf.while": lambda fn, op: control_flow.lower_while(fn, op, _lower_op),
    "scf.index_switch": lambda fn, op: control_flow.lower_index_switch(fn, op, _lower_op),
    "scf.execute_region": lambda fn, op: control_flow.lower_execute_region(fn, op, _lower_op),
    "flow.dispatch.region": lambda fn, op: control_flow.lower_execute_region(fn, op, _lower_op),
    "linalg.softmax": lower_softmax,
    **{f"{dialect}.{kind}": rule for dialect in ("tm_tensor", "iree_linalg_ext")
       for kind, rule in (("sort", sort_scan.lower_sort), ("scan", sort_scan.lower_scan),
                          ("topk", sort_scan.lower_topk), ("scatter", scatter.lower_scatter))},
    **linalg_ext_ops.RULES,
    "util.optimization_barrier": _lower_barrier,
    "util.assume.int": lower_assume_int,
    "cf.assert": _lower_assert,
    "util.global.load": lower_global_load,
    "util.global.store": lower_global_store,
    "ml_program.global_load": lower_global_load,
    "ml_program.global_load_const": lower_global_load,
    "ml_program.global_store": lower_global_store,
    **{f"check.{kind}": _lower_check for kind in (
        "expect_true", "expect_false", "expect_all_true", "expect_eq", "expect_eq_const",
        "expect_almost_eq", "expect_almost_eq_const")},
}
# The rules that come after StableHLO's: where both have one, theirs is the rule.
_AFTER_STABLEHLO = {
    **FLOW_TENSOR_RULES,
    **PACK_RULES,
    "stablehlo.if": lambda fn, op: control_flow.lower_stablehlo_if(fn, op, _lower_op),
    "stablehlo.case": lambda fn, op: control_flow.lower_stablehlo_case(fn, op, _lower_op),
    "stablehlo.while": lambda fn, op: control_flow.lower_stablehlo_while(fn, op, _lower_op),
}
_RULES.update(_AFTER_STABLEHLO)
_RULES = complex_tensors(_RULES)
_stablehlo_rules = False  # whether _RULES holds StableHLO's and CHLO's


def _add_stablehlo_rules() -> None:
    """StableHLO's and CHLO's rules (input/stablehlo), imported for the first program that
    uses those dialects: a torch-mlir model never does."""
    global _stablehlo_rules
    from pyree.compiler.input.stablehlo import STABLEHLO_RULES

    _RULES.update(STABLEHLO_RULES)
    _RULES.update(_AFTER_STABLEHLO)
    _stablehlo_rules = True
