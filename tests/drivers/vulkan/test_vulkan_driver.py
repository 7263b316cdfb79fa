"""The vulkan driver end to end: compile for vulkan-spirv, run on the ``vulkan`` device (Mesa's
lavapipe in CI, NVIDIA's driver on a GPU host), compare with numpy on fresh random inputs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numerics_cases as C
import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import spirv_binaries, vulkan_vmfb
from pyree.runtime.errors import DriverError

pytestmark = pytest.mark.vulkan
OPS = sorted((Path(__file__).resolve().parents[2] / "e2e" / "ops").glob("*.mlir"))


@pytest.mark.parametrize("name", sorted(C.CASES))
def test_numerics_match_numpy(vulkan_device, name):
    case = C.CASES[name]()
    module = rt.load_module(vulkan_vmfb(case.mlir), device=vulkan_device)
    inputs = case.inputs(np.random.default_rng())
    C.check(case, C.results(module[case.function](*inputs)), inputs)


def test_recorded_command_buffers_are_resubmitted_with_each_calls_data(vulkan_device):
    case = C.fused_chain((37, 53))
    module = rt.load_module(vulkan_vmfb(case.mlir), device=vulkan_device)
    rng = np.random.default_rng()
    for _ in range(5):  # same shapes, so the same pooled buffers and recording each call
        inputs = case.inputs(rng)
        C.check(case, C.results(module[case.function](*inputs)), inputs)


def test_results_chain_on_the_device_without_host_copies(vulkan_device):
    ty = C.t((37, 53))
    mlir = f"""
    func.func @f(%a: {ty}, %b: {ty}) -> {ty} {{
      %r = arith.mulf %a, %b : {ty}
      return %r : {ty}
    }}"""
    module = rt.load_module(vulkan_vmfb(mlir), device=vulkan_device)
    rng = np.random.default_rng()
    a, b = C.rand(rng, (37, 53)), C.rand(rng, (37, 53))
    da = rt.asdevicearray(module.device, a)
    once = module["f"](da, rt.asdevicearray(module.device, b))
    twice = module["f"](once, da)
    np.testing.assert_allclose(twice.to_host(), a * b * a, rtol=1e-6)


MISALIGNED = """
func.func @f(%x: tensor<40xf32>, %y: tensor<5xf32>) -> (tensor<39xf32>, tensor<8xf32>) {
  %tail = tensor.extract_slice %x[1] [39] [1] : tensor<40xf32> to tensor<39xf32>
  %e = tensor.empty() : tensor<39xf32>
  %twice = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%tail : tensor<39xf32>) outs(%e : tensor<39xf32>) {
  ^bb0(%v: f32, %o: f32):
    %w = arith.addf %v, %v : f32
    linalg.yield %w : f32
  } -> tensor<39xf32>
  %head = tensor.extract_slice %x[0] [3] [1] : tensor<40xf32> to tensor<3xf32>
  %e5 = tensor.empty() : tensor<5xf32>
  %neg = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%y : tensor<5xf32>) outs(%e5 : tensor<5xf32>) {
  ^bb0(%v: f32, %o: f32):
    %w = arith.negf %v : f32
    linalg.yield %w : f32
  } -> tensor<5xf32>
  %joined = tensor.concat dim(0) %head, %neg : (tensor<3xf32>, tensor<5xf32>) -> tensor<8xf32>
  return %twice, %joined : tensor<39xf32>, tensor<8xf32>
}
"""


@pytest.mark.parametrize("mode", ["mapped", "device"])
def test_bindings_below_the_offset_alignment_are_staged(vulkan_device, mode):
    """A kernel reading ``x[1:]`` (its binding at byte 4) and a concatenation writing after 3
    elements (byte 12): Vulkan binds storage buffers only at multiples of
    minStorageBufferOffsetAlignment (16 on lavapipe and NVIDIA), so the driver copies such a
    range into a buffer of its own, binds that, and copies it back; numpy's answer, call after
    call, with arguments host-mapped or in device memory."""
    module = rt.load_module(vulkan_vmfb(MISALIGNED), device=vulkan_device)
    rng = np.random.default_rng()
    for _ in range(3):
        x, y = C.rand(rng, (40,)), C.rand(rng, (5,))
        x[7], y[2] = np.nan, -np.inf
        args = (x, y) if mode == "mapped" else tuple(rt.asdevicearray(module.device, a) for a in (x, y))
        twice, joined = module["f"](*args)
        np.testing.assert_array_equal(twice.to_host(), x[1:] + x[1:])
        np.testing.assert_array_equal(joined.to_host(), np.concatenate([x[:3], -y]))


@pytest.mark.parametrize("shape", [(37, 53), (129, 65)])  # 7.8 KB mapped; 33.5 KB device-local
def test_small_io_is_mapped_and_large_io_is_copied(vulkan_device, shape):
    """Arguments and results of at most 16 KiB live in host-visible mapped buffers (ABI revision
    1), larger ones in device-local memory; both give numpy's answer call after call."""
    case = C.add(shape)
    module = rt.load_module(vulkan_vmfb(case.mlir), device=vulkan_device)
    assert module.device.maps_memory
    rng = np.random.default_rng()
    for _ in range(3):
        inputs = case.inputs(rng)
        out = module[case.function](*inputs)
        C.check(case, C.results(out), inputs)
    small = np.prod(shape) * 4 <= 16 << 10
    assert (out.buffer.host is not None) == small


