"""The ``vulkan`` driver: one VkInstance (Vulkan 1.2), its physical devices as pyree devices.
(Not named driver.py: importing such a submodule would replace the package's ``driver`` entry
point function with the module.)

Device URIs: ``vulkan`` (the first usable device), ``vulkan://<index>``, ``vulkan://<uuid>``,
each with an optional ``?pipeline_cache=off|<directory>`` (pipeline_cache.py).
No loader, no driver (ICD) or no Vulkan 1.2 device: the driver reports UNAVAILABLE with why.
"""

from __future__ import annotations

from pyree.hal.vulkan import physical_device as P
from pyree.hal.vulkan import pipeline_cache
from pyree.hal.vulkan.symbols import check, ffi, global_functions, instance_functions
from pyree.runtime.hal.python_driver import DeviceInfo, HalError, PythonDriver

STYPE_APPLICATION_INFO, STYPE_INSTANCE_CREATE_INFO = 0, 1


class VulkanDriver(PythonDriver):
    name = "vulkan"

    def __init__(self):
        self._instance = None
        self._devices: list[P.PhysicalDevice] | None = None

    def _physical_devices(self) -> list[P.PhysicalDevice]:
        if self._devices is not None:
            return self._devices
        vkg = global_functions()
        version = ffi.new("uint32_t *")
        check(vkg.vkEnumerateInstanceVersion(version), "vkEnumerateInstanceVersion")
        if version[0] < P.API_1_2:
            raise HalError("UNAVAILABLE", f"the Vulkan loader supports Vulkan "
                                          f"{P.version_text(version[0])}; pyree needs 1.2")
        app_name = ffi.new("char[]", b"pyree")
        app = ffi.new("VkApplicationInfo *", {"sType": STYPE_APPLICATION_INFO,
                                              "pApplicationName": app_name,
                                              "pEngineName": app_name,
                                              "apiVersion": P.API_1_2})
        info = ffi.new("VkInstanceCreateInfo *", {"sType": STYPE_INSTANCE_CREATE_INFO,
                                                  "pApplicationInfo": app})
        instance = ffi.new("VkInstance *")
        check(vkg.vkCreateInstance(info, ffi.NULL, instance), "vkCreateInstance")
        self._instance = instance[0]
        self.vki = instance_functions(self._instance)
        count = ffi.new("uint32_t *")
        check(self.vki.vkEnumeratePhysicalDevices(self._instance, count, ffi.NULL),
              "vkEnumeratePhysicalDevices")
        handles = ffi.new("VkPhysicalDevice[]", count[0])
        check(self.vki.vkEnumeratePhysicalDevices(self._instance, count, handles),
              "vkEnumeratePhysicalDevices")
        self._devices = [P.query(self.vki, handles[i]) for i in range(count[0])]
        return self._devices

    def _usable(self) -> list[P.PhysicalDevice]:
        devices = self._physical_devices()
        usable = [d for d in devices if not d.unusable_reason()]
        if not usable:
            why = "; ".join(d.unusable_reason() for d in devices) or "no Vulkan device was found"
            raise HalError("UNAVAILABLE", f"no usable Vulkan 1.2 device: {why}")
        return usable

    def query_available(self) -> None:
        self._usable()

    def enumerate_devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(d.uuid, d.name) for d in self._usable()]

    def create_device(self, path: str):
        from pyree.hal.vulkan.device import VulkanDevice
        selector, cache = parse_device_path(path)
        usable = self._usable()
        if selector == "":
            return VulkanDevice(self.vki, usable[0], cache)
        if selector.isdigit() and int(selector) < len(usable):
            return VulkanDevice(self.vki, usable[int(selector)], cache)
        for d in usable:
            if d.uuid == selector.lower():
                return VulkanDevice(self.vki, d, cache)
        known = ", ".join(f"vulkan://{d.uuid} ({d.name})" for d in usable)
        raise HalError("NOT_FOUND", f"no Vulkan device 'vulkan://{selector}'; devices: {known} "
                                    f"(or vulkan://0..{len(usable) - 1})")


def parse_device_path(path: str) -> tuple[str, str | None]:
    """``"0?pipeline_cache=off"`` -> ("0", None): the device and its pipeline-cache directory
    (pipeline_cache.directory: the URI's setting, else $PYREE_VULKAN_PIPELINE_CACHE's, else the
    default; None: off)."""
    selector, _, query = path.partition("?")
    setting = None
    if query:
        from urllib.parse import parse_qs
        params = parse_qs(query, keep_blank_values=True)
        unknown = set(params) - {"pipeline_cache"}
        if unknown:
            raise HalError("INVALID_ARGUMENT", f"unknown vulkan device parameter(s) "
                                               f"{sorted(unknown)}; accepted: "
                                               "pipeline_cache=off|<directory>")
        setting = params["pipeline_cache"][-1]
    return selector, pipeline_cache.directory(setting)
