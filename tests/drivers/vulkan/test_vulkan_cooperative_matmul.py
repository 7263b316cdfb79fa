"""f16 and bf16 contractions on the cooperative-matrix template (vulkan-spirv, codegen/spirv/coopmat.py)
against numpy: odd sizes past every tile edge, each operand layout (F.linear's [n, k] weight is a
column-major B), batches, fused producers (an operand evaluated per half), f32 results with a
fused bias and ReLU, and NaN/inf inputs. On a GPU with VK_KHR_cooperative_matrix each matches
numpy; elsewhere (lavapipe) loading is refused with the missing feature named. Every shader
passes spirv-val (no device needed)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import spirv_binaries, validate, vulkan_vmfb
from pyree.runtime.errors import DriverError

pytestmark = pytest.mark.vulkan

TARGET = "hopper-h100-linux"
MULADD = (6 << 16) | 4459   # OpCooperativeMatrixMulAddKHR's first word


def t(shape, dtype):
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def contraction(batch: tuple, m: int, k: int, n: int, *, b_nk: bool = False, out: str = "f16",
                bias_relu: bool = False, negate_a: bool = False,
                element: str = "f16") -> tuple[str, list]:
    """MLIR of (batched) A @ B with ``element`` operands (B stored [n, k] with ``b_nk``), the
    product accumulated in ``out``; optionally -A fused in front and relu(. + bias) behind."""
    b = len(batch)
    lead = [f"d{i}" for i in range(b)]
    dims = ", ".join(lead + ["m", "n", "k"])
    a_shape, b_shape = (*batch, m, k), (*batch, n, k) if b_nk else (*batch, k, n)
    c_shape = (*batch, m, n)
    a_map = ", ".join(lead + ["m", "k"])
    b_map = ", ".join(lead + (["n", "k"] if b_nk else ["k", "n"]))
    c_map = ", ".join(lead + ["m", "n"])
    iters = ", ".join(['"parallel"'] * (b + 2) + ['"reduction"'])
    ext = "" if out == element else f"""
          %xa = arith.extf %x : {element} to {out}
          %ya = arith.extf %y : {element} to {out}"""
    xa, ya = ("%x", "%y") if out == element else ("%xa", "%ya")
    a_in = "%a"
    pre = ""
    if negate_a:
        pre = f"""
      %na = arith.negf %a : {t(a_shape, element)}"""
        a_in = "%na"
    post, result = "", "%r"
    if bias_relu:
        post = f"""
      %eb = tensor.empty() : {t(c_shape, out)}
      %bb = linalg.broadcast ins(%bias : {t((n,), out)}) outs(%eb : {t(c_shape, out)})
              dimensions = [{", ".join(map(str, range(b + 1)))}]
      %s = arith.addf %r, %bb : {t(c_shape, out)}
      %zs = arith.constant 0.0 : {out}
      %ez = tensor.empty() : {t(c_shape, out)}
      %z = linalg.fill ins(%zs : {out}) outs(%ez : {t(c_shape, out)}) -> {t(c_shape, out)}
      %y = arith.maximumf %s, %z : {t(c_shape, out)}"""
        result = "%y"
    args = f"%a: {t(a_shape, element)}, %b: {t(b_shape, element)}" + \
        (f", %bias: {t((n,), out)}" if bias_relu else "")
    mlir = f"""
    func.func @mm({args}) -> {t(c_shape, out)} {{{pre}
      %zero = arith.constant 0.0 : {out}
      %e = tensor.empty() : {t(c_shape, out)}
      %init = linalg.fill ins(%zero : {out}) outs(%e : {t(c_shape, out)}) -> {t(c_shape, out)}
      %r = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({a_map})>,
                                            affine_map<({dims}) -> ({b_map})>,
                                            affine_map<({dims}) -> ({c_map})>],
                           iterator_types = [{iters}]}}
          ins({a_in}, %b : {t(a_shape, element)}, {t(b_shape, element)})
          outs(%init : {t(c_shape, out)}) {{
        ^bb0(%x: {element}, %y: {element}, %acc: {out}):{ext}
          %p = arith.mulf {xa}, {ya} : {out}
          %s = arith.addf %acc, %p : {out}
          linalg.yield %s : {out}
      }} -> {t(c_shape, out)}{post}
      return {result} : {t(c_shape, out)}
    }}"""
    return mlir, [a_shape, b_shape] + ([(n,)] if bias_relu else [])


def reference(a, b, b_nk, bias=None, negate_a=False):
    a, b = a.astype(np.float64), b.astype(np.float64)
    if negate_a:
        a = -a
    r = a @ (np.swapaxes(b, -1, -2) if b_nk else b)
    return r if bias is None else np.maximum(r + bias, 0.0)


CASES = {   # name: (batch, m, k, n, options)
    "plain 128x48x192": ((), 128, 48, 192, {}),
    "odd 67x129x45": ((), 67, 129, 45, {}),
    "one fragment 16x16x16": ((), 16, 16, 16, {}),
    "rows past the tile 200x72x136": ((), 200, 72, 136, {}),
    "linear [n,k] 96x264x80": ((), 96, 264, 80, {"b_nk": True}),
    "linear [n,k] odd 33x37x50": ((), 33, 37, 50, {"b_nk": True}),
    "large 256x512x384": ((), 256, 512, 384, {"b_nk": True}),
    "batched 3x40x24x56": ((3,), 40, 24, 56, {}),
    "f32 result, bias, relu 70x96x130": ((), 70, 96, 130, {"out": "f32", "bias_relu": True}),
    "negated A fused 48x40x17": ((), 48, 40, 17, {"negate_a": True}),
    "four rows [n,k] 4x264x200": ((), 4, 264, 200, {"b_nk": True}),
    "three columns 70x56x3": ((), 70, 56, 3, {}),
    "bf16 linear [n,k] 96x264x80": ((), 96, 264, 80, {"b_nk": True, "element": "bf16",
                                                      "out": "bf16"}),
    "bf16 odd 45x70x33": ((), 45, 70, 33, {"element": "bf16", "out": "bf16"}),
    "bf16 five rows 5x1024x96": ((), 5, 1024, 96, {"b_nk": True, "element": "bf16",
                                                   "out": "bf16"}),
    "bf16 f32 result, bias, relu 128x64x136": ((), 128, 64, 136, {"element": "bf16", "out": "f32",
                                                                  "bias_relu": True}),
    "bf16 negated A fused 40x48x24": ((), 40, 48, 24, {"element": "bf16", "out": "bf16",
                                                       "negate_a": True}),
}
DTYPES = {"f16": np.float16, "f32": np.float32, "bf16": ml_dtypes.bfloat16}


def _shader(mlir: str, triple: str = TARGET) -> tuple[bytes, bytes]:
    """(module file, its SPIR-V), checked to multiply on the cooperative-matrix template."""
    vmfb = vulkan_vmfb(mlir, triple)
    (code, _), = spirv_binaries(vmfb)
    words = {int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code), 4)}
    assert MULADD in words, "the contraction did not take the cooperative-matrix template"
    return vmfb, code


@pytest.mark.parametrize("name", list(CASES))
def test_cooperative_matmul_shaders_pass_spirv_val(name, tmp_path):
    batch, m, k, n, options = CASES[name]
    assert validate(_shader(contraction(batch, m, k, n, **options)[0])[1], tmp_path) == ""


@pytest.mark.parametrize("name", [n for n in CASES if "bf16" not in n])
def test_cooperative_matmul_shaders_for_64_wide_subgroups_pass_spirv_val(name, tmp_path):
    """RDNA's 64-lane subgroups: fewer subgroups a tile where the staging would not give each
    invocation whole vectors, four elements a lane in the epilogue."""
    batch, m, k, n, options = CASES[name]
    code = _shader(contraction(batch, m, k, n, **options)[0], "rdna3-7900xtx-linux")[1]
    assert validate(code, tmp_path) == ""


def _load(mlir: str, device: str):
    vmfb, _ = _shader(mlir)
    try:
        return rt.load_module(vmfb, device=device)
    except DriverError as e:
        assert "cooperativeMatrix" in str(e) and TARGET in str(e)
        return None


@pytest.mark.parametrize("name", list(CASES))
def test_cooperative_matmul_matches_numpy(name, vulkan_device):
    batch, m, k, n, options = CASES[name]
    mlir, shapes = contraction(batch, m, k, n, **options)
    module = _load(mlir, vulkan_device)
    if module is None:
        return
    rng = np.random.default_rng()
    out = DTYPES[options.get("out", "f16")]
    args = [rng.standard_normal(s).astype(DTYPES[options.get("element", "f16")])
            for s in shapes[:2]]
    if options.get("bias_relu"):
        args.append(rng.standard_normal(shapes[2]).astype(out))
    got = np.asarray(module.mm(*args))
    want = reference(args[0], args[1], options.get("b_nk", False),
                     args[2] if options.get("bias_relu") else None, options.get("negate_a", False))
    assert got.dtype == out and got.shape == want.shape
    tol = 2e-2 if out == ml_dtypes.bfloat16 else 5e-3   # a rounding to the result type
    scale = np.abs(want).max()
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * scale)


def test_cooperative_matmul_keeps_nan_and_inf_in_their_rows_and_columns(vulkan_device):
    """A NaN or inf input reaches exactly the outputs whose dot products read it; the zeros that
    fill a tile past the matrix's edge spread neither."""
    m, k, n = 37, 40, 29
    mlir, _ = contraction((), m, k, n, out="f32")
    module = _load(mlir, vulkan_device)
    if module is None:
        return
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = np.abs(rng.standard_normal((k, n))).astype(np.float16) + np.float16(0.5)
    a[3, 5] = np.nan
    a[36, 39] = np.inf   # the last row and k: next to the zero fill
    b[39, 28] = -np.inf
    got = np.asarray(module.mm(a, b))
    with np.errstate(invalid="ignore", over="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    np.testing.assert_array_equal(np.isinf(got) & (got < 0), np.isinf(want) & (want < 0))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=5e-3,
                               atol=5e-3 * np.abs(want[finite]).max())