@pytest.mark.parametrize("triple, case", [
    ("cpu-swiftshader-unknown", C.matmul(70, 33, 41)),
    ("ampere-rtx3080-windows", C.matmul(517, 45, 530)),        # 128x128 tiles, 256 invocations
    ("turing-t4-linux", C.matmul(67, 129, 45, "f16", np.float16)),  # float16 arithmetic (SIMT:
    # ampere's f16 products take cooperative matrices, which lavapipe lacks)
    ("ampere-rtx3080-windows", C.reductions((5, 1001), 1)),
], ids=["swiftshader-matmul", "ampere-matmul-128-tiles", "turing-matmul-f16", "ampere-reduce"])
def test_modules_for_other_triples_run_where_the_device_allows(vulkan_device, triple, case):
    module = rt.load_module(vulkan_vmfb(case.mlir, triple), device=vulkan_device)
    inputs = case.inputs(np.random.default_rng())
    C.check(case, C.results(module[case.function](*inputs)), inputs)


def test_devices_are_listed_by_uuid_and_selectable(vulkan_device):
    out = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module", "--list_devices"],
                         capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("vulkan://")]
    assert lines, out
    uuid = lines[0].split()[0][len("vulkan://"):]
    assert len(uuid) == 36 and uuid.count("-") == 4, out
    case = C.add((7,))
    vmfb = vulkan_vmfb(case.mlir)
    for device in (f"vulkan://{uuid}", "vulkan://0"):
        module = rt.load_module(vmfb, device=device)
        inputs = case.inputs(np.random.default_rng())
        C.check(case, C.results(module[case.function](*inputs)), inputs)


def test_an_unknown_device_names_the_devices_there_are(vulkan_device):
    with pytest.raises(Exception, match=r"no Vulkan device 'vulkan://GPU-nope'; devices: vulkan://"):
        rt.load_module(vulkan_vmfb(C.add((7,)).mlir), device="vulkan://GPU-nope")


@pytest.mark.parametrize("source", OPS, ids=[p.stem for p in OPS])
def test_op_check_files_pass(vulkan_device, source, tmp_path):
    vmfb = tmp_path / "m.vmfb"
    for command in (["pyree.compiler.tools.compile", str(source), "-o", str(vmfb),
                     "--pyree-hal-target-backends=vulkan-spirv"],
                    ["pyree.runtime.tools.check_module", "--device=vulkan", f"--module={vmfb}"]):
        proc = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[  FAILED  ]" not in proc.stdout and "PASSED" in proc.stdout


