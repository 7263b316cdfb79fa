"""Inputs that decide shapes or coordinates, given at run time (graph inputs, as ONNX's node
tests feed them), where torch-mlir needs them known or gets them wrong; pyree compiles static
shapes, and the model's declared shapes narrow them down. The imported function checks on entry
(``cf.assert``: a CheckError for the caller) that the values given are those it was compiled
for: other values are refused, never computed wrongly.

- Reduce* and CumSum axes: torch-mlir cannot convert a reduction over axes it does not know
  (``aten.sum.dim_IntList`` fails to legalize, a reshape turns invalid). A reduction's output
  shape (declared, or that of the shape-keeping unary ops it feeds) and the axes' count leave
  a few axis sets, often one; a CumSum's axis is one of its input's dims. The node is
  specialised to every set left (at most MAX_CANDIDATES), the result picked by the axes given.
  A node whose shapes are not known is refused by name.
- Resize's scales in ``align_corners`` mode: ONNX maps ``x`` to ``x * (in - 1) / (in * scale
  - 1)``, the unrounded output length; torch-mlir uses the rounded one (a 0.6 downscale of 4
  came out 1.0 off). The two agree where ``in * scale`` is a whole number: that is checked,
  in f64 as ONNX's reference multiplies (at import where the scales are constants).
"""

from __future__ import annotations

from itertools import combinations

from pyree.compiler.errors import CompileError
from pyree.compiler.importers.onnx_rewrites.nodes import Nodes
from pyree.compiler.importers.onnx_rewrites.types import elem_type, static_shape

REDUCTIONS = frozenset({"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
                        "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"})
# Ops whose result has their first input's shape: a reduction feeding a chain of them into a
# value of known shape (an expanded ReduceL2 or ReduceLogSumExp) has that shape.
SHAPE_KEEPING = frozenset({"Abs", "Cast", "CastLike", "Exp", "Identity", "Log", "Neg", "Sqrt"})
MAX_CANDIDATES = 8
_INTEGERS = {6: "i32", 7: "i64"}  # TensorProto.INT32, INT64
_FLOATS = {1: "f32", 11: "f64"}  # TensorProto.FLOAT, DOUBLE


class AxesCheck:
    """Argument ``argument`` (a tensor of ``count`` axes, or a 0-D one where ``count`` is None)
    holds one of ``candidates`` (sets of dims of a rank-``rank`` tensor, negative axes counted
    from the end)."""

    def __init__(self, where: str, argument: int, mlir_type: str, count: int | None,
                 rank: int, candidates: list[tuple[int, ...]]):
        self.where, self.argument, self.mlir_type = where, argument, mlir_type
        self.count, self.rank, self.candidates = count, rank, candidates


class ScalesCheck:
    """Argument ``argument`` (Resize's scales, of type ``mlir_type``) times the input's dims
    ``dims`` is ``result`` exactly."""

    def __init__(self, where: str, argument: int, mlir_type: str, dims: tuple, result: tuple):
        self.where, self.argument, self.mlir_type = where, argument, mlir_type
        self.dims, self.result = dims, result


class ValuesCheck:
    """Argument ``argument`` (input ``name``, a 1-D tensor of ``mlir_type``) holds
    ``values``."""

    def __init__(self, where: str, name: str, argument: int, mlir_type: str, values: list[int]):
        self.where, self.name, self.argument = where, name, argument
        self.mlir_type, self.values = mlir_type, values