def _mixed_module() -> str:
    """One function with a tensor-core product and an f32 SIMT product: their workgroup arrays
    are distinct variables of one module."""
    linear, _ = contraction((), 2048, 32, 2048, b_nk=True)   # 128 x 128 tiles
    f32, _ = contraction((), 200, 96, 136, element="f32", out="f32")
    body = linear.split("{", 1)[1].rsplit("return", 1)[0]
    body32 = f32.split("{", 1)[1].rsplit("return", 1)[0].replace("%", "%q")
    return f"""
    func.func @mm(%a: {t((2048, 32), 'f16')}, %b: {t((2048, 32), 'f16')},
                  %qa: {t((200, 96), 'f32')}, %qb: {t((96, 136), 'f32')})
        -> ({t((2048, 2048), 'f16')}, {t((200, 136), 'f32')}) {{{body}{body32}
      return %r, %qr : {t((2048, 2048), 'f16')}, {t((200, 136), 'f32')}
    }}"""


def test_a_module_mixing_templates_stays_within_the_targets_workgroup_memory():
    """A driver may reserve every kernel's workgroup arrays for each kernel (NVIDIA's hung past
    48 KB): the tensor-core product's staged slices and scratch (24 KB) beside the SIMT
    product's tiles fit the Hopper target's 48 KB, and a module past its target's limit is
    refused by name instead of reaching the driver."""
    import dataclasses

    from pyree.compiler.codegen.spirv import targets
    from pyree.compiler.errors import CompileError
    vulkan_vmfb(_mixed_module(), TARGET)
    hopper = targets.resolve_target(TARGET)
    small = dataclasses.replace(hopper, max_shared_memory_bytes=30000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(targets, "resolve_target", lambda triple: small)
        patch.setattr("pyree.compiler.codegen.spirv.resolve_target", lambda triple: small)
        with pytest.raises(CompileError, match=r"kernels need [0-9]+ bytes of workgroup memory "
                                               r"together, past the 30000 of target"):
            vulkan_vmfb(_mixed_module(), TARGET)


def run_time_product(a: str, b: str, c: str, b_nk: bool, element: str, out: str) -> str:
    """(batched) A @ B of ``element`` operands accumulated in ``out``; the shapes ("?x64",
    "?x?x96") mark run-time sizes with "?", B stored [n, k] with ``b_nk``."""
    rank = a.count("x") + 1
    lead = [f"d{i}" for i in range(rank - 2)]
    dims = {"a": lead + ["m", "k"], "b": lead + (["n", "k"] if b_nk else ["k", "n"]),
            "c": lead + ["m", "n"]}
    shapes = {"a": a, "b": b, "c": c}
    types = {x: f"tensor<{shapes[x]}x{element if x != 'c' else out}>" for x in shapes}
    domain = ", ".join(lead + ["m", "n", "k"])
    maps = ", ".join(f"affine_map<({domain}) -> ({', '.join(dims[x])})>" for x in "abc")
    sizes, lines = [], []
    for i, extent in enumerate(c.split("x")):
        if extent == "?":  # the run-time size of C's dim i, read from the operand that has it
            src = next(x for x in "ab" if dims["c"][i] in dims[x] and
                       shapes[x].split("x")[dims[x].index(dims["c"][i])] == "?")
            lines.append(f"%i{i} = arith.constant {dims[src].index(dims['c'][i])} : index")
            lines.append(f"%s{i} = tensor.dim %{src}, %i{i} : {types[src]}")
            sizes.append(f"%s{i}")
    ext = "" if out == element else f"""
          %x = arith.extf %xs : {element} to {out}
          %y = arith.extf %ys : {element} to {out}"""
    xs, ys = ("%x", "%y") if out == element else ("%xs", "%ys")
    iters = ", ".join(['"parallel"'] * (rank - 2) + ['"parallel"', '"parallel"', '"reduction"'])
    body = "\n      ".join(lines)
    return f"""
    func.func @mm(%a: {types['a']}, %b: {types['b']}) -> {types['c']} {{
      {body}
      %zero = arith.constant 0.0 : {out}
      %e = tensor.empty({", ".join(sizes)}) : {types['c']}
      %init = linalg.fill ins(%zero : {out}) outs(%e : {types['c']}) -> {types['c']}
      %r = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}
          ins(%a, %b : {types['a']}, {types['b']}) outs(%init : {types['c']}) {{
        ^bb0({xs}: {element}, {ys}: {element}, %acc: {out}):{ext}
          %p = arith.mulf %x, %y : {out}
          %s = arith.addf %acc, %p : {out}
          linalg.yield %s : {out}
      }} -> {types['c']}
      return %r : {types['c']}
    }}"""


def run_time_rows(k: int, n: int, element: str, out: str, b_nk: bool) -> str:
    """A @ B with A's rows a run-time size (a prompt's), B a weight of ``element``."""
    return run_time_product(f"?x{k}", f"{n}x{k}" if b_nk else f"{k}x{n}", f"?x{n}", b_nk,
                            element, out)


RUN_TIME = {   # name: (k, n, element, out, b_nk)
    "f16 [k,n] 96x136": (96, 136, "f16", "f16", False),
    "f16 linear [n,k] f32 result 264x200": (264, 200, "f16", "f32", True),
    "bf16 linear [n,k] 72x130": (72, 130, "bf16", "bf16", True),
}


@pytest.mark.parametrize("name", list(RUN_TIME))
def test_cooperative_matmul_with_run_time_rows_passes_spirv_val(name, tmp_path):
    assert validate(_shader(run_time_rows(*RUN_TIME[name]))[1], tmp_path) == ""


@pytest.mark.parametrize("name", list(RUN_TIME))
def test_cooperative_matmul_with_run_time_rows_matches_numpy(name, vulkan_device):
    """One module for every prompt length: 1 row takes the fold that shares the tensor-core
    product's launch, other lengths 64-row tiles with the rows past M zero-filled."""
    k, n, element, out, b_nk = RUN_TIME[name]
    vmfb, _ = _shader(run_time_rows(k, n, element, out, b_nk))
    try:
        module = rt.load_module(vmfb, device=vulkan_device)
    except DriverError as e:
        assert "cooperativeMatrix" in str(e) and TARGET in str(e)
        return
    rng = np.random.default_rng()
    for m in (1, 5, 16, 67, 130):
        a = rng.standard_normal((m, k)).astype(DTYPES[element])
        b = rng.standard_normal((n, k) if b_nk else (k, n)).astype(DTYPES[element])
        got = np.asarray(module.mm(a, b))
        want = reference(a, b, b_nk)
        tol = 2e-2 if out == "bf16" else 5e-3
        assert got.shape == (m, n) and got.dtype == DTYPES[out]
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol,
                                   atol=tol * np.abs(want).max(), err_msg=f"{m} rows")


