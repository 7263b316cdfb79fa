"""``cummax`` and ``cummin`` as scans, which torch-mlir has no op for.

torch-mlir lowers only ``cumsum`` and ``cumprod`` to a scan (``tm_tensor.scan``); cummax and
cummin it refuses. Written as torch ops they took log2(n) steps over the whole tensor, each
combining every position with one 1, 2, 4, ... before it: 45x PyTorch's CPU on 64 rows of 4096.
A scan walks each line once (in blocks on GPUs), so pyree carries its own running max and min
through torch-mlir:

1. ``decompositions``: cummax is the running max ``m`` (``pyree::running_max``, a custom op that
   NaN sticks in); the index is the running max of each position where ``x == m`` or ``x`` is
   NaN (PyTorch's ties go to the later index, NaN's to the latest NaN); the values are ``x`` at
   those indices, so that the zeros' signs and NaN's payloads are PyTorch's.
2. ``calls_for_ops``: torch-mlir's importer leaves such an op a ``torch.operator``, which its
   pipelines refuse; it becomes a call of a declared function, which they carry through.
3. ``scans_for_calls``: in the torch backend form each call becomes a ``tm_tensor.scan`` of
   ``arith.maximumf`` (``maxsi``, ``minimumf``, ``minsi``), which the linalg pipeline keeps.
"""

from __future__ import annotations

import functools
import re

LINALG_PIPELINE = "torch-backend-to-linalg-on-tensors-backend-pipeline"
_OPS = ("running_max", "running_min")
_COMBINER = {("running_max", "f"): "arith.maximumf", ("running_max", "i"): "arith.maxsi",
             ("running_min", "f"): "arith.minimumf", ("running_min", "i"): "arith.minsi"}


@functools.cache
def _library() -> None:
    """Defines ``pyree::running_max`` and ``running_min`` (x, dim) once a process. Eager, they
    are PyTorch's cummax/cummin values (a zero's sign aside: the scan's max takes +0 over -0)."""
    import torch

    for name, run in zip(_OPS, (torch.cummax, torch.cummin)):
        op = torch.library.custom_op(f"pyree::{name}", _values_of(run), mutates_args=(),
                                     schema="(Tensor x, int dim) -> Tensor")
        op.register_fake(lambda x, dim: torch.empty_like(x))


def _values_of(run):
    return lambda x, dim: run(x, dim)[0]


def decompositions() -> dict:
    import torch

    _library()
    aten = torch.ops.aten
    return {aten.cummax.default: _cumulative("running_max"),
            aten.cummin.default: _cumulative("running_min")}


def _cumulative(name: str):
    """cummax / cummin along ``dim``: (values, indices), as PyTorch's."""
    def scan(x, dim):
        import torch
        if x.dtype == torch.bool or x.dtype.is_complex:
            return NotImplemented
        if x.dim() == 0 or 0 in x.shape:  # no line to scan (and nothing to gather from)
            return x.clone(), torch.zeros_like(x, dtype=torch.int64)
        dim %= x.dim()
        running = getattr(torch.ops.pyree, name)
        # the scan's integers are signed: an unsigned type's values compare in a wider one
        wide = x if x.dtype.is_floating_point or x.dtype.is_signed else x.to(torch.int64)
        extreme = running(wide, dim)
        shape = [1] * x.dim()
        shape[dim] = x.shape[dim]
        position = torch.arange(x.shape[dim], device=x.device).reshape(shape).expand(x.shape)
        record = wide == extreme
        if x.dtype.is_floating_point:
            record = record | torch.isnan(x)
        index = torch.ops.pyree.running_max(torch.where(record, position, 0), dim)
        return torch.gather(x, dim, index), index
    return scan


def calls_for_ops(module):
    """``module`` (torch-mlir's, as its FX importer leaves it) with each ``torch.operator
    "torch.pyree.running_*"`` a call of a declared function (one per op, dim and type), which
    torch-mlir's torch pipeline carries through; ``module`` itself where it has none."""
    if not _holds(module, "torch.operator"):
        return module
    text = str(module)
    dims = dict(re.findall(r"(%[\w.]+) = torch\.constant\.int (-?\d+)", text))
    declared: dict[str, str] = {}

    def call(match: re.Match) -> str:
        result, name, x, dim, x_type, result_type = match.groups()
        callee = f"pyree.{name}.{dims[dim]}.{_TYPE_CHARS.sub('_', x_type)}"
        declared[callee] = f'  func.func private @"{callee}"({x_type}) -> {result_type}\n'
        return f'{result} = func.call @"{callee}"({x}) : ({x_type}) -> {result_type}'

    text = _OPERATOR.sub(call, text)
    if not declared:
        return module
    head = text.index("\n", text.index("module")) + 1
    return _parsed(text[:head] + "".join(declared.values()) + text[head:], module)