def test_no_vulkan_driver_shows_vulkan_unavailable_with_the_reason(vulkan_package, tmp_path):
    empty = tmp_path / "icd.d"
    empty.mkdir()
    env = dict(os.environ, VK_DRIVER_FILES=str(empty / "none.json"),
               VK_ICD_FILENAMES=str(empty / "none.json"))
    code = ("import pyree.runtime as rt\n"
            "[d] = [d for d in rt.list_drivers() if d.name == 'vulkan']\n"
            "print(d.available, d.reason)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("False") and "VK_ERROR_INCOMPATIBLE_DRIVER" in proc.stdout, proc.stdout


# a stand-in GPU's limits (physical_device.query reads these from the driver)
GPU_LIMITS = {"maxComputeWorkGroupInvocations": 1024, "maxComputeSharedMemorySize": 49152,
              "maxComputeWorkGroupCount": (65535,) * 3, "maxComputeWorkGroupSize": (1024, 1024, 64),
              "maxPerStageDescriptorStorageBuffers": 1 << 20, "maxDescriptorSetStorageBuffers": 1 << 20,
              "maxPerStageResources": 1 << 20}


def test_modules_needing_features_the_device_lacks_are_refused_by_name(vulkan_package):
    from pyree.hal.vulkan.executable import ExecutableCache
    from pyree.hal.vulkan.physical_device import PhysicalDevice
    from pyree.runtime.hal.python_driver import ExecutableParams, Export, HalError
    case = C.matmul(67, 129, 45, "f16", np.float16)
    ((code, executable),) = spirv_binaries(vulkan_vmfb(case.mlir, "turing-t4-linux"))
    limits = GPU_LIMITS
    gpu = PhysicalDevice(None, "Old GPU", "0" * 36, 1 << 22 | 2 << 12, 0, limits,
                         {"storageBuffer16BitAccess": True, "shaderFloat16": False})
    exports = tuple(Export(e.name.decode(), tuple(map(int, e.gridSize)), tuple(map(int, e.blockSize)),
                           e.sharedMemoryBytes, tuple(b.minLength for b in e.bindings))
                    for e in executable.exports)
    params = ExecutableParams("spirv", "turing-t4-linux", code, "", b"", exports)
    with pytest.raises(HalError, match="needs shaderFloat16, which Old GPU lacks; compile it with "
                                       "a --pyree-vulkan-target that matches this GPU"):
        ExecutableCache(None, None, gpu).load(params)
    small = PhysicalDevice(None, "Small GPU", "0" * 36, 1 << 22 | 2 << 12, 0,
                           dict(limits, maxComputeWorkGroupInvocations=64),
                           {"storageBuffer16BitAccess": True, "shaderFloat16": True})
    with pytest.raises(HalError, match=r"cannot run on Small GPU: workgroup size \(256, 1, 1\) "
                                       "exceeds the device's 64 invocations"):
        ExecutableCache(None, None, small).load(params)
    few = PhysicalDevice(None, "Few-buffer GPU", "0" * 36, 1 << 22 | 2 << 12, 0,
                         dict(limits, maxPerStageDescriptorStorageBuffers=2),
                         {"storageBuffer16BitAccess": True, "shaderFloat16": True})
    with pytest.raises(HalError, match="cannot run on Few-buffer GPU: 3 buffer bindings exceed "
                                       "the device's 2 storage buffers a shader"):
        ExecutableCache(None, None, few).load(params)


def test_a_kernel_with_more_buffers_than_the_device_binds_is_refused(vulkan_device):
    """Past lavapipe's 32 storage buffers a shader, a pipeline answered zeros (33 bindings) or
    crashed the process (34): the load refuses it, naming the kernel and the limit; a device
    that binds that many runs it right."""
    n = 40  # one argument and 40 results: 41 bindings
    body = "\n".join(f"    %r{k} = arith.addi %x, %x : i32" for k in range(n))
    types = ", ".join(["tensor<8xi32>"] * n)
    mlir = f"""
#m = affine_map<(d0) -> (d0)>
func.func @f(%a: tensor<8xi32>) -> ({types}) {{
  %e = tensor.empty() : tensor<8xi32>
  %r:{n} = linalg.generic {{indexing_maps = [#m{", #m" * n}], iterator_types = ["parallel"]}}
      ins(%a : tensor<8xi32>) outs({", ".join(["%e"] * n)} : {types}) {{
  ^bb0(%x: i32, {", ".join(f"%o{k}: i32" for k in range(n))}):
{body}
    linalg.yield {", ".join(f"%r{k}" for k in range(n))} : {", ".join(["i32"] * n)}
  }} -> ({types})
  return {", ".join(f"%r#{k}" for k in range(n))} : {types}
}}"""
    try:  # a device that binds 41 (NVIDIA's: 2^20) runs it
        module = rt.load_module(vulkan_vmfb(mlir), device="vulkan")
    except rt.DriverError as e:
        assert re.search("kernel 'k0_f_dispatch_0_generic_8_i32' cannot run on .*: 41 buffer "
                         "bindings exceed the device's [0-9]+ storage buffers", str(e)), str(e)
        return
    x = np.arange(8, dtype=np.int32)
    for r in module["f"](x):
        np.testing.assert_array_equal(r.to_host(), 2 * x)


def test_cooperative_matrix_shapes_the_device_does_not_list_are_refused(vulkan_package):
    """The shapes come from the module's OpTypeCooperativeMatrixKHR declarations; a module without
    them (no capability, no such instruction) declares none."""
    from pyree.hal.vulkan.executable import ExecutableCache, cooperative_operands
    from pyree.hal.vulkan.physical_device import PhysicalDevice
    from pyree.runtime.hal.python_driver import ExecutableParams, Export, HalError
    case = C.matmul(128, 48, 192, "f16", np.float16)
    ((code, executable),) = spirv_binaries(vulkan_vmfb(case.mlir, "hopper-h100-linux"))
    assert cooperative_operands(code) == {("A", 16, 16, "f16"), ("B", 16, 16, "f16")}
    ((plain, _),) = spirv_binaries(vulkan_vmfb(case.mlir))
    assert cooperative_operands(plain) == set()
    limits = GPU_LIMITS
    features = dict.fromkeys(("storageBuffer16BitAccess", "shaderFloat16", "vulkanMemoryModel",
                              "cooperativeMatrix"), True)
    gpu = PhysicalDevice(None, "8x8 GPU", "0" * 36, 1 << 22 | 2 << 12, 0, limits, features,
                         frozenset({(8, 8, 8, "f16", "f16", "f16")}))
    exports = tuple(Export(e.name.decode(), tuple(map(int, e.gridSize)), tuple(map(int, e.blockSize)),
                           e.sharedMemoryBytes, tuple(b.minLength for b in e.bindings))
                    for e in executable.exports)
    params = ExecutableParams("spirv", "hopper-h100-linux", code, "", b"", exports)
    with pytest.raises(HalError, match=r"multiplies cooperative matrices of shape A 16x16 f16, "
                                       r"B 16x16 f16, which 8x8 GPU does not list"):
        ExecutableCache(None, None, gpu).load(params)


def test_bf16_cooperative_matrices_need_the_devices_bf16_feature_and_fragments(vulkan_package):
    """A hopper module's bf16 products declare bf16 fragments (SPV_KHR_bfloat16's float type);
    a device without VK_KHR_shader_bfloat16's features, or without bf16 fragments, refuses it
    by name."""
    from pyree.hal.vulkan.executable import ExecutableCache, cooperative_operands
    from pyree.hal.vulkan.physical_device import PhysicalDevice
    from pyree.runtime.hal.python_driver import ExecutableParams, Export, HalError
    ((code, executable),) = spirv_binaries(vulkan_vmfb(C.matmul(64, 48, 80, "bf16").mlir,
                                                       "hopper-h100-linux"))
    assert cooperative_operands(code) == {("A", 16, 16, "bf16"), ("B", 16, 16, "bf16")}
    exports = tuple(Export(e.name.decode(), tuple(map(int, e.gridSize)), tuple(map(int, e.blockSize)),
                           e.sharedMemoryBytes, tuple(b.minLength for b in e.bindings))
                    for e in executable.exports)
    params = ExecutableParams("spirv", "hopper-h100-linux", code, "", b"", exports)
    features = dict.fromkeys(("storageBuffer16BitAccess", "shaderFloat16", "vulkanMemoryModel",
                              "cooperativeMatrix"), True)
    f16_only = frozenset({(16, 16, 16, "f16", "f16", "f32")})
    no_bf16 = PhysicalDevice(None, "f16 GPU", "0" * 36, 1 << 22 | 2 << 12, 0, GPU_LIMITS, features,
                             f16_only)
    with pytest.raises(HalError, match="needs shaderBFloat16CooperativeMatrix, "
                                       "shaderBFloat16Type, which f16 GPU lacks"):
        ExecutableCache(None, None, no_bf16).load(params)
    bf16_features = dict(features, shaderBFloat16Type=True, shaderBFloat16CooperativeMatrix=True)
    unlisted = PhysicalDevice(None, "f16-fragment GPU", "0" * 36, 1 << 22 | 2 << 12, 0,
                              GPU_LIMITS, bf16_features, f16_only)
    with pytest.raises(HalError, match=r"multiplies cooperative matrices of shape A 16x16 bf16, "
                                       r"B 16x16 bf16, which f16-fragment GPU does not list"):
        ExecutableCache(None, None, unlisted).load(params)


@pytest.mark.parametrize("result, text", [
    (-2, "allocating failed: VK_ERROR_OUT_OF_DEVICE_MEMORY (the GPU is out of memory)"),
    (-4, "allocating failed: VK_ERROR_DEVICE_LOST (the device was lost"),
])
def test_vulkan_errors_become_clear_messages(vulkan_package, result, text):
    from pyree.hal.vulkan.symbols import VulkanError, check
    with pytest.raises(VulkanError) as e:
        check(result, "allocating")
    assert e.value.message.startswith(text)


def test_out_of_device_memory_is_a_clear_error(vulkan_device):
    from pyree.hal.vulkan.instance import VulkanDriver
    from pyree.runtime.hal.python_driver import HalError
    device = VulkanDriver().create_device("")
    try:
        size = 1 << 39  # more than any GPU has, less than NVIDIA's maxBufferSize
        with pytest.raises(HalError, match=rf"(creating a {size}-byte buffer|allocating {size} bytes) "
                                           r"on .* failed: VK_ERROR_OUT_OF_DEVICE_MEMORY \(the GPU "
                                           r"is out of memory\)"):
            device.allocate(size)
        assert device.allocate(1000).size == 1000  # the device still works
    finally:
        device.release()




def test_cooperative_matrix_matmul_runs_or_is_refused_by_name(vulkan_device):
    """On a GPU with VK_KHR_cooperative_matrix the tensor-core matmul matches numpy; elsewhere
    (lavapipe) loading it fails with the missing feature named."""
    case = C.CASES["matmul_f16_128x48x192"]()
    try:
        module = rt.load_module(vulkan_vmfb(case.mlir, "hopper-h100-linux"), device=vulkan_device)
    except DriverError as e:
        assert "cooperativeMatrix" in str(e) and "hopper-h100-linux" in str(e)
        return
    inputs = case.inputs(np.random.default_rng())
    C.check(case, C.results(module[case.function](*inputs)), inputs)
