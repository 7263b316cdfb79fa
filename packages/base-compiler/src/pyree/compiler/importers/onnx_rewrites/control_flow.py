"""Loop and Scan, rewritten into forms torch-mlir converts right.

- Loop whose condition can be anything but true: torch-mlir takes a loop whose initial
  condition is a constant true (or whose body passes its condition through an Identity) for a
  plain ``for`` of M trips and drops the condition the body computes (a loop meant to stop
  when a sum passed 20 ran all 100 trips); an initial condition of False ran every trip too,
  or failed to compile (``null operand found``). The loop is rewritten into that ``for`` form
  with the condition carried as an extra loop-carried value ``still`` (its initial value the
  initial condition, then ``still and cond``), and each carried value kept where ``still`` was
  false on entry to the trip (``Where(still, new, old)``): the trips past the one where ONNX
  stops change nothing. Every one of M trips is run, so a constant M of 2^31 or more (an
  exporter's "no limit") is refused by name, as are scan outputs (they cannot be cut short)
  and a loop without M (which torch-mlir does not convert at all: left as it is).
- Scan with ``scan_input_directions``, ``scan_output_directions`` or axes other than 0:
  torch-mlir ignored the directions (scanned and stacked forward) and failed to compile other
  axes. Each such input is moved to axis 0 (Transpose) and reversed there (a Gather of the
  reversed positions), and each such output is built forward along axis 0 and reversed and
  moved after; the Scan itself is then forward along axis 0. A reversed input or output whose
  scan dim is known only at run time is refused by name.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError

_MAX_TRIPS = 2**31


def _constant_value(n, name):
    import onnx

    tensor = n.constants.get(name)
    return None if tensor is None else onnx.numpy_helper.to_array(tensor)


def _is_identity_of(body, output: str, source: str) -> bool:
    """Whether the body's ``output`` is ``source`` itself or an Identity of it."""
    if output == source:
        return True
    return any(node.op_type == "Identity" and list(node.output) == [output]
               and list(node.input) == [source] for node in body.node)


def _is_constant_true(body, output: str) -> bool:
    import numpy as np
    import onnx

    for tensor in body.initializer:
        if tensor.name == output:
            return bool(np.all(onnx.numpy_helper.to_array(tensor)))
    for node in body.node:
        if node.op_type == "Constant" and list(node.output) == [output]:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            return value is not None and bool(np.all(onnx.numpy_helper.to_array(value)))
    return False


def loop(n, types):
    """ONNX Loop with a condition that may turn false (see the module docstring)."""
    import numpy as np
    import onnx

    node = n.node
    body = next(a.g for a in node.attribute if a.name == "body")
    trips, cond = (list(node.input) + ["", ""])[:2]
    carried = list(node.input[2:])
    initial = _constant_value(n, cond) if cond else np.array(True)
    initially_true = initial is not None and bool(np.all(initial))
    cond_in, cond_out = body.input[1].name, body.output[0].name
    if initially_true and (_is_identity_of(body, cond_out, cond_in)
                           or _is_constant_true(body, cond_out)):
        return None  # a plain for loop: torch-mlir converts it right
    if not trips:
        return None  # torch-mlir converts no Loop without M (refused as before)
    if len(body.output) != 1 + len(carried):
        raise CompileError(f"Loop {node.name!r} with scan outputs and a condition that can "
                           "turn false: pyree runs every one of the M trips, so its scan "
                           "outputs could not be cut where ONNX stops")
    limit = _constant_value(n, trips)
    if limit is not None and int(np.asarray(limit).reshape(-1)[0]) >= _MAX_TRIPS:
        raise CompileError(f"Loop {node.name!r} with a trip count of {int(limit)} and a "
                           "condition that can turn false: pyree runs every one of the M "
                           "trips (the condition only stops the carried values changing)")
    for inner, outer in zip(body.input[2:], body.output[1:]):
        if inner.type.tensor_type.HasField("shape") and outer.type.tensor_type.HasField("shape"):
            a = [d.dim_value if d.HasField("dim_value") else None
                 for d in inner.type.tensor_type.shape.dim]
            b = [d.dim_value if d.HasField("dim_value") else None
                 for d in outer.type.tensor_type.shape.dim]
            if len(a) != len(b) or any(x is not None and y is not None and x != y
                                       for x, y in zip(a, b)):
                raise CompileError(f"Loop {node.name!r}: a loop-carried value changes shape "
                                   f"({inner.name}: {a} to {b}), which pyree's rewrite of a "
                                   "condition that can turn false cannot keep")
    helper = onnx.helper
    c_in, c_out = n.name("c_in"), n.name("c_out")
    new_body = helper.make_graph(
        [], body.name, [], [], initializer=body.initializer, value_info=body.value_info,
        sparse_initializer=body.sparse_initializer)
    new_body.node.extend(body.node)
    still_out = n.name("still_out")
    extra = [helper.make_node("Identity", [c_in], [c_out]),
             helper.make_node("And", [cond_in, cond_out], [still_out])]
    selected = []
    for inner, outer in zip(body.input[2:], body.output[1:]):
        name = n.name("keep_" + outer.name)
        extra.append(helper.make_node("Where", [cond_in, outer.name, inner.name], [name]))
        value = type(outer)()
        value.CopyFrom(outer)
        value.name = name
        selected.append(value)
    new_body.node.extend(extra)
    new_body.input.extend([body.input[0], helper.make_tensor_value_info(c_in, onnx.TensorProto.BOOL, []),
                           body.input[1], *body.input[2:]])
    cond_value = helper.make_tensor_value_info(still_out, onnx.TensorProto.BOOL, [])
    new_body.output.extend([helper.make_tensor_value_info(c_out, onnx.TensorProto.BOOL, []),
                            cond_value, *selected])
    true = n.constant("true", True, np.bool_)
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute
                  if a.name != "body"}
    n.nodes.append(helper.make_node(
        "Loop", [trips, n.name(true), cond or n.name(true), *carried],
        [n.name("still_final"), *node.output], body=new_body, **attributes))
    return n.nodes


