"""Row-wise chains (softmax, log_softmax, layernorm, rmsnorm) as torch-mlir writes them: linalg
reductions over the last dim and an elementwise op reading their results broadcast along it.
Each form computes in f32 (an f16/bf16 input is extended, the output truncated back) and has a
float64 numpy reference. Shared by the CPU, Vulkan and CUDA tests of row kernels."""

from __future__ import annotations

import ml_dtypes
import numpy as np

KINDS = ("softmax", "log_softmax", "layernorm", "rmsnorm")
NP_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
EPS = 1e-5


def _t(shape, dtype):
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def _ext(dtype: str, name: str, out: str) -> str:
    """``out`` = ``name`` in f32 (x * 1.0 keeps -0.0, infinities and NaN as they are)."""
    return f"{out} = arith.extf {name} : {dtype} to f32" if dtype != "f32" \
        else f"{out} = arith.mulf {name}, %c1 : f32"


def _generic(ins: list[tuple[str, str, str]], out: tuple[str, str, str], body: list[str],
             reduction: bool, elem_out: str) -> str:
    """``ins``/``out``: (value, type, indexing map); the body's last line defines %y."""
    maps = ", ".join(m for _, _, m in ins + [out])
    its = '"parallel", "reduction"' if reduction else '"parallel", "parallel"'
    args = ", ".join(f"%a{i}: {t.split('x')[-1].rstrip('>')}" for i, (_, t, _) in enumerate(ins))
    lines = "\n".join(f"      {b}" for b in body)
    return (f"linalg.generic {{indexing_maps = [{maps}], iterator_types = [{its}]}} "
            f"ins({', '.join(v for v, _, _ in ins)} : {', '.join(t for _, t, _ in ins)}) "
            f"outs({out[0]} : {out[1]}) {{\n    ^bb0({args}, %acc: {elem_out}):\n{lines}\n"
            f"      linalg.yield %y : {elem_out}\n    }} -> {out[1]}")


ROW, COL = "affine_map<(d0, d1) -> (d0, d1)>", "affine_map<(d0, d1) -> (d0)>"
VEC = "affine_map<(d0, d1) -> (d1)>"


