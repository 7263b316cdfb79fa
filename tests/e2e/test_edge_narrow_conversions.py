"""Float to 8- and 16-bit integer conversions of values the narrow type cannot hold, on every
target alike: a signed 32-bit conversion (toward zero), then its low bits, as LLVM lowers
them for llvm-cpu, cuda and rocm. arith leaves such a conversion undefined, but torch-mlir's
lowerings rely on it: ONNX's DynamicQuantizeLinear computes its uint8 zero point as
``fptosi<i8>`` of a value in [0, 255], whose bits are right only so; NVIDIA's Vulkan driver
saturated ``OpConvertFToS`` to 127 (zero point 153 came out 127, every quantized value 26
off) until the vulkan-spirv target converted through 32 bits too."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

PROGRAM = """
#m = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<17xf32>) -> (tensor<17xi8>, tensor<17xi8>, tensor<17xi16>, tensor<17xi16>) {
  %e8 = tensor.empty() : tensor<17xi8>
  %e16 = tensor.empty() : tensor<17xi16>
  %r:4 = linalg.generic {indexing_maps = [#m, #m, #m, #m, #m], iterator_types = ["parallel"]}
      ins(%a : tensor<17xf32>) outs(%e8, %e8, %e16, %e16 : tensor<17xi8>, tensor<17xi8>, tensor<17xi16>, tensor<17xi16>) {
  ^bb0(%x: f32, %o0: i8, %o1: i8, %o2: i16, %o3: i16):
    %s8 = arith.fptosi %x : f32 to i8
    %u8 = arith.fptoui %x : f32 to i8
    %s16 = arith.fptosi %x : f32 to i16
    %u16 = arith.fptoui %x : f32 to i16
    linalg.yield %s8, %u8, %s16, %u16 : i8, i8, i16, i16
  } -> (tensor<17xi8>, tensor<17xi8>, tensor<17xi16>, tensor<17xi16>)
  return %r#0, %r#1, %r#2, %r#3 : tensor<17xi8>, tensor<17xi8>, tensor<17xi16>, tensor<17xi16>
}
"""
VALUES = [-70000.5, -300.7, -129.0, -128.5, -1.5, -0.0, 0.4, 127.9, 128.0, 153.0, 255.0, 255.9,
          256.0, 300.2, 32768.0, 65535.0, 70000.0]


@pytest.mark.parametrize("backend, device", [
    ("llvm-cpu", "local-task"),
    pytest.param("vulkan-spirv", "vulkan", marks=pytest.mark.vulkan),
    pytest.param("cuda", "cuda", marks=pytest.mark.cuda),
])
def test_out_of_range_values_keep_the_low_bits_of_a_32_bit_conversion(backend, device):
    module = rt.load_module(compile_str(PROGRAM, CompileOptions(target_backends=[backend])),
                            device=device)
    x = np.array(VALUES, np.float32)
    wide = np.trunc(x).astype(np.int32)
    got = [r.to_host() for r in module["f"](x)]
    for r, dtype in zip(got, (np.int8, np.int8, np.int16, np.int16)):
        np.testing.assert_array_equal(r, wide.astype(dtype))
