"""On an NVIDIA GPU: Ctrl-C in pyree-benchmark-module on cuda, in each command-buffer mode: the
driver's callbacks hand the interrupt back to the runtime (exit 130, "error: interrupted" alone,
within a couple of seconds)."""

import pytest
from interrupting import assert_benchmark_interrupted, interrupt_benchmark

pytestmark = pytest.mark.cuda

MATMUL = """
func.func @mm(%a: tensor<513x259xf32>, %b: tensor<259x515xf32>) -> tensor<513x515xf32> {
  %e = tensor.empty() : tensor<513x515xf32>
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<513x515xf32>) -> tensor<513x515xf32>
  %r = linalg.matmul ins(%a, %b : tensor<513x259xf32>, tensor<259x515xf32>)
                     outs(%f : tensor<513x515xf32>) -> tensor<513x515xf32>
  return %r : tensor<513x515xf32>
}
"""


@pytest.mark.parametrize("mode", ["direct", "stream", "graph"])
def test_benchmark_module(mode, tmp_path):
    from pyree.compiler import CompileOptions, compile_str

    module = tmp_path / "mm.vmfb"
    compile_str(MATMUL, CompileOptions(target_backends=["cuda"], cuda_target="sm_90"),
                output_file=module)
    assert_benchmark_interrupted(interrupt_benchmark(
        str(module), f"cuda://0?command_buffer={mode}", "mm", "513x259xf32=0.5", "259x515xf32=2"))