def run_time_dims(kind: str) -> str:
    """f16 products whose other dims are run-time sizes: a batch with its rows, K, or N of an
    [n, k] weight; f32 results."""
    a, b, c, b_nk = {"batch and rows": ("?x?x64", "?x64x96", "?x?x96", False),
                     "k": ("48x?", "?x40", "48x40", False),
                     "n": ("70x128", "?x128", "70x?", True)}[kind]
    return run_time_product(a, b, c, b_nk, "f16", "f32")


RUN_TIME_DIMS = {  # kind: [(A's shape, B's shape, B is [n, k]), ...] at which to run it
    "batch and rows": [((1, 1, 64), (1, 64, 96), False), ((3, 67, 64), (3, 64, 96), False)],
    "k": [((48, 1), (1, 40), False), ((48, 200), (200, 40), False), ((48, 16), (16, 40), False)],
    "n": [((70, 128), (1, 128), True), ((70, 128), (131, 128), True)],
}


@pytest.mark.parametrize("kind", list(RUN_TIME_DIMS))
def test_cooperative_matmul_with_other_run_time_dims(kind, vulkan_device, tmp_path):
    """Run-time batch, K or N: spirv-val here (where it is installed), numpy on the GPU."""
    vmfb, code = _shader(run_time_dims(kind))
    try:
        module = rt.load_module(vmfb, device=vulkan_device)
    except DriverError as e:
        assert "cooperativeMatrix" in str(e) and TARGET in str(e)
        assert validate(code, tmp_path) == ""
        return
    rng = np.random.default_rng()
    for a_shape, b_shape, b_nk in RUN_TIME_DIMS[kind]:
        a = rng.standard_normal(a_shape).astype(np.float16)
        b = rng.standard_normal(b_shape).astype(np.float16)
        got = np.asarray(module.mm(a, b))
        want = reference(a, b, b_nk)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=5e-3,
                                   atol=5e-3 * max(np.abs(want).max(), 1.0),
                                   err_msg=f"{a_shape} @ {b_shape}")


