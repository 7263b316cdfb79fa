"""Dynamic shapes end to end on every target that compiles kernels sized at run time (``BACKENDS``:
llvm-cpu, and vulkan-spirv on a Vulkan device under the ``vulkan`` marker): one module serves
every size, checked against numpy and PyTorch at sizes 0, 1, primes and large, with NaN, +-inf and
-0 in the inputs; arguments that disagree on a shared dim are an InvocationError; other targets
refuse by name."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
import torch  # CI installs it: a missing torch fails there, never skips
from compiled import compiled
from pyree.compiler import CompileError, CompileOptions, compile_str, import_torch

CPU = CompileOptions(target_backends=["llvm-cpu"])
# (target backend, device) of each run: a GPU's row carries its device marker, so CI's ``-m vulkan``
# run (Mesa's lavapipe) takes it and the default run keeps llvm-cpu. PYREE_VULKAN_TARGET picks the
# device's --pyree-vulkan-target (hopper-h100-linux on an H100/H200), lavapipe's otherwise.
BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]
SIZES = [(0, 3), (1, 1), (7, 13), (131, 257), (5, 0), (1031, 2053)]

EXP_ADD_ROWSUM = """
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %a, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %z = arith.addf %x, %y : f32
    %w = math.exp %z : f32
    linalg.yield %w : f32
  } -> tensor<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %r0 = tensor.empty(%m) : tensor<?xf32>
  %r1 = linalg.fill ins(%zero : f32) outs(%r0 : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%s : tensor<?x?xf32>) outs(%r1 : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = arith.addf %x, %o : f32
    linalg.yield %z : f32
  } -> tensor<?xf32>
  return %s, %r : tensor<?x?xf32>, tensor<?xf32>
}
"""

MATMUL = """
func.func @mm(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%f : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""

RESHAPE = """
func.func @r(%a: tensor<?x4xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.expand_shape %a [[0, 1], [2]] output_shape [%d, 1, 4] : tensor<?x4xf32> into tensor<?x1x4xf32>
  %c = tensor.collapse_shape %e [[0, 1, 2]] : tensor<?x1x4xf32> into tensor<?xf32>
  return %c : tensor<?xf32>
}
"""


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> tuple[str, str]:
    target, device = request.param
    info = next((d for d in rt.list_drivers() if d.name == device), None)
    if info is None or not info.available:  # a device test skips without the device, in CI too
        pytest.skip(f"no {device} device: {info.reason if info else 'driver not installed'}")
    return target, device


def load(mlir: str, backend: tuple):
    """``mlir`` compiled for ``backend``'s target and loaded on its device. A GPU driver's tests
    that collect these cases give a third element, their own loader (modules built on the CPU
    machine: tests/drivers/cuda/test_cuda_dynamic.py)."""
    if len(backend) > 2:
        return backend[2](mlir)
    target, device = backend
    options = CompileOptions(target_backends=[target],
                             vulkan_target=os.environ.get("PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    return rt.load_module(compiled(mlir, options), device=device)


def _special(rng, shape) -> np.ndarray:
    """Random f32 with NaN, +-inf and -0 sprinkled in (where the array has room)."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    for k, v in enumerate((np.nan, np.inf, -np.inf, -0.0)):
        if flat.size > 4 * k + 3:
            flat[4 * k + 3] = v
    return x


@pytest.fixture(scope="module")
def exp_add_rowsum(backend):
    return load(EXP_ADD_ROWSUM, backend)


@pytest.mark.parametrize("m, n", SIZES)
def test_one_module_serves_every_size(exp_add_rowsum, m, n):
    rng = np.random.default_rng(m * 1000 + n)
    a, b = _special(rng, (m, n)), rng.standard_normal((m, n)).astype(np.float32)
    s, r = exp_add_rowsum["f"](a, b)
    want = np.exp(a + b)
    assert s.shape == (m, n) and r.shape == (m,)
    np.testing.assert_allclose(s.to_host(), want, rtol=2e-6, atol=0)
    np.testing.assert_allclose(r.to_host(), want.sum(1, dtype=np.float64), rtol=2e-5, atol=1e-5)


def test_sizes_in_any_order_and_again(exp_add_rowsum):
    """Sizes recorded for earlier calls are reused, not mixed up."""
    rng = np.random.default_rng(7)
    for m, n in [(7, 13), (2, 2), (7, 13), (64, 3), (2, 2)]:
        a, b = rng.standard_normal((m, n), np.float32), rng.standard_normal((m, n), np.float32)
        s, r = exp_add_rowsum["f"](a, b)
        np.testing.assert_allclose(s.to_host(), np.exp(a + b), rtol=2e-6)


def test_arguments_that_disagree_on_a_shared_dim(exp_add_rowsum):
    a = np.ones((5, 3), np.float32)
    with pytest.raises(rt.InvocationError, match="argument 1"):
        exp_add_rowsum["f"](a, np.ones((6, 3), np.float32))


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 13, 5), (64, 3, 129), (131, 67, 257), (0, 4, 3), (3, 0, 2),
                                     (1, 67, 257), (131, 300, 1)])
def test_matmul_with_every_dim_dynamic(backend, m, k, n):
    module = load(MATMUL, backend)
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    got = module["mm"](a, b).to_host()
    # an f32 sum of k products is off by about sqrt(k) roundings of its partial sums
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5 * max(k, 1) ** 0.5)


@pytest.mark.parametrize("m, k, n", [(3, 1024, 5), (5, 1026, 3), (2, 1027, 7), (129, 2048, 65),
                                     (1, 4096, 1)])
def test_matmul_with_a_long_run_time_k(backend, m, k, n):
    """On a GPU the product is split in K / 4 or K / 2 chunks where that divides the call's K
    (flow/split_reduction.py's ``_run_time_k``; 1027 runs whole), its chunks summed after:
    NaN, +-inf and -0 in any chunk reach the result as in one sum."""
    module = load(MATMUL, backend)
    rng = np.random.default_rng(m * k + n)
    a, b = _special(rng, (m, k)), rng.standard_normal((k, n)).astype(np.float32)
    a[-1, -1], a[0, k // 2] = np.inf, -0.0
    got = module["mm"](a, b).to_host()
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * k ** 0.5)


def test_expand_and_collapse_of_a_dynamic_dim(backend):
    module = load(RESHAPE, backend)
    for m in (0, 1, 9):
        a = np.arange(m * 4, dtype=np.float32).reshape(m, 4)
        assert np.array_equal(module["r"](a).to_host(), a.reshape(-1))


class _Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.softmax(self.linear(x).relu(), -1)


def test_torch_export_with_a_dynamic_batch(backend):
    torch.manual_seed(0)
    model = _Head().eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    mlir = import_torch(model, torch.randn(4, 16), dynamic_shapes={"x": {0: batch}})
    module = load(mlir, backend)
    for n in (1, 5, 17, 64):
        x = torch.randn(n, 16)
        with torch.no_grad():
            want = model(x)
        np.testing.assert_allclose(module["main"](x.numpy()).to_host(), want.numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_run_module_cli_takes_any_size(backend, tmp_path):
    target, device = backend
    path = tmp_path / "r.vmfb"
    path.write_bytes(compile_str(RESHAPE, CompileOptions(target_backends=[target])))
    for m in (2, 3):
        out = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module",
                              f"--module={path}", f"--device={device}", "--function=r",
                              f"--input={m}x4xf32=1"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert f"{4 * m}xf32=" + " ".join(["1"] * (4 * m)) in out.stdout


def test_targets_without_run_time_sizes_refuse_by_name(monkeypatch):
    """Every target compiles kernels sized at run time now (llvm-cpu, vulkan-spirv, cuda, rocm);
    one that did not would be refused by name before code generation, as cuda here."""
    import dataclasses

    from pyree.compiler import pipeline
    real = pipeline.backend
    monkeypatch.setattr(pipeline, "backend", lambda name: dataclasses.replace(
        real(name), run_time_sizes=name != "cuda"))
    with pytest.raises(CompileError, match=r"the cuda target cannot compile kernels sized at "
                       r"run time \(targets that can: llvm-cpu, rocm, vulkan-spirv\)"):
        compile_str(EXP_ADD_ROWSUM, CompileOptions(target_backends=["cuda"]))


class _SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3)))


def _check_torch(backend, model, example, dynamic_shapes, inputs, rtol=1e-4, atol=1e-5):
    mlir = import_torch(model, example, dynamic_shapes=dynamic_shapes)
    module = load(mlir, backend)
    for x in inputs:
        with torch.no_grad():
            want = model(x).numpy()
        got = module["main"](x.numpy()).to_host()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_cnn_with_a_dynamic_batch(backend):
    torch.manual_seed(1)
    model = _SmallCnn().eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    _check_torch(backend, model, torch.randn(2, 3, 17, 13), {"x": {0: batch}},
                 [torch.randn(n, 3, 17, 13) for n in (1, 3, 8)])


class _Rows(torch.nn.Module):
    """Row kernels over a run-time row (softmax's phases), a column sum, a transpose and a
    gather of run-time ids from a static table."""

    def forward(self, x, ids, table):
        return torch.softmax(x, -1), x.t().contiguous() * 2, x.sum(0), table[ids]


def test_rows_columns_transpose_and_gather_at_run_time_sizes(backend):
    rows, cols = (torch.export.Dim(name, min=1, max=4096) for name in ("rows", "cols"))
    n = torch.export.Dim("n", min=0, max=4096)  # no ids at all is a call too
    mlir = import_torch(_Rows(), torch.randn(4, 8), torch.tensor([1, 2, 0]), torch.randn(5, 3),
                        dynamic_shapes={"x": {0: rows, 1: cols}, "ids": {0: n}, "table": None})
    module = load(mlir, backend)
    rng = np.random.default_rng(3)
    for r, c, k in [(1, 1, 1), (7, 13, 5), (3, 1031, 257), (257, 3, 0)]:
        x, table = _special(rng, (r, c)), rng.standard_normal((5, 3)).astype(np.float32)
        ids = rng.integers(0, 5, k)
        got = module["main"](x, ids, table)
        want = _Rows()(torch.from_numpy(x), torch.from_numpy(ids), torch.from_numpy(table))
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g.to_host(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_layernorm_with_a_dynamic_batch(backend):
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(24, 24), torch.nn.LayerNorm(24)).eval()
    batch = torch.export.Dim("batch", min=1, max=4096)
    _check_torch(backend, model, torch.randn(3, 24), {"input": {0: batch}},
                 [torch.randn(n, 24) for n in (1, 13, 1031)])


class _Encoder(torch.nn.Module):
    """BERT-style: torch's TransformerEncoder (2 layers, d=64, 4 heads) with a key padding mask."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, src, padding):
        return self.encoder(src, src_key_padding_mask=padding)


@pytest.fixture(scope="module")
def encoder():
    """torch-mlir lowers a dynamic sequence to shape guards (``arith.cmpi``, ``arith.select``,
    ``cf.assert`` on sizes, ``affine.apply``, reshapes to sizes given as elements) and to
    bodies that compare a size with 1; the sequence's bounds come with it (util.assume.int)."""
    torch.manual_seed(3)
    model = _Encoder().eval()
    seq = torch.export.Dim("seq", min=1, max=512)
    mlir = import_torch(model, torch.randn(2, 8, 64), torch.zeros(2, 8, dtype=torch.bool),
                        dynamic_shapes={"src": {1: seq}, "padding": {1: seq}})
    return model, rt.load_module(compile_str(mlir, CPU), device="local-task")


@pytest.mark.parametrize("n", [1, 2, 13, 512])
def test_bert_style_encoder_with_a_dynamic_sequence(encoder, n):
    model, module = encoder
    torch.manual_seed(n)
    src = torch.randn(2, n, 64)
    padding = torch.zeros(2, n, dtype=torch.bool)
    padding[1, n // 2 + 1:] = True  # the second sequence is padded past its middle
    with torch.no_grad():
        want = model(src, padding).numpy()
    got = module["main"](src.numpy(), padding.numpy()).to_host()
    assert got.shape == want.shape == (2, n, 64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_encoder_holds_each_call_to_the_sequence_bounds(encoder):
    _, module = encoder
    x = np.ones((2, 513, 64), np.float32)
    with pytest.raises(rt.InvocationError, match=r"`s0` \(argument 0 dim 1\) is 513, past its "
                       r"bound 512"):
        module["main"](x, np.zeros((2, 513), bool))
    with pytest.raises(rt.InvocationError, match=r"`s0` \(argument 0 dim 1\) is 0, below its "
                       r"bound 1"):
        module["main"](x[:, :0], np.zeros((2, 0), bool))
    with pytest.raises(rt.InvocationError, match=r"argument 1 dim 1 is 7 but argument 0 dim 1 "
                       r"\(symbol `s0`\) is 5"):
        module["main"](x[:, :5], np.zeros((2, 7), bool))


class _Pick(torch.nn.Module):
    """What a decoder does with a dynamic sequence: rows picked at computed ids (index_select
    along the sequence: a gather from a binding with a run-time dim) and the last position
    (``x[:, -1]``: a slice whose offset is ``seq - 1``)."""

    def forward(self, x, ids):
        return x.index_select(1, ids) * 2, x[:, -1] + 1


@pytest.fixture(scope="module")
def pick(backend):
    seq = torch.export.Dim("seq", min=1, max=512)
    mlir = import_torch(_Pick(), torch.randn(2, 8, 4), torch.tensor([0, 3, 5, 7]),
                        dynamic_shapes={"x": {1: seq}, "ids": None})
    return load(mlir, backend)


@pytest.mark.parametrize("n", [1, 2, 8, 37])
def test_index_select_and_last_position_of_a_dynamic_sequence(pick, n):
    x = _special(np.random.default_rng(n), (2, n, 4))
    ids = np.array([n - 1, 0, n // 2, n - 1])
    with torch.no_grad():
        want = _Pick()(torch.from_numpy(x), torch.from_numpy(ids))
    got = pick["main"](x, ids)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.to_host(), w.numpy())


LAST_ROW_OF_A_TABLE = """
func.func @f(%x: tensor<?xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = arith.constant dense<[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]>
      : tensor<3x4xf32>
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %m = arith.subi %n, %c1 : index
  %s = tensor.extract_slice %t[%m, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %r = arith.mulf %s, %s : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_a_constant_sliced_at_a_run_time_offset_and_past_its_end(backend):
    """Row ``n - 1`` of a constant table: nothing folds it at compile time (its offset is a
    run-time size), and an ``n`` past the table is an InvocationError before anything runs,
    on every target (a shader that finds an access out of range only skips its work)."""
    module = load(LAST_ROW_OF_A_TABLE, backend)
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    for n in (1, 2, 3):
        np.testing.assert_array_equal(module["f"](np.zeros(n, np.float32)).to_host(),
                                      table[n - 1] ** 2)
    for n in (4, 9):
        with pytest.raises(rt.InvocationError, match=r"tensor.extract_slice reads past its "
                                                     r"source: offset -1 \+ s0, size 1"):
            module["f"](np.zeros(n, np.float32))


def test_onnx_symbolic_batch(backend):
    """An ONNX graph whose batch is a ``dim_param`` imports as ``?`` and serves every batch."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from pyree.compiler import import_onnx

    w = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"]),
         helper.make_node("Softmax", ["z"], ["out"], axis=-1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    module = load(import_onnx(model), backend)
    for n in (1, 5, 33):
        x = _special(np.random.default_rng(n), (n, 16))
        y = np.maximum(x.astype(np.float64) @ w, 0)
        e = np.exp(y - y.max(-1, keepdims=True))
        got = module["g"](x).to_host()
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


SHORTER = """
func.func @drop_last(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %m = arith.subi %n, %c1 : index
  %s = tensor.extract_slice %a[1] [%m] [1] : tensor<?xf32> to tensor<?xf32>
  %e = tensor.empty(%m) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%s : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


PLANE = """
func.func @plane(%a: tensor<3x?x5xf32>) -> tensor<?x5xf32> {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %a, %c1 : tensor<3x?x5xf32>
  %s = tensor.extract_slice %a[1, 0, 0] [1, %n, 5] [1, 1, 1] : tensor<3x?x5xf32> to tensor<?x5xf32>
  %e = tensor.empty(%n) : tensor<?x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]} ins(%s : tensor<?x5xf32>) outs(%e : tensor<?x5xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<?x5xf32>
  return %r : tensor<?x5xf32>
}
"""


def test_a_rank_reducing_slice_of_a_run_time_plane(backend):
    """``[1, n, 5]`` into ``?x5`` drops the unit dim, not the ``?`` (torch's packed q, k, v with
    a run-time length is sliced this way; the unit size used to take the ``?``). On Vulkan the
    plane's binding starts at byte 20 n, below the device's offset alignment for odd n: the
    driver stages it (hal-vulkan's command_buffer.py)."""
    module = load(PLANE, backend)
    for n in (1, 2, 7):
        a = _special(np.random.default_rng(n), (3, n, 5))
        np.testing.assert_array_equal(module["plane"](a).to_host(), a[1] + a[1])


def test_a_size_computed_by_subtraction(backend):
    """A size with a negative term (n - 1) is written so that the runtime's programs hold only
    sizes; a size that would be negative is an InvocationError, not a wrong buffer. (The
    slice's binding starts at byte 4: Vulkan's driver stages it.)"""
    module = load(SHORTER, backend)
    for n in (1, 2, 9, 130):
        a = _special(np.random.default_rng(n), (n,))
        np.testing.assert_array_equal(module["drop_last"](a).to_host(), a[1:] * a[1:])
    with pytest.raises(rt.InvocationError, match="negative"):
        module["drop_last"](np.zeros(0, np.float32))


def test_a_size_divided_by_a_constant_below_one_is_refused():
    text = SHORTER.replace("%m = arith.subi %n, %c1 : index",
                           "%cm2 = arith.constant -2 : index\n  %m = arith.divsi %n, %cm2 : index")
    with pytest.raises(CompileError, match=r"<string>:\d+:\d+: error: 'arith.divsi' of a run-time"):
        compile_str(text, CPU)