def specialise_run_time_inputs(proto):
    """(``proto`` with each such node specialised, the checks to add on entry); ``proto``
    itself where no node changes."""
    import onnx

    graph = proto.graph
    initialized = {t.name for t in graph.initializer}
    arguments = [v for v in graph.input if v.name not in initialized]
    position = {v.name: i for i, v in enumerate(arguments)}
    values = (*graph.input, *graph.value_info, *graph.output)
    shapes = {v.name: static_shape(v.type) for v in values}
    types = {v.name: elem_type(v.type) for v in values}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    nodes, checks, changed = [], [], False
    for index, node in enumerate(graph.node):
        if node.op_type == "Resize" and node.domain in ("", "ai.onnx"):
            checks += _resize_scales(node, index, position, shapes, types, graph.initializer)
        pinned = _pinned(node, shapes, opset) if node.domain in ("", "ai.onnx") and \
            len(node.input) > 1 and node.input[1] in position else None
        if pinned is not None:
            name = node.input[1]
            if types.get(name) not in _INTEGERS:
                raise CompileError(f"{_where(node, index)}: input '{name}' is given at run time "
                                   "and is not int32 or int64")
            n = Nodes(node, f"{node.name or node.op_type}_{index}_pinned_", opset, shapes)
            dtype = onnx.helper.tensor_dtype_to_np_dtype(types[name])
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.input[1] = n.name(n.constant("value", pinned, dtype))
            nodes += [*n.nodes, copy]
            changed = True
            checks.append(ValuesCheck(_where(node, index), name, position[name],
                                      _tensor_type((len(pinned),), types[name]), pinned))
            continue
        if (node.domain not in ("", "ai.onnx") or len(node.input) < 2
                or node.input[1] not in position
                or node.op_type not in REDUCTIONS | {"CumSum"}):
            nodes.append(node)
            continue
        where = _where(node, index)
        axes = node.input[1]
        data, axes_shape = shapes.get(node.input[0]), shapes.get(axes)
        if data is None or axes_shape is None or len(axes_shape) > 1 \
                or types.get(axes) not in _INTEGERS:
            raise CompileError(f"{where}: its axes are a run-time input and its shapes are not "
                               "all known; pyree compiles static shapes: give the axes as a "
                               "constant (an initializer)")
        count = axes_shape[0] if axes_shape else None
        candidates = _candidates(node, data, count, _result_shape(node.output[0], shapes,
                                                                   consumers))
        if candidates is None:
            nodes.append(node)  # no axes: fold or torch-mlir handle it
            continue
        if not 0 < len(candidates) <= MAX_CANDIDATES:
            raise CompileError(
                f"{where}: its axes are a run-time input, and the model's shapes leave "
                f"{len(candidates)} choices of them (pyree specialises up to {MAX_CANDIDATES}): "
                "give the axes as a constant (an initializer)")
        n = Nodes(node, f"{node.name or node.op_type}_{index}_axes_", opset, shapes)
        _specialise(n, types[axes], axes_shape, len(data), candidates)
        nodes += n.nodes
        changed = True
        checks.append(AxesCheck(where, position[axes], _tensor_type(axes_shape, types[axes]),
                                count, len(data), candidates))
    if not changed:
        return proto, checks
    model = type(proto)()
    model.CopyFrom(proto)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return onnx.shape_inference.infer_shapes(model, data_prop=True), checks


def _pinned(node, shapes: dict, opset: int) -> list[int] | None:
    """The value that ``node``'s declared result shapes give its second input: the output
    lengths of CenterCropPad (along ``axes``) and of Split (along ``axis``); else None."""
    attributes = {a.name: a for a in node.attribute}
    results = [shapes.get(name) for name in node.output]
    if any(shape is None for shape in results):
        return None
    if node.op_type == "CenterCropPad":
        rank = len(results[0])
        axes = attributes["axes"].ints if "axes" in attributes else range(rank)
        return [results[0][axis % rank] for axis in axes]
    if node.op_type == "Split" and opset >= 13:
        axis = attributes["axis"].i if "axis" in attributes else 0
        return [shape[axis % len(shape)] for shape in results]
    return None


def _resize_scales(node, index: int, position: dict, shapes: dict, types: dict,
                   initializers) -> list:
    """A Resize's ScalesCheck, where it is needed and the scales come at run time; refused by
    name where constant scales fail it."""
    import numpy as np
    import onnx

    mode = next((a.s for a in node.attribute if a.name == "coordinate_transformation_mode"), b"")
    if mode != b"align_corners" or len(node.input) < 3 or not node.input[2] \
            or (len(node.input) > 3 and node.input[3]):
        return []
    where = _where(node, index)
    scales, dims, result = node.input[2], shapes.get(node.input[0]), shapes.get(node.output[0])
    constant = next((t for t in initializers if t.name == scales), None)
    if constant is not None and scales not in position:
        values = onnx.numpy_helper.to_array(constant).astype(np.float64)
        if dims is not None and np.array_equal(values * np.array(dims, np.float64),
                                               np.floor(values * np.array(dims, np.float64))):
            return []
        raise CompileError(f"{where}: align_corners with scales that do not give whole output "
                           "lengths; torch-mlir rounds the length ONNX divides by: give sizes")
    if scales not in position or dims is None or result is None \
            or types.get(scales) not in _FLOATS:
        raise CompileError(f"{where}: align_corners with scales given at run time and shapes "
                           "not all known; pyree compiles static shapes: give sizes")
    mlir_type = f"tensor<{len(dims)}x{_FLOATS[types[scales]]}>"
    return [ScalesCheck(where, position[scales], mlir_type, dims, result)]