def assert_same_non_finite(got, want, rtol: float) -> None:
    """NaN, +inf and -inf exactly where float64 has them; the finite rest within ``rtol``."""
    got = np.asarray(got).astype(np.float64)
    for mask in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(mask(got), mask(want))
    finite = np.isfinite(want)
    assert finite.any()
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol,
                               atol=rtol * np.abs(want[finite]).max())


@pytest.mark.parametrize("kind", ["rows", "n"])
def test_run_time_edges_keep_nan_and_inf_of_the_last_row_and_column(kind, vulkan_device):
    """Past a run-time M (or N) the staging reads the last row (column) again instead of zeros
    (codegen/spirv/coopmat.py): what the tile computes there is never stored, so NaN and inf
    in the last row of A and the last column of the product reach exactly the outputs that
    read them, at sizes on and off the 64-wide tiles."""
    mlir = run_time_rows(264, 200, "f16", "f32", True) if kind == "rows" else run_time_dims("n")
    vmfb, _ = _shader(mlir)
    try:
        module = rt.load_module(vmfb, device=vulkan_device)
    except DriverError as e:
        assert "cooperativeMatrix" in str(e) and TARGET in str(e)
        return
    rng = np.random.default_rng(3)
    shapes = [((m, 264), (200, 264)) for m in (3, 64, 67, 130)] if kind == "rows" else \
        [((70, 128), (n, 128)) for n in (3, 64, 131)]
    for a_shape, b_shape in shapes:
        a = rng.standard_normal(a_shape).astype(np.float16)
        b = rng.standard_normal(b_shape).astype(np.float16)
        a[-1, 7], a[-1, -1], a[0, 3] = np.nan, np.inf, -np.inf
        b[-1, 5] = np.inf   # B is [n, k]: the product's last column
        with np.errstate(invalid="ignore"):
            want = reference(a, b, True)
        assert_same_non_finite(module.mm(a, b).to_host(), want, 5e-3)
