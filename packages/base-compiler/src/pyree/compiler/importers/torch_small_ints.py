"""PyTorch programs that compute on 8-, 16- or 32-bit integer tensors that torch-mlir gets
wrong, computed on a wider integer type instead.

torch-mlir lowers ``uint8`` and ``int8`` tensors to a signless ``i8`` (and ``uint16``,
``uint32`` to ``i16``, ``i32``). It then reads the unsigned ones as signed (``a.sum()``
sign-extended 200 to -56, ``a > 128`` compared with -128; ``sort``, ``topk``, ``abs``, ``%``
and true division gave wrong answers; a uint32 sort put 4e9 first) and crashes the process on
some 8-bit ops (``a.min()`` of uint8, ``a * 3``, ``a // 3``, ``a % 3`` and ``a.max()`` of int8:
a segmentation fault in its scalar conversion and reduction lowering). The next wider signed
type (``WIDER``) holds every value and promotes as the narrow one does against every other
dtype (uint8 with int8 is int16; with wider types, those), so the exported graph is rewritten
before torch-mlir sees it:

- each such placeholder (argument, buffer, constant) is converted to the wider type where it is
  read;
- each op that PyTorch types with a narrow type runs on the wider one (a ``dtype=`` of the
  narrow type becomes the wider; a float converted to one goes through at least int32, whose
  low bits are the wrapped value) and its result is wrapped to its type's range (``& 255``,
  ``& 65535``, ``& 2**32 - 1``; for int8 ``((v + 128) & 255) - 128``): narrow arithmetic wraps
  modulo its width, and the wider type's wrapping keeps those bits;
- each narrow result is converted back to its type for the caller (importers/unsigned.py keeps
  unsigned types unsigned at the boundary).

A program without such values is left as it is. (uint64 has no wider type; PyTorch itself
computes little on it.)
"""

from __future__ import annotations

import copy


def wider():
    """Each narrow integer dtype torch-mlir gets wrong -> the dtype it is computed on."""
    import torch
    return {torch.uint8: torch.int16, torch.int8: torch.int16, torch.uint16: torch.int32,
            torch.uint32: torch.int64}


def widen_small_ints(program, caller_owned: bool):
    """``program`` (an ExportedProgram) with its narrow integer computation on wider types
    (``wider``); a copy where the caller owns it and it has such values, else ``program``
    itself, changed in place."""
    import torch

    graph = program.graph_module.graph
    narrow = wider()
    if not any(_dtype(n) in narrow for n in graph.nodes):
        return program
    if caller_owned:
        program = copy.deepcopy(program)
        graph = program.graph_module.graph
    aten = torch.ops.aten
    keep = {aten._assert_tensor_metadata.default}  # asserts the value's dtype: kept on a narrow
    # placeholder, dropped where the value is now computed on the wider type
    output = next(n for n in graph.nodes if n.op == "output")
    widened = {}  # the wide node -> (the name of the narrow node it stands for, its dtype)
    for node in list(graph.nodes):
        dtype = _dtype(node)
        if dtype not in narrow or node.op not in ("placeholder", "call_function"):
            continue
        if node.op == "placeholder":
            with graph.inserting_after(node):
                new = first = graph.call_function(aten._to_copy.default, (node,),
                                                  {"dtype": narrow[dtype]})
        else:
            source = node.args[0] if node.args else None
            from_float = isinstance(source, torch.fx.Node) and _dtype(source) is not None \
                and _dtype(source).is_floating_point
            wide = torch.int32 if from_float and narrow[dtype] == torch.int16 else narrow[dtype]
            node.args = _replaced(node.args, dtype, wide)
            node.kwargs = _replaced(node.kwargs, dtype, wide)
            with graph.inserting_after(node):
                first, new = _wrapped(graph, node, dtype)
            if wide != narrow[dtype]:
                with graph.inserting_after(new):
                    new = graph.call_function(aten._to_copy.default, (new,),
                                              {"dtype": narrow[dtype]})
        node.replace_all_uses_with(new, delete_user_cb=lambda user, first=first: user is not first
                                   and user.target not in keep)
        if node.op == "call_function":  # its dtype asserted is no longer what it computes
            for user in [u for u in node.users if u.target in keep]:
                graph.erase_node(user)
        widened[new] = node.name, dtype
    returned = list(output.args[0])
    for i, value in enumerate(returned):
        if value in widened:
            name, dtype = widened[value]
            with graph.inserting_before(output):
                back = graph.call_function(aten._to_copy.default, (value,), {"dtype": dtype})
            returned[i] = back
            for spec in program.graph_signature.output_specs:
                if getattr(spec.arg, "name", None) == name:
                    spec.arg.name = back.name
    output.args = (tuple(returned),)
    program.graph_module.recompile()
    _propagate(program)
    return program


def _dtype(node):
    return getattr(getattr(node, "meta", {}).get("val"), "dtype", None)


def _replaced(args, dtype, wide):
    """``args`` with every ``dtype`` in it ``wide``."""
    if isinstance(args, dict):
        return {k: _replaced(v, dtype, wide) for k, v in args.items()}
    if isinstance(args, (list, tuple)):
        return type(args)(_replaced(a, dtype, wide) for a in args)
    return wide if args is dtype else args


def _wrapped(graph, node, dtype):
    """(the first, the last) of the nodes that wrap ``node``'s wide value into ``dtype``'s
    range, keeping its wide type."""
    import torch
    aten = torch.ops.aten
    if dtype != torch.int8:  # unsigned
        masked = graph.call_function(aten.bitwise_and.Scalar, (node, 2 ** (8 * dtype.itemsize) - 1))
        return masked, masked
    shifted = graph.call_function(aten.add.Tensor, (node, 128))
    with graph.inserting_after(shifted):
        low = graph.call_function(aten.bitwise_and.Scalar, (shifted, 255))
    with graph.inserting_after(low):
        return shifted, graph.call_function(aten.sub.Tensor, (low, 128))


def _propagate(program) -> None:
    """Every node's ``meta["val"]`` again from the placeholders' (torch-mlir reads the types
    there), in the fake mode they were made in."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    values = [n.meta["val"] for n in placeholders]
    mode = detect_fake_mode(values)
    FakeTensorProp(program.graph_module, mode).propagate_dont_convert_inputs(*values)