def _move_axis(n, value, source, to, rank, output=None):
    """``value`` with its axis ``source`` moved to ``to`` (a Transpose), or ``value``."""
    if source == to:
        return value
    perm = [a for a in range(rank) if a != source]
    perm.insert(to, source)
    return n.op("Transpose", [value], output or f"{value}_moved", perm=perm)


def _reverse_axis0(n, value, length, word, output=None):
    import numpy as np
    import onnx

    n.nodes.append(onnx.helper.make_node("Constant", [], [n.name(word + "_rev")],
                   value=onnx.numpy_helper.from_array(np.arange(length - 1, -1, -1, dtype=np.int64),
                                                      n.name(word + "_rev"))))
    return n.op("Gather", [value, word + "_rev"], output or word + "_reversed", axis=0)


def scan(n, types):
    """ONNX Scan (opset 9 on) with reversed directions or axes other than 0."""
    import onnx

    node = n.node
    if n.opset < 9:
        return None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    body = attrs["body"]
    m = attrs["num_scan_inputs"]
    states = len(node.input) - m
    k = len(body.output) - states
    in_dirs = list(attrs.get("scan_input_directions") or [0] * m)
    out_dirs = list(attrs.get("scan_output_directions") or [0] * k)
    in_axes = list(attrs.get("scan_input_axes") or [0] * m)
    out_axes = list(attrs.get("scan_output_axes") or [0] * k)
    if not any(in_dirs) and not any(out_dirs) and not any(in_axes) and not any(out_axes):
        return None
    inputs = list(n.inputs[:states])
    length = None
    for j, x in enumerate(n.inputs[states:]):
        dims = n.dims.get(x)
        if dims is None:
            raise CompileError(f"Scan {node.name!r} with directions or axes other than forward "
                               f"along 0: the rank of scan input {x!r} is not known")
        axis = in_axes[j] % len(dims)
        if dims[axis] is not None:
            length = dims[axis]
        moved = _move_axis(n, x, axis, 0, len(dims), output=f"in{j}_moved")
        if in_dirs[j]:
            if dims[axis] is None:
                raise CompileError(f"Scan {node.name!r}: scan input {x!r} is reversed along a "
                                   "dim known only at run time, which pyree's rewrite needs "
                                   "known")
            moved = _reverse_axis0(n, moved, dims[axis], f"in{j}")
        inputs.append(moved)
    outputs = list(n.outputs[:states])
    after = []
    for j, y in enumerate(n.outputs[states:]):
        inner = body.output[states + j].type.tensor_type
        rank = len(inner.shape.dim) + 1 if inner.HasField("shape") else len(n.dims.get(y, ()))
        if not rank:
            raise CompileError(f"Scan {node.name!r}: the rank of scan output {y!r} is not known")
        axis = out_axes[j] % rank
        if not out_dirs[j] and axis == 0:
            outputs.append(y)
            continue
        outputs.append(n.name(f"out{j}_forward"))
        after.append((j, y, axis, rank))
    del_names = ("scan_input_directions", "scan_output_directions", "scan_input_axes",
                 "scan_output_axes")
    kept = {name: value for name, value in attrs.items() if name not in del_names}
    n.nodes.append(onnx.helper.make_node("Scan", [n.name(x) for x in inputs], outputs, **kept))
    for j, y, axis, rank in after:
        value = f"out{j}_forward"
        if out_dirs[j]:
            if length is None:
                raise CompileError(f"Scan {node.name!r}: scan output {y!r} is reversed along "
                                   "a dim known only at run time, which pyree's rewrite needs "
                                   "known")
            value = _reverse_axis0(n, value, length, f"out{j}",
                                   output=y if axis == 0 else None)
        if axis:
            _move_axis(n, value, 0, axis, rank, output=y)
    return n.nodes
