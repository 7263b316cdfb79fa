"""PyTorch programs that compute on uint8 tensors, computed on int16 instead.

torch-mlir lowers a ``uint8`` tensor to a signless ``i8`` and then often reads it as signed:
``a.sum()`` sign-extends 200 to -56, ``a > 128`` compares with -128, ``sort``, ``topk``,
``abs``, ``%`` and true division of uint8 values gave wrong answers, and ``a.min()`` crashed
the process (torch-mlir's reduction init has no unsigned case). int16 holds every uint8 value
and promotes as uint8 does against every other dtype (uint8 with int8 is int16; with int32,
int64 or a float, those), so the exported graph is rewritten before torch-mlir sees it:

- each uint8 placeholder (argument, buffer, constant) is converted to int16 where it is read;
- each op that PyTorch types uint8 runs on int16 (a ``dtype=torch.uint8`` becomes int16; a float
  converted to uint8 goes through int32, whose low bits are the wrapped value) and its result is
  masked to its low 8 bits (``& 255``): uint8 arithmetic wraps modulo 256, and int16's wrapping
  keeps those bits;
- each uint8 result is converted back to uint8 for the caller (importers/unsigned.py keeps it
  unsigned at the boundary).

A program without uint8 values is left as it is.
"""

from __future__ import annotations

import copy


def widen_uint8(program, caller_owned: bool):
    """``program`` (an ExportedProgram) with its uint8 computation on int16; a copy where the
    caller owns it and it has uint8 values, else ``program`` itself, changed in place."""
    import torch

    graph = program.graph_module.graph
    if not any(_dtype(n) == torch.uint8 for n in graph.nodes):
        return program
    if caller_owned:
        program = copy.deepcopy(program)
        graph = program.graph_module.graph
    aten = torch.ops.aten
    keep = {aten._assert_tensor_metadata.default}  # asserts the value's dtype: kept on a uint8
    # placeholder, dropped where the value is now computed on int16
    output = next(n for n in graph.nodes if n.op == "output")
    widened = {}  # the int16 node -> the name of the uint8 node it stands for
    for node in list(graph.nodes):
        if _dtype(node) != torch.uint8 or node.op not in ("placeholder", "call_function"):
            continue
        if node.op == "placeholder":
            with graph.inserting_after(node):
                new = first = graph.call_function(aten._to_copy.default, (node,),
                                                  {"dtype": torch.int16})
        else:
            source = node.args[0] if node.args else None
            from_float = isinstance(source, torch.fx.Node) and _dtype(source) is not None \
                and _dtype(source).is_floating_point
            wide = torch.int32 if from_float else torch.int16
            node.args = _replaced(node.args, wide)
            node.kwargs = _replaced(node.kwargs, wide)
            with graph.inserting_after(node):
                new = first = graph.call_function(aten.bitwise_and.Scalar, (node, 255))
            if from_float:
                with graph.inserting_after(new):
                    new = graph.call_function(aten._to_copy.default, (new,), {"dtype": torch.int16})
        node.replace_all_uses_with(new, delete_user_cb=lambda user, first=first: user is not first
                                   and user.target not in keep)
        if node.op == "call_function":  # its dtype asserted is no longer what it computes
            for user in [u for u in node.users if u.target in keep]:
                graph.erase_node(user)
        widened[new] = node.name
    returned = list(output.args[0])
    for i, value in enumerate(returned):
        if value in widened:
            with graph.inserting_before(output):
                back = graph.call_function(aten._to_copy.default, (value,), {"dtype": torch.uint8})
            returned[i] = back
            for spec in program.graph_signature.output_specs:
                if getattr(spec.arg, "name", None) == widened[value]:
                    spec.arg.name = back.name
    output.args = (tuple(returned),)
    program.graph_module.recompile()
    _propagate(program)
    return program


def _dtype(node):
    return getattr(getattr(node, "meta", {}).get("val"), "dtype", None)


def _replaced(args, wide):
    """``args`` with every ``torch.uint8`` in it ``wide``."""
    import torch
    if isinstance(args, dict):
        return {k: _replaced(v, wide) for k, v in args.items()}
    if isinstance(args, (list, tuple)):
        return type(args)(_replaced(a, wide) for a in args)
    return wide if args is torch.uint8 else args


def _propagate(program) -> None:
    """Every node's ``meta["val"]`` again from the placeholders' (torch-mlir reads the types
    there), in the fake mode they were made in."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    values = [n.meta["val"] for n in placeholders]
    mode = detect_fake_mode(values)
    FakeTensorProp(program.graph_module, mode).propagate_dont_convert_inputs(*values)