def _where(node, index: int) -> str:
    return f"{node.op_type} node " + (f"'{node.name}'" if node.name else f"{index}")


def _result_shape(name: str, shapes: dict, consumers: dict):
    """The static shape of ``name``, or of the shape-keeping chain it alone feeds."""
    while shapes.get(name) is None:
        users = consumers.get(name, [])
        if len(users) != 1 or users[0].op_type not in SHAPE_KEEPING or users[0].input[0] != name:
            return None
        name = users[0].output[0]
    return shapes[name]


def _candidates(node, data: tuple, count: int | None, result: tuple | None):
    """The axis sets of ``node`` that give its result shape; None where it has no axes."""
    rank = len(data)
    if node.op_type == "CumSum":
        return [(axis,) for axis in range(rank)] if rank else None
    if count == 0:
        return None
    if count is None or result is None:
        return []
    keep = next((a.i for a in node.attribute if a.name == "keepdims"), 1)
    found = []
    for axes in combinations(range(rank), count):
        if keep:
            shape = tuple(1 if d in axes else n for d, n in enumerate(data))
        else:
            shape = tuple(n for d, n in enumerate(data) if d not in axes)
        if shape == tuple(result):
            found.append(axes)
    return found


def _specialise(n: Nodes, elem: int, axes_shape: tuple, rank: int, candidates: list) -> None:
    """``n.node`` once per candidate, with its axes a constant; where there are several, the
    result picked by the axes given (the entry check makes one of them match)."""
    import numpy as np
    import onnx

    node, dtype = n.node, onnx.helper.tensor_dtype_to_np_dtype(elem)
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    results = []
    for i, axes in enumerate(candidates):
        constant = n.constant(f"axes{i}", np.array(axes, dtype).reshape(axes_shape or ()), dtype)
        output = n.outputs[0] if len(candidates) == 1 else f"result{i}"
        n.op(node.op_type, [n.inputs[0], constant, *n.inputs[2:]], output, **attributes)
        results.append(output)
    if len(candidates) == 1:
        return
    axes = n.inputs[1]
    shifted = n.op("Add", [axes, n.constant("rank", rank, dtype)], "shifted")
    negative = n.op("Less", [axes, n.constant("zero", 0, dtype)], "negative")
    normalised = n.op("Where", [negative, shifted, axes], "normalised")
    given = [normalised] if not axes_shape else [  # a 0-D axis is its own value
        n.op("Gather", [normalised, n.constant(f"at{j}", j, np.int64)], f"given{j}")
        for j in range(axes_shape[0])]
    picked = results[-1]
    for i in reversed(range(len(candidates) - 1)):
        match = None
        for axis in candidates[i]:
            seen = None
            for j, value in enumerate(given):
                equal = n.op("Equal", [value, n.constant(f"dim{i}_{axis}_{j}", axis, dtype)],
                             f"is{i}_{axis}_{j}")
                seen = equal if seen is None else n.op("Or", [seen, equal], f"seen{i}_{axis}_{j}")
            match = seen if match is None else n.op("And", [match, seen], f"match{i}_{axis}")
        output = n.outputs[0] if i == 0 else f"picked{i}"
        picked = n.op("Where", [match, results[i], picked], output)


def _tensor_type(shape: tuple, elem: int) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{_INTEGERS[elem]}>"


def add_checks(text: str, checks: list[AxesCheck]) -> str:
    """``text`` (the imported module, one public function) with each check at the top of the
    function's body."""
    if not checks:
        return text
    lines = text.split("\n")
    head = next(i for i, line in enumerate(lines)
                if line.lstrip().startswith("func.func @") and line.rstrip().endswith("{"))
    emit = {AxesCheck: _axes_lines, ScalesCheck: _scales_lines, ValuesCheck: _values_lines}
    body = [line for k, check in enumerate(checks) for line in emit[type(check)](k, check)]
    return "\n".join(lines[:head + 1] + body + lines[head + 1:])