def mlir(kind: str, m: int, n: int, dtype: str) -> str:
    """``@main`` of one chain over an ``m x n`` input (plus ``n``-vectors for the norms)."""
    x, r = _t((m, n), dtype), _t((m,), "f32")
    v = _t((n,), dtype)
    head = ["%cz = arith.constant 0.0 : f32", "%c1 = arith.constant 1.0 : f32",
            "%ninf = arith.constant 0xFF800000 : f32",
            f"%cn = arith.constant {float(n)!r} : f32", f"%eps = arith.constant {EPS:.6e} : f32",
            f"%er = tensor.empty() : {r}", f"%zero = linalg.fill ins(%cz : f32) outs(%er : {r}) -> {r}",
            f"%lowest = linalg.fill ins(%ninf : f32) outs(%er : {r}) -> {r}",
            f"%eo = tensor.empty() : {x}"]

    def red(name, ins, init, body):
        return f"{name} = " + _generic(ins, (init, r, COL), body, True, "f32")

    def out(ins, body):
        return "%out = " + _generic(ins, ("%eo", x, ROW), body, False, dtype)

    trunc = "%y = arith.truncf %q : f32 to " + dtype if dtype != "f32" else "%y = arith.mulf %q, %c1 : f32"
    xin = ("%x", x, ROW)
    if kind in ("softmax", "log_softmax"):
        ops = [red("%max", [xin], "%lowest", [_ext(dtype, "%a0", "%f"), "%y = arith.maximumf %f, %acc : f32"]),
               red("%sum", [xin, ("%max", r, COL)], "%zero",
                   [_ext(dtype, "%a0", "%f"), "%d = arith.subf %f, %a1 : f32", "%e = math.exp %d : f32",
                    "%y = arith.addf %e, %acc : f32"])]
        tail = (["%e = math.exp %d : f32", "%q = arith.divf %e, %a2 : f32"] if kind == "softmax" else
                ["%l = math.log %a2 : f32", "%q = arith.subf %d, %l : f32"])
        ops.append(out([xin, ("%max", r, COL), ("%sum", r, COL)],
                       [_ext(dtype, "%a0", "%f"), "%d = arith.subf %f, %a1 : f32", *tail, trunc]))
        args = f"%x: {x}"
    elif kind == "layernorm":
        ops = [red("%sum", [xin], "%zero", [_ext(dtype, "%a0", "%f"), "%y = arith.addf %f, %acc : f32"]),
               red("%var", [xin, ("%sum", r, COL)], "%zero",
                   [_ext(dtype, "%a0", "%f"), "%mean = arith.divf %a1, %cn : f32",
                    "%d = arith.subf %f, %mean : f32", "%s = arith.mulf %d, %d : f32",
                    "%y = arith.addf %s, %acc : f32"]),
               out([xin, ("%sum", r, COL), ("%var", r, COL), ("%w", v, VEC), ("%b", v, VEC)],
                   [_ext(dtype, "%a0", "%f"), _ext(dtype, "%a3", "%wf"), _ext(dtype, "%a4", "%bf"),
                    "%mean = arith.divf %a1, %cn : f32", "%vr = arith.divf %a2, %cn : f32",
                    "%ve = arith.addf %vr, %eps : f32", "%rs = math.rsqrt %ve : f32",
                    "%d = arith.subf %f, %mean : f32", "%nrm = arith.mulf %d, %rs : f32",
                    "%sc = arith.mulf %nrm, %wf : f32", "%q = arith.addf %sc, %bf : f32", trunc])]
        args = f"%x: {x}, %w: {v}, %b: {v}"
    elif kind == "rmsnorm":
        ops = [red("%ss", [xin], "%zero", [_ext(dtype, "%a0", "%f"), "%s = arith.mulf %f, %f : f32",
                                           "%y = arith.addf %s, %acc : f32"]),
               out([xin, ("%ss", r, COL), ("%w", v, VEC)],
                   [_ext(dtype, "%a0", "%f"), _ext(dtype, "%a2", "%wf"), "%ms = arith.divf %a1, %cn : f32",
                    "%me = arith.addf %ms, %eps : f32", "%rs = math.rsqrt %me : f32",
                    "%nrm = arith.mulf %f, %rs : f32", "%q = arith.mulf %nrm, %wf : f32", trunc])]
        args = f"%x: {x}, %w: {v}"
    else:
        raise ValueError(kind)
    body = "\n  ".join(head + ops)
    return f"func.func @main({args}) -> {x} {{\n  {body}\n  return %out : {x}\n}}"


def softmax_then(m: int, n: int, then: str) -> str:
    """f32 softmax, then an op reading it elementwise: ``scale`` (times 3) or ``entropy``
    (-sum(p log p) over the row, a fold with ``sub``: no parallel template takes it)."""
    x, r = _t((m, n), "f32"), _t((m,), "f32")
    if then == "entropy":
        op = "%then = " + _generic([("%out", x, ROW)], ("%zero", r, COL), [
            "%l = math.log %a0 : f32", "%pl = arith.mulf %a0, %l : f32",
            "%y = arith.subf %acc, %pl : f32"], True, "f32")
    else:
        op = "%then = " + _generic([("%out", x, ROW)], ("%eo", x, ROW), [
            "%c3 = arith.constant 3.0 : f32", "%y = arith.mulf %a0, %c3 : f32"], False, "f32")
    result = r if then == "entropy" else x
    src = mlir("softmax", m, n, "f32").replace(f"  return %out : {x}", f"  {op}\n  return %then : {result}")
    return src.replace(f") -> {x} {{", f") -> {result} {{", 1)


