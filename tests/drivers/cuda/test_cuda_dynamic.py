"""On an NVIDIA GPU: the dynamic-shape cases of tests/e2e/test_dynamic_shapes.py (elementwise and
row sums, matmul, reshape, a size computed by subtraction, softmax and layernorm, a torch MLP and
CNN and an ONNX graph with a dynamic batch), each module compiled for cuda and called at sizes 0,
1, primes and large, with NaN/inf/-0 inputs, in the three command-buffer modes; graph mode records
its launches once and must stay right when the sizes change between calls. The cases are the
e2e file's own, collected here with this file's ``load``."""

from __future__ import annotations

import pyree.runtime as rt
import pytest
from e2e.test_dynamic_shapes import (  # noqa: F401 - collected here, run with this file's load
    exp_add_rowsum,
    test_a_size_computed_by_subtraction,
    test_arguments_that_disagree_on_a_shared_dim,
    test_cnn_with_a_dynamic_batch,
    test_expand_and_collapse_of_a_dynamic_dim,
    test_layernorm_with_a_dynamic_batch,
    test_matmul_with_every_dim_dynamic,
    test_one_module_serves_every_size,
    test_onnx_symbolic_batch,
    test_sizes_in_any_order_and_again,
    test_torch_export_with_a_dynamic_batch,
)
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.cuda
MODES = ("direct", "stream", "graph")
CUDA = CompileOptions(target_backends=["cuda"], cuda_target="sm_90")


@pytest.fixture(scope="module", params=MODES)
def load(request):
    """MLIR text -> the module compiled for cuda, loaded in this command-buffer mode."""
    device = f"cuda://0?command_buffer={request.param}"
    return lambda mlir: rt.load_module(compile_str(mlir, CUDA), device=device)
