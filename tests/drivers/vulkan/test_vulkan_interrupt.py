"""Ctrl-C in pyree-benchmark-module on a Vulkan device: the driver's callbacks hand the interrupt
back to the runtime (exit 130, "error: interrupted" alone)."""

from interrupting import assert_benchmark_interrupted, interrupt_benchmark

MATMUL = """
func.func @mm(%a: tensor<129x67xf32>, %b: tensor<67x131xf32>) -> tensor<129x131xf32> {
  %e = tensor.empty() : tensor<129x131xf32>
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<129x131xf32>) -> tensor<129x131xf32>
  %r = linalg.matmul ins(%a, %b : tensor<129x67xf32>, tensor<67x131xf32>)
                     outs(%f : tensor<129x131xf32>) -> tensor<129x131xf32>
  return %r : tensor<129x131xf32>
}
"""


def test_benchmark_module(vulkan_device, tmp_path):
    from pyree.compiler import compile_str

    module = tmp_path / "mm.vmfb"
    compile_str(MATMUL, target_backends=["vulkan-spirv"], output_file=module)
    assert_benchmark_interrupted(interrupt_benchmark(str(module), vulkan_device, "mm",
                                                     "129x67xf32=0.5", "67x131xf32=2"))
