"""What the Vulkan device offers the cooperative-matrix template: its extensions that name
cooperative matrices or bfloat16, and every (M, N, K, A, B, C, result, scope) that
vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR lists (component types as Vulkan numbers them:
0 f16, 1 f32, 3 s8, 1000141000 bf16, ...).

    python3 bench/vulkan/coopmat_probe.py   (GPU host, after tests/drivers/vulkan/device_setup.sh)
"""

from __future__ import annotations

from pyree.hal.vulkan import physical_device as P
from pyree.hal.vulkan._ffi import ffi
from pyree.hal.vulkan.instance import VulkanDriver


def main() -> None:
    driver = VulkanDriver()
    for device in driver._physical_devices():
        vki, handle = driver.vki, device.handle
        print(device.name)
        names = sorted(e.decode() for e in P.device_extensions(vki, handle))
        print([n for n in names if "cooperative" in n or "bfloat16" in n or "float8" in n])
        count = ffi.new("uint32_t *")
        query = vki.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR
        if query is None:
            print("no vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
            continue
        query(handle, count, ffi.NULL)
        props = ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
        for i in range(count[0]):
            props[i].sType = P.STYPE_COOPMAT_PROPERTIES
        query(handle, count, props)
        for i in range(count[0]):
            p = props[i]
            print(p.MSize, p.NSize, p.KSize, p.AType, p.BType, p.CType, p.ResultType, p.scope)


if __name__ == "__main__":
    main()