def softmax_then_reference(then: str, x):
    p = reference("softmax", x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(p * np.log(p)).sum(axis=-1) if then == "entropy" else 3 * p


def reference(kind: str, x, *vectors):
    """The float64 result (NaN where the row's arithmetic makes one, as the kernels do)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        if kind in ("softmax", "log_softmax"):
            mx = x.max(axis=-1, keepdims=True)
            d = x - mx
            s = np.exp(d).sum(axis=-1, keepdims=True)
            return np.exp(d) / s if kind == "softmax" else d - np.log(s)
        w = np.asarray(vectors[0], np.float64)
        if kind == "layernorm":
            mean = x.mean(axis=-1, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
            return (x - mean) / np.sqrt(var + EPS) * w + np.asarray(vectors[1], np.float64)
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * w


def inputs(kind: str, m: int, n: int, dtype: str, rng: np.random.Generator, specials: bool = False):
    """Random inputs; with ``specials``, rows holding +inf, -inf, all -inf, NaN and -0.0."""
    x = rng.standard_normal((m, n)) * 3
    if specials:
        rows = iter(range(m))
        for fill in ("inf", "ninf", "all_ninf", "nan", "negzero"):
            row = next(rows, None)
            if row is None:
                break
            if fill == "all_ninf":
                x[row] = -np.inf
            elif fill == "negzero":
                x[row] = -0.0
            else:
                x[row, rng.integers(n)] = {"inf": np.inf, "ninf": -np.inf, "nan": np.nan}[fill]
    args = [x.astype(NP_DTYPES[dtype])]
    count = {"layernorm": 2, "rmsnorm": 1}.get(kind, 0)
    args += [rng.standard_normal(n).astype(NP_DTYPES[dtype]) for _ in range(count)]
    return args


def tolerance(dtype: str) -> float:
    """Outputs are rounded once to ``dtype`` (f32 sums reassociate: a few ulps of the row)."""
    return {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2}[dtype]


def leading_dims(kind: str, shape: tuple[int, ...], seed: int = 0):
    """(MLIR from torch, input, float64 result) of a chain over dims other than the last:
    ``softmax_dim1``, ``softmax_unit_dims`` (over the last dim, one row a head: the keepdim max
    read through a view whose digits sum a unit loop), or ``batch_stats`` (a batch norm's training statistics: mean and variance
    over every dim but the channels); NaN, +inf and -0.0 in the input."""
    import torch  # CI installs it: a missing torch fails there, never skips
    from pyree.compiler import import_torch

    def fn(x):
        if kind == "softmax_dim1":
            return torch.softmax(x, dim=1)
        if kind == "softmax_unit_dims":  # a decode step's scores, [batch, heads, 1, keys]
            return torch.softmax(x, dim=-1)
        mean = x.mean(dim=(0, 2, 3), keepdim=True)
        return (x - mean) * torch.rsqrt(((x - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True) + 1e-5)

    class Chain(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    flat = x.view(-1)
    flat[[1, flat.numel() // 3, flat.numel() - 2]] = torch.tensor([float("nan"), float("inf"), -0.0])
    with torch.no_grad():
        want = fn(x.double()).numpy()
    return import_torch(Chain(), x, function_name="main"), x.numpy(), want


def check(kind: str, got, args, dtype: str) -> None:
    check_against(got, reference(kind, *args), tolerance(dtype))


def check_against(got, want, tol: float = 2e-5) -> None:
    """NaN where ``want`` has one, infinities equal, finite values within ``tol`` of their
    magnitude (or of 1 below it)."""
    got = np.asarray(got, np.float64)
    scale = np.where(np.isfinite(want), np.maximum(np.abs(want), 1.0), 1.0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    err = np.abs(got[finite] - want[finite]) / scale[finite]
    assert err.size == 0 or err.max() <= tol, f"max error {err.max()} > {tol}"
