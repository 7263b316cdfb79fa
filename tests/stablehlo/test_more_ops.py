"""StableHLO ops IREE accepts that pyree once refused: composite (inlined), tuples (taken apart
inside a function), einsum / unary_einsum, batch_norm_training / batch_norm_grad, the device ids
and collectives of a single-device program, after_all / tokens, dynamic_pad with constant
padding. Each runs against JAX or numpy at odd shapes, on local-task and (``vulkan``) lavapipe;
the forms still refused are CompileErrors at the op's line."""

from __future__ import annotations

import os
import subprocess
import sys

import jax_runs
import numpy as np
import pyree.runtime as rt
import pytest
from jax_runs import DEVICES, TARGETS
from pyree.compiler import CompileError, compile_str
from pyree.compiler.options import CompileOptions
from tooling import require_module

jax = require_module("jax")
jnp, lax = jax.numpy, jax.lax
jax.config.update("jax_platforms", "cpu")

RNG = np.random.default_rng(11)


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def compiled(text: str, device: str):
    options = CompileOptions(target_backends=[TARGETS[device]], cuda_target="sm_90",
                             vulkan_target=os.environ.get("PYREE_VULKAN_TARGET",
                                                          "cpu-lavapipe-linux"))
    return rt.load_module(compile_str(text, options), device=device)


def run(text: str, device: str, name: str, *args) -> list[np.ndarray]:
    out = compiled(text, device)[name](*args)
    return [np.asarray(o.to_host()) for o in (out if isinstance(out, tuple) else (out,))]


def normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def with_specials(x: np.ndarray) -> np.ndarray:
    """``x`` with a NaN, an inf and a -inf in it (a copy)."""
    x = x.copy()
    flat = x.reshape(-1)
    flat[0], flat[len(flat) // 2], flat[-1] = np.nan, np.inf, -np.inf
    return x


def close(got, want, rtol=1e-5, atol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def tensor(shape, dtype="f32") -> str:
    return f"tensor<{''.join(f'{n}x' for n in shape)}{dtype}>"


def refused(text: str, line: int, *words: str) -> None:
    """``text`` is refused with a CompileError at its line ``line`` naming ``words``."""
    with pytest.raises(CompileError) as info:
        compile_str(text, CompileOptions(target_backends=["llvm-cpu"]))
    message = str(info.value)
    assert f":{line}:" in message.split(" error:")[0], message
    for word in words:
        assert word in message, message


# ---- composite ---------------------------------------------------------------------------

def _composites(x, y):
    """Nested composites, one of two results, with attributes."""
    def mulsub(x, y, alpha):
        return alpha * x * y + 1.0, x - y

    inner = lax.composite(mulsub, "test.mulsub")
    a, b = inner(x, y, alpha=2.5)
    outer = lax.composite(lambda v: jnp.tanh(v) + inner(v, v, alpha=0.5)[0], "test.outer")
    return outer(a), b


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_composite_nested_with_several_results(device, generic):
    x, y = with_specials(normal(3, 7)), normal(3, 7)
    lowered = jax.jit(_composites).lower(x, y)
    text = lowered.compiler_ir("stablehlo").operation.get_asm(print_generic_op_form=True) \
        if generic else lowered.as_text()
    assert "stablehlo.composite" in text
    close(run(text, device, "main", x, y), jax.jit(_composites)(x, y))


def test_composite_of_jax_helpers(device):
    """JAX's own use: a composite whose decomposition calls private functions itself."""
    def f(x):
        gelu = lax.composite(lambda v: jax.nn.gelu(v, approximate=False), "test.gelu")
        return gelu(x) * 2.0

    x = with_specials(normal(5, 3))
    close(*jax_runs.run_both(jax, device, f, x), rtol=1e-5, atol=1e-6)


def test_recursive_composite_refused():
    text = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.composite "r" %x {decomposition = @r} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
func.func private @r(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.composite "r" %x {decomposition = @r} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}"""
    refused(text, 6, "recursive composite @r")


# ---- tuples ------------------------------------------------------------------------------

TUPLES = """func.func @main(%a: tensor<5x3xf32>, %b: tensor<f32>, %c: tensor<3xi32>) -> (tensor<5x3xf32>, tensor<3xi32>, tensor<f32>) {
  %t = stablehlo.tuple %a, %b : tuple<tensor<5x3xf32>, tensor<f32>>
  %u = "stablehlo.tuple"(%t, %c) : (tuple<tensor<5x3xf32>, tensor<f32>>, tensor<3xi32>) -> tuple<tuple<tensor<5x3xf32>, tensor<f32>>, tensor<3xi32>>
  %v = call @swap(%u) : (tuple<tuple<tensor<5x3xf32>, tensor<f32>>, tensor<3xi32>>) -> tuple<tensor<3xi32>, tuple<tensor<5x3xf32>, tensor<f32>>>
  %w = stablehlo.get_tuple_element %v[1] : (tuple<tensor<3xi32>, tuple<tensor<5x3xf32>, tensor<f32>>>) -> tuple<tensor<5x3xf32>, tensor<f32>>
  %x = stablehlo.get_tuple_element %w[0] : (tuple<tensor<5x3xf32>, tensor<f32>>) -> tensor<5x3xf32>
  %s = "stablehlo.get_tuple_element"(%w) {index = 1 : i32} : (tuple<tensor<5x3xf32>, tensor<f32>>) -> tensor<f32>
  %i = stablehlo.get_tuple_element %v[0] : (tuple<tensor<3xi32>, tuple<tensor<5x3xf32>, tensor<f32>>>) -> tensor<3xi32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<5x3xf32>
  %y = stablehlo.multiply %x, %sb : tensor<5x3xf32>
  %j = stablehlo.add %i, %i : tensor<3xi32>
  return %y, %j, %s : tensor<5x3xf32>, tensor<3xi32>, tensor<f32>
}
func.func private @swap(%u: tuple<tuple<tensor<5x3xf32>, tensor<f32>>, tensor<3xi32>>) -> tuple<tensor<3xi32>, tuple<tensor<5x3xf32>, tensor<f32>>> {
  %p = stablehlo.get_tuple_element %u[0] : (tuple<tuple<tensor<5x3xf32>, tensor<f32>>, tensor<3xi32>>) -> tuple<tensor<5x3xf32>, tensor<f32>>
  %q = stablehlo.get_tuple_element %u[1] : (tuple<tuple<tensor<5x3xf32>, tensor<f32>>, tensor<3xi32>>) -> tensor<3xi32>
  %r = stablehlo.tuple %q, %p : tuple<tensor<3xi32>, tuple<tensor<5x3xf32>, tensor<f32>>>
  return %r : tuple<tensor<3xi32>, tuple<tensor<5x3xf32>, tensor<f32>>>
}"""


def test_tuples_built_passed_and_taken_apart(device):
    a, b = with_specials(normal(5, 3)), np.float32(-1.75)
    c = RNG.integers(-1000, 1000, 3).astype(np.int32)
    close(run(TUPLES, device, "main", a, b, c), [a * b, c + c, np.asarray(b)])


def test_stablehlo_xla_input_type_reads_stablehlo(tmp_path):
    """IREE's --iree-input-type=stablehlo_xla (XLA's exports, tuples inside functions): the CLI
    compiles the tuple program with it and the module runs."""
    source, out = tmp_path / "t.mlir", tmp_path / "t.vmfb"
    source.write_text(TUPLES)
    done = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                           "--iree-input-type=stablehlo_xla", "--iree-hal-target-backends=llvm-cpu",
                           "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    a, b = with_specials(normal(5, 3)), np.float32(2.5)
    c = RNG.integers(-1000, 1000, 3).astype(np.int32)
    got = rt.load_module(out.read_bytes(), device="local-task")["main"](a, b, c)
    close([np.asarray(g.to_host()) for g in got], [a * b, c + c, np.asarray(b)])


def test_tuple_refusals():
    refused("""func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %t = stablehlo.tuple %a : tuple<tensor<2xf32>>
  %x = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf32>>) -> tensor<2xf32>
  return %x : tensor<2xf32>
}""", 3, "index 1 is past the tuple's 1 elements")


XLA_SIGNATURE = """func.func @main(%p: tuple<tensor<3xf32>, tuple<tensor<2xi32>, tensor<f32>>>, %q: tensor<3xf32>) -> tuple<tensor<3xf32>, tensor<2xi32>> {
  %a = stablehlo.get_tuple_element %p[0] : (tuple<tensor<3xf32>, tuple<tensor<2xi32>, tensor<f32>>>) -> tensor<3xf32>
  %n = stablehlo.get_tuple_element %p[1] : (tuple<tensor<3xf32>, tuple<tensor<2xi32>, tensor<f32>>>) -> tuple<tensor<2xi32>, tensor<f32>>
  %i = stablehlo.get_tuple_element %n[0] : (tuple<tensor<2xi32>, tensor<f32>>) -> tensor<2xi32>
  %s = stablehlo.get_tuple_element %n[1] : (tuple<tensor<2xi32>, tensor<f32>>) -> tensor<f32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<3xf32>
  %y = stablehlo.multiply %a, %sb : tensor<3xf32>
  %z = stablehlo.add %y, %q : tensor<3xf32>
  %r = stablehlo.tuple %z, %i : tuple<tensor<3xf32>, tensor<2xi32>>
  return %r : tuple<tensor<3xf32>, tensor<2xi32>>
}"""


def test_tuples_in_an_exported_signature_are_flattened(device):
    """XLA's form: a nested tuple argument is its elements, in order, as module arguments; a
    returned tuple its elements, as results (as IREE flattens them)."""
    a, q = with_specials(normal(3)), normal(3)
    i, s = np.array([7, -8], np.int32), np.float32(-2.0)
    close(run(XLA_SIGNATURE, device, "main", a, i, s, q), [a * s + q, i])


# ---- einsum ------------------------------------------------------------------------------

EINSUMS = [
    ("ab,bc->ac", [(3, 5), (5, 7)]),
    ("bij,bjk->bki", [(2, 3, 5), (2, 5, 4)]),
    ("i,j->ij", [(3,), (5,)]),
    ("ij,jk->", [(3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 5), (2, 5, 3)]),
    ("ij,ij->i", [(7, 3), (7, 3)]),
    ("ab->ba", [(3, 5)]),
    ("ii->i", [(5, 5)]),
    ("ii->", [(5, 5)]),
    ("abc->b", [(2, 3, 5)]),
    ("aba->ab", [(3, 2, 3)]),
]


@pytest.mark.parametrize("config,shapes", EINSUMS, ids=[c for c, _ in EINSUMS])
def test_einsum(device, config, shapes):
    args = [normal(*s) for s in shapes]
    args[0] = with_specials(args[0]) if args[0].size > 2 else args[0]
    want = np.einsum(config, *args)
    op = "einsum" if len(args) == 2 else "unary_einsum"
    names = ", ".join(f"%a{k}" for k in range(len(args)))
    text = f"""func.func @main({', '.join(f'%a{k}: {tensor(s)}' for k, s in enumerate(shapes))}) -> {tensor(want.shape)} {{
  %0 = stablehlo.{op} {names}, config = "{config}" : ({', '.join(tensor(s) for s in shapes)}) -> {tensor(want.shape)}
  return %0 : {tensor(want.shape)}
}}"""
    got = run(text, device, "main", *args)
    close(got, [want.astype(np.float32)], rtol=1e-4, atol=1e-4)


def test_einsum_generic_form_converts_integers():
    text = """func.func @main(%a: tensor<3x4xi32>, %b: tensor<4xi32>) -> tensor<3xi32> {
  %0 = "stablehlo.einsum"(%a, %b) {einsum_config = "ij,j->i"} : (tensor<3x4xi32>, tensor<4xi32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}"""
    a = RNG.integers(-50, 50, (3, 4)).astype(np.int32)
    b = RNG.integers(-50, 50, 4).astype(np.int32)
    close(run(text, "local-task", "main", a, b), [a @ b])


def test_einsum_refusals():
    refused("""func.func @main(%a: tensor<3xf32>) -> tensor<3x3xf32> {
  %0 = stablehlo.unary_einsum %a, config = "i->ii" : (tensor<3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}""", 2, "einsum", "each of its dims once")
    refused("""func.func @main(%a: tensor<3x4xf32>, %b: tensor<5x2xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.einsum %a, %b, config = "ij,jk->ik" : (tensor<3x4xf32>, tensor<5x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}""", 2, "'j' is 4 in one place and 5")


# ---- batch norm --------------------------------------------------------------------------

def _bn_module(shape, feature, epsilon):
    c = shape[feature]
    t, v = tensor(shape), tensor((c,))
    attrs = f"{{epsilon = {epsilon:e} : f32, feature_index = {feature} : i64}}"
    return f"""func.func @train(%x: {t}, %s: {v}, %o: {v}) -> ({t}, {v}, {v}) {{
  %0:3 = "stablehlo.batch_norm_training"(%x, %s, %o) {attrs} : ({t}, {v}, {v}) -> ({t}, {v}, {v})
  return %0#0, %0#1, %0#2 : {t}, {v}, {v}
}}
func.func @grad(%x: {t}, %s: {v}, %m: {v}, %var: {v}, %g: {t}) -> ({t}, {v}, {v}) {{
  %0:3 = "stablehlo.batch_norm_grad"(%x, %s, %m, %var, %g) {attrs} : ({t}, {v}, {v}, {v}, {t}) -> ({t}, {v}, {v})
  return %0#0, %0#1, %0#2 : {t}, {v}, {v}
}}"""


BN_SHAPES = [((5, 3, 2, 7), 1), ((9, 4), 0), ((3, 5, 6), 2)]


@pytest.mark.parametrize("shape,feature", BN_SHAPES, ids=[str(s) for s, _ in BN_SHAPES])
def test_batch_norm_training_and_grad(device, shape, feature):
    eps = 1e-3
    module = compiled(_bn_module(shape, feature, eps), device)
    axes = tuple(d for d in range(len(shape)) if d != feature)
    along = lambda v: v.reshape([-1 if d == feature else 1 for d in range(len(shape))])  # noqa: E731
    x = normal(*shape) * 3 + 10  # a mean large against the spread
    x[(slice(None),) * feature + (1,)] = np.nan  # one feature's statistics are NaN, only its
    scale, offset = normal(shape[feature]), normal(shape[feature])
    got = [np.asarray(o.to_host()) for o in module["train"](x, scale, offset)]
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axes), x64.var(axes)  # biased
    out = along(scale) * (x64 - along(mean)) / np.sqrt(along(var) + eps) + along(offset)
    close(got, [a.astype(np.float32) for a in (out, mean, var)], rtol=1e-4, atol=1e-4)

    # The gradient of normalising with the batch's own statistics, by JAX's autodiff (which
    # orders its terms otherwise than the spec, so an inf in ``g`` may give inf or NaN: a NaN
    # only, which makes its feature's gradients NaN either way).
    x = normal(*shape) * 2 - 1
    g = normal(*shape)
    g.reshape(-1)[-1] = np.nan
    mean, var = x.astype(np.float64).mean(axes), x.astype(np.float64).var(axes)

    def normalise(x):
        mu = x.mean(axes, keepdims=True)
        return along(scale) * (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(axes, keepdims=True) + eps)

    dx = np.asarray(jax.vjp(normalise, x)[1](g)[0])
    xhat = (x - along(mean)) / np.sqrt(along(var) + eps)
    got = [np.asarray(o.to_host()) for o in module["grad"](
        x, scale, mean.astype(np.float32), var.astype(np.float32), g)]
    close(got, [dx, (g * xhat).sum(axes).astype(np.float32), g.sum(axes)], rtol=1e-4, atol=1e-4)


# ---- device ids and collectives ----------------------------------------------------------

@pytest.fixture(params=[True, False], ids=["shardy", "gspmd"])
def partitioner(request):
    """JAX's default Shardy output (a module-level ``sdy.mesh``, ``#sdy.sharding``s) and its
    older GSPMD one (``mhlo.sharding``)."""
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", request.param)
    yield
    jax.config.update("jax_use_shardy_partitioner", old)


def _collectives(x):
    return (lax.psum(x, "i"), lax.pmax(x, "i"), lax.all_gather(x, "i", axis=0, tiled=True),
            lax.psum_scatter(x, "i", scatter_dimension=0, tiled=True),
            lax.ppermute(x, "i", perm=[(0, 0)]), lax.axis_index("i") + 3)


def test_jax_collectives_on_one_device(device, partitioner):
    from jax import shard_map
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = jax.make_mesh((1,), ("i",), axis_types=(jax.sharding.AxisType.Explicit,))
    spec = PartitionSpec("i")
    f = jax.jit(shard_map(_collectives, mesh=mesh, in_specs=spec,
                          out_specs=(spec,) * 5 + (PartitionSpec(),), check_vma=False))
    x = jax.device_put(with_specials(normal(5, 3)), NamedSharding(mesh, spec))
    with jax.set_mesh(mesh):
        text = f.lower(x).as_text()
        want = f(x)
    for name in ("all_reduce", "all_gather", "reduce_scatter", "collective_permute",
                 "partition_id"):
        assert f"stablehlo.{name}" in text
    close(run(text, device, "main", np.asarray(x)), want)


COLLECTIVES = """module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
func.func @main(%x: tensor<3x5xf32>, %n: tensor<7xi32>) -> (tensor<3x5xf32>, tensor<7xi32>, tensor<3x5xf32>, tensor<7xi32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<ui32>, tensor<ui32>) {
  %0:2 = "stablehlo.all_reduce"(%x, %n) <{replica_groups = dense<> : tensor<0x0xi64>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<3x5xf32>, tensor<7xi32>) -> (tensor<3x5xf32>, tensor<7xi32>)
  %1 = "stablehlo.all_to_all"(%x) <{split_dimension = 1 : i64, concat_dimension = 0 : i64, split_count = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>}> : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %2 = "stablehlo.collective_broadcast"(%n) <{replica_groups = dense<[[0]]> : tensor<1x1xi64>, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>}> : (tensor<7xi32>) -> tensor<7xi32>
  %3 = "stablehlo.collective_permute"(%x) <{source_target_pairs = dense<> : tensor<0x2xi64>}> : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %4 = "stablehlo.all_gather"(%1) <{all_gather_dim = 1 : i64, replica_groups = dense<[[0, -1]]> : tensor<1x2xi64>}> : (tensor<3x5xf32>) -> tensor<3x5xf32>
  %r = stablehlo.replica_id : tensor<ui32>
  %p = stablehlo.partition_id : tensor<ui32>
  return %0#0, %0#1, %1, %2, %3, %4, %r, %p : tensor<3x5xf32>, tensor<7xi32>, tensor<3x5xf32>, tensor<7xi32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<ui32>, tensor<ui32>
}
}"""


def test_collectives_of_one_participant(device):
    x = with_specials(normal(3, 5))
    n = RNG.integers(-9, 9, 7).astype(np.int32)
    zero = np.uint32(0)
    close(run(COLLECTIVES, device, "main", x, n),
          [x, n, x, n, np.zeros_like(x), x, np.asarray(zero), np.asarray(zero)])


def test_collectives_over_devices_refused(tmp_path):
    permute = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.collective_permute"(%x) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    refused(permute, 2, "'stablehlo.collective_permute'", "[[0, 1], [1, 0]]",
            "single-device")
    refused("""func.func @main(%x: tensor<4xf32>) -> tensor<8xf32> {
  %0 = "stablehlo.all_gather"(%x) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}""", 2, "'stablehlo.all_gather'", "[[0, 1]]", "single-device")
    refused("""module attributes {mhlo.num_replicas = 2 : i32} {
func.func @main() -> tensor<ui32> {
  %0 = stablehlo.replica_id : tensor<ui32>
  return %0 : tensor<ui32>
}
}""", 3, "'stablehlo.replica_id'", "mhlo.num_replicas = 2")
    # Through the CLI: a non-zero exit naming file:line:col, no traceback.
    source = tmp_path / "permute.mlir"
    source.write_text(permute)
    result = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                             "--iree-input-type=stablehlo", "--iree-hal-target-backends=llvm-cpu",
                             "-o", str(tmp_path / "out.vmfb")], capture_output=True, text=True)
    assert result.returncode != 0
    assert "permute.mlir:2:" in result.stderr and "single-device" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# ---- tokens, dynamic_pad -----------------------------------------------------------------

PAD = """func.func @main(%x: tensor<3x4xf32>, %p: tensor<f32>) -> tensor<6x9xf32> {
  %t0 = stablehlo.after_all : !stablehlo.token
  %lo = stablehlo.constant dense<[1, -1]> : tensor<2xi64>
  %hi = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
  %in = stablehlo.constant dense<[0, 1]> : tensor<2xi64>
  %0 = stablehlo.dynamic_pad %x, %p, %lo, %hi, %in : (tensor<3x4xf32>, tensor<f32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<6x9xf32>
  %t1 = "stablehlo.create_token"() : () -> !stablehlo.token
  %t2 = stablehlo.after_all %t0, %t1 : !stablehlo.token
  %t3 = call @pass(%t2) : (!stablehlo.token) -> !stablehlo.token
  return %0 : tensor<6x9xf32>
}
func.func private @pass(%t: !stablehlo.token) -> !stablehlo.token {
  %u = stablehlo.after_all %t : !stablehlo.token
  return %u : !stablehlo.token
}"""


def test_tokens_and_dynamic_pad_of_constants(device):
    x, p = with_specials(normal(3, 4)), np.float32(-7.5)
    want = lax.pad(x, p, [(1, 2, 0), (-1, 3, 1)])
    close(run(PAD, device, "main", x, p), [want])


def test_dynamic_pad_by_run_time_amounts_refused():
    refused("""func.func @main(%x: tensor<3x4xf32>, %p: tensor<f32>, %lo: tensor<2xi64>) -> tensor<?x?xf32> {
  %hi = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
  %0 = stablehlo.dynamic_pad %x, %p, %lo, %hi, %hi : (tensor<3x4xf32>, tensor<f32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}""", 3, "stablehlo.dynamic_pad", "run-time values")


def test_uniform_quantize_refused():
    """Quantized types: xDSL has no ``quant`` dialect, so these stay refused by name."""
    refused("""func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %q = stablehlo.uniform_quantize %a : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.1:-3>>
  %d = stablehlo.uniform_dequantize %q : (tensor<2x!quant.uniform<i8:f32, 0.1:-3>>) -> tensor<2xf32>
  return %d : tensor<2xf32>
}""", 2, "'stablehlo.uniform_quantize'")


@pytest.mark.parametrize("kind, k, dim, aggregate", [
    ("max", 5, 1, True), ("min", 4, 1, True), ("max", 3, 0, True), ("max", 3, 1, False)])
def test_approx_top_k_exactly(device, kind, k, dim, aggregate):
    """JAX's ``approx_max_k``/``approx_min_k`` (``custom_call @ApproxTopK`` with a public
    comparator function, which is no entry point): the exact top k, as XLA computes it off TPUs;
    values equal JAX's, indices point at them (ties may come in either order: the op is
    approximate), with NaN, inf and -0 among many ties. Without aggregation the whole dim,
    sorted (no NaN there: XLA's own order of a NaN under a "greater" comparator, which NaN
    breaks, is arbitrary)."""
    x = RNG.integers(-5, 5, (9, 37)).astype(np.float32)
    x[4, 5], x[4, 6] = np.inf, -0.0
    if aggregate:
        x[0, 3], x[2, :4] = np.nan, np.nan
    op = lax.approx_max_k if kind == "max" else lax.approx_min_k
    f = lambda v: op(v, k, reduction_dimension=dim, aggregate_to_topk=aggregate)
    text = jax.jit(f).lower(x).as_text()
    module = compiled(text, device)
    assert module.function_names == ["main"]
    values, indices = (np.asarray(r.to_host()) for r in module["main"](x))
    want = np.asarray(jax.jit(f)(x)[0])
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=dim), values)
    assert all(len(set(line)) == line.size for line in np.moveaxis(indices, dim, -1).reshape(-1, indices.shape[dim]))


def test_chlo_bessel_i1e_zeta_and_polygamma(device):
    """``jax.scipy.special.i1e`` and ``zeta`` and ``lax.polygamma`` (chlo.bessel_i1e, chlo.zeta,
    chlo.polygamma) against JAX: the series / asymptotic switch of i1e at 15, its odd symmetry,
    0, inf and NaN; zeta's poles (x = 1, q a non-positive integer), its NaN domain (x < 1, a
    negative q with a fractional x) and a negative fractional q with an integer x; polygamma at
    n = 0 (digamma), 1-6, a fractional or negative n (NaN) and x near its poles."""
    sp = jax.scipy.special
    i1e_x = np.array([0.0, -0.0, 1e-30, 0.3, -0.3, 2.5, 8.0, 14.999, 15.0, 15.001, -15.001, 40.0,
                      1e4, 3e38, np.inf, -np.inf, np.nan, -7.25], np.float32)
    zeta_x = np.array([1.0, 0.5, 2.0, 2.0, 3.5, 2.0, 3.0, 1.5, 6.0, 1.0001, 2.0, 3.0], np.float32)
    zeta_q = np.array([1.0, 1.0, 1.0, 0.0, -1.5, -2.0, -1.5, 0.25, 7.5, 3.0, 1e4, 123.4],
                      np.float32)
    n = np.array([0.0, 1.0, 2.0, 3.0, 1.5, -1.0, 1.0, 4.0, 6.0, 2.0, 0.0], np.float32)
    x = np.array([0.5, 0.5, 2.25, 7.0, 1.0, 1.0, -0.5, 0.125, 3.0, 1e3, -2.5], np.float32)
    for f, args in ((sp.i1e, (i1e_x,)), (sp.zeta, (zeta_x, zeta_q)), (lax.polygamma, (n, x))):
        got, want = jax_runs.run_both(jax, device, f, *args)
        np.testing.assert_allclose(got[0], want[0], rtol=2e-5, atol=1e-30, equal_nan=True,
                                   err_msg=f.__name__)