def scans_for_calls(module):
    """``module`` (torch-mlir's torch backend form) with each call of a declared
    ``pyree.running_*`` function a ``tm_tensor.scan``, between the casts to and from builtin
    tensors that torch-mlir's own lowerings leave, and the declarations dropped."""
    if not _holds(module, "func.call"):
        return module
    count = iter(range(1 << 30))

    def scan(match: re.Match) -> str:
        indent, result, name, dim, x, torch_type = match.groups()
        return _scan_text(indent, result, name, int(dim), x, torch_type, f"%pyree_scan{next(count)}")

    text, calls = _CALL.subn(scan, str(module))
    if not calls:
        return module
    text = re.sub(r'^\s*func\.func private @"?pyree\.running_\w+\.[\w.]*"?\(.*\n', "", text, flags=re.M)
    return _parsed(text, module)


def _holds(module, op_name: str) -> bool:
    from torch_mlir.ir import WalkResult

    found = []

    def visit(op):
        if op.name == op_name:
            found.append(op)
            return WalkResult.INTERRUPT
        return WalkResult.ADVANCE

    module.operation.walk(visit)
    return bool(found)


def _parsed(text: str, like):
    """``text`` parsed in ``like``'s context, with the dialects of torch-mlir's linalg lowering
    loaded first (torch_c and tm_tensor are not registered from Python; running a pipeline on an
    empty module loads the dialects its passes depend on)."""
    from torch_mlir.ir import Location, Module
    from torch_mlir.passmanager import PassManager

    with like.context, Location.unknown():
        PassManager.parse(f"builtin.module({LINALG_PIPELINE})").run(Module.create().operation)
        return Module.parse(text)


_OPERATOR = re.compile(r'(%[\w.#]+) = torch\.operator "torch\.pyree\.(running_max|running_min)"'
                       r'\((%[\w.#]+), (%[\w.]+)\) : \((!torch\.vtensor<[^>]*>), !torch\.int\) -> '
                       r'(!torch\.vtensor<[^>]*>)')
_CALL = re.compile(r'^(\s*)(%[\w.#]+) = (?:func\.)?call @"?pyree\.(running_max|running_min)\.'
                   r'(-?\d+)\.[\w.]*"?\((%[\w.#]+)\) : \((!torch\.vtensor<[^>]*>)\) -> '
                   r'!torch\.vtensor<[^>]*>$', re.M)
_TYPE_CHARS = re.compile(r"\W+")
_BUILTIN = {"si64": "i64", "si32": "i32", "si16": "i16", "si8": "i8"}


def _scan_text(indent: str, result: str, name: str, dim: int, x: str, torch_type: str,
               v: str) -> str:
    shape_text, element = re.fullmatch(r"!torch\.vtensor<\[([^\]]*)\],(\w+)>", torch_type).groups()
    shape = shape_text.split(",") if shape_text else []
    dim %= len(shape)
    element = _BUILTIN.get(element, element)
    kind = "f" if element.startswith(("f", "bf")) else "i"

    def tensor(dims: list[str]) -> str:
        return "tensor<" + "".join(f"{'?' if d == '?' else d}x" for d in dims) + f"{element}>"

    full, lines = tensor(shape), tensor(shape[:dim] + shape[dim + 1:])
    body = [f"{v}_x = torch_c.to_builtin_tensor {x} : {torch_type} -> {full}"]
    sizes = {}
    for k, d in enumerate(shape):
        if d == "?":
            body += [f"{v}_c{k} = arith.constant {k} : index",
                     f"{v}_n{k} = tensor.dim {v}_x, {v}_c{k} : {full}"]
            sizes[k] = f"{v}_n{k}"
    body += [f"{v}_out = tensor.empty({', '.join(sizes.values())}) : {full}",
             f"{v}_acc = tensor.empty({', '.join(s for k, s in sizes.items() if k != dim)}) : {lines}",
             f"{v}:2 = tm_tensor.scan dimension({dim}) inclusive(true) ins({v}_x : {full}) "
             f"outs({v}_out, {v}_acc : {full}, {lines}) {{",
             f"^bb0({v}_a: {element}, {v}_b: {element}):",
             f"  {v}_m = {_COMBINER[name, kind]} {v}_a, {v}_b : {element}",
             f"  tm_tensor.yield {v}_m : {element}",
             f"}} -> {full}, {lines}",
             f"{result} = torch_c.from_builtin_tensor {v}#0 : {full} -> {torch_type}"]
    return "\n".join(indent + line for line in body)