def _axes_lines(k: int, check: AxesCheck) -> list[str]:
    """MLIR ops asserting that argument ``check.argument`` holds one of the candidates."""
    p, t = f"%pyree_axes{k}_", check.mlir_type
    scalar = t.removeprefix("tensor<").removesuffix(">").split("x")[-1]
    lines = [f"{p}zero = arith.constant 0 : {scalar}",
             f"{p}rank = arith.constant {check.rank} : {scalar}"]
    given = []
    for j in range(check.count if check.count is not None else 1):
        at = f"{p}c{j}"
        index = "" if check.count is None else at
        if check.count is not None:
            lines.append(f"{at} = arith.constant {j} : index")
        lines += [f"{p}a{j} = tensor.extract %arg{check.argument}[{index}] : {t}",
                  f"{p}neg{j} = arith.cmpi slt, {p}a{j}, {p}zero : {scalar}",
                  f"{p}up{j} = arith.addi {p}a{j}, {p}rank : {scalar}",
                  f"{p}n{j} = arith.select {p}neg{j}, {p}up{j}, {p}a{j} : {scalar}"]
        given.append(f"{p}n{j}")
    dims = sorted({d for axes in check.candidates for d in axes})
    lines += [f"{p}d{d} = arith.constant {d} : {scalar}" for d in dims]
    ok = None
    for i, axes in enumerate(check.candidates):
        match = None
        for d in axes:
            seen = None
            for j, value in enumerate(given):
                name = f"{p}eq{i}_{d}_{j}"
                lines.append(f"{name} = arith.cmpi eq, {value}, {p}d{d} : {scalar}")
                seen = name if seen is None else _or(lines, f"{p}s{i}_{d}_{j}", seen, name)
            match = seen if match is None else _and(lines, f"{p}m{i}_{d}", match, seen)
        ok = match if ok is None else _or(lines, f"{p}ok{i}", ok, match)
    sets = " or ".join(str(list(axes)) for axes in check.candidates)
    lines.append(f'cf.assert {ok}, "{check.where}: the axes given at run time are not '
                 f"{sets}, the axes this module was compiled for (from the model's declared "
                 'shapes); compile the model with these axes as a constant"')
    return ["    " + line for line in lines]


def _scales_lines(k: int, check: ScalesCheck) -> list[str]:
    """MLIR ops asserting that argument ``check.argument`` times the dims is the result."""
    p, t = f"%pyree_scales{k}_", check.mlir_type
    scalar = t.removesuffix(">").split("x")[-1]
    lines, ok = [], None
    for i, (dim, length) in enumerate(zip(check.dims, check.result)):
        lines += [f"{p}c{i} = arith.constant {i} : index",
                  f"{p}s{i} = tensor.extract %arg{check.argument}[{p}c{i}] : {t}"]
        scale = f"{p}s{i}"
        if scalar != "f64":
            lines.append(f"{p}w{i} = arith.extf {scale} : {scalar} to f64")
            scale = f"{p}w{i}"
        lines += [f"{p}in{i} = arith.constant {float(dim)!r} : f64",
                  f"{p}out{i} = arith.constant {float(length)!r} : f64",
                  f"{p}len{i} = arith.mulf {scale}, {p}in{i} : f64",
                  f"{p}eq{i} = arith.cmpf oeq, {p}len{i}, {p}out{i} : f64"]
        ok = f"{p}eq{i}" if ok is None else _and(lines, f"{p}ok{i}", ok, f"{p}eq{i}")
    lines.append(f'cf.assert {ok}, "{check.where}: align_corners with scales that do not give '
                 f"the output shape {list(check.result)} exactly (torch-mlir rounds the length "
                 'ONNX divides by); give sizes instead of scales"')
    return ["    " + line for line in lines]


def _values_lines(k: int, check: ValuesCheck) -> list[str]:
    """MLIR ops asserting that argument ``check.argument`` holds ``check.values``."""
    p, t = f"%pyree_values{k}_", check.mlir_type
    scalar = t.removesuffix(">").split("x")[-1]
    lines, ok = [], None
    for i, value in enumerate(check.values):
        lines += [f"{p}c{i} = arith.constant {i} : index",
                  f"{p}a{i} = tensor.extract %arg{check.argument}[{p}c{i}] : {t}",
                  f"{p}v{i} = arith.constant {value} : {scalar}",
                  f"{p}eq{i} = arith.cmpi eq, {p}a{i}, {p}v{i} : {scalar}"]
        ok = f"{p}eq{i}" if ok is None else _and(lines, f"{p}ok{i}", ok, f"{p}eq{i}")
    if ok is None:  # no values: nothing to check
        return []
    lines.append(f'cf.assert {ok}, "{check.where}: input \'{check.name}\' given at run time '
                 f"is not {list(check.values)}, the value this module was compiled for (from "
                 'the model\'s declared shapes); compile the model with it as a constant"')
    return ["    " + line for line in lines]


def _or(lines: list[str], name: str, a: str, b: str) -> str:
    lines.append(f"{name} = arith.ori {a}, {b} : i1")
    return name


def _and(lines: list[str], name: str, a: str, b: str) -> str:
    lines.append(f"{name} = arith.andi {a}, {b} : i1")
    return name
