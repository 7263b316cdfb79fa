"""What the driver learns about a VkPhysicalDevice before using it: name, UUID, API version,
compute queue family, memory types, limits and the optional features the shaders may need."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyree.hal.vulkan.symbols import Functions, ffi

API_1_2 = (1 << 22) | (2 << 12)
QUEUE_COMPUTE = 0x2
STYPE_PROPERTIES_2, STYPE_ID_PROPERTIES = 1000059001, 1000071004
STYPE_FEATURES_2, STYPE_VULKAN_1_1_FEATURES, STYPE_VULKAN_1_2_FEATURES = 1000059000, 49, 51

# SPIR-V capability -> the device feature that allows it (pyree.compiler.codegen.spirv emits these).
CAPABILITY_FEATURES = {
    9: "shaderFloat16", 10: "shaderFloat64", 11: "shaderInt64", 22: "shaderInt16", 39: "shaderInt8",
    4433: "storageBuffer16BitAccess", 4448: "storageBuffer8BitAccess",
}


def version_text(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def format_uuid(raw) -> str:
    h = bytes(raw).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass
class PhysicalDevice:
    handle: object
    name: str
    uuid: str
    api_version: int
    queue_family: int | None
    limits: dict
    features: dict = field(default_factory=dict)

    def unusable_reason(self) -> str:
        """Why pyree cannot run on this device, or ""."""
        if self.api_version < API_1_2:
            return f"{self.name} supports Vulkan {version_text(self.api_version)}, pyree needs 1.2"
        if self.queue_family is None:
            return f"{self.name} has no compute queue"
        if not self.features.get("timelineSemaphore"):
            return f"{self.name} lacks timeline semaphores"
        return ""


def query(vki: Functions, handle) -> PhysicalDevice:
    ids = ffi.new("VkPhysicalDeviceIDProperties *", {"sType": STYPE_ID_PROPERTIES})
    props = ffi.new("VkPhysicalDeviceProperties2 *", {"sType": STYPE_PROPERTIES_2, "pNext": ids})
    vki.vkGetPhysicalDeviceProperties2(handle, props)
    p = props.properties
    limits = {name: getattr(p.limits, name) for name in (
        "maxComputeWorkGroupInvocations", "maxComputeSharedMemorySize",
        "minStorageBufferOffsetAlignment", "maxStorageBufferRange", "maxPushConstantsSize")}
    limits["maxComputeWorkGroupCount"] = tuple(p.limits.maxComputeWorkGroupCount)
    limits["maxComputeWorkGroupSize"] = tuple(p.limits.maxComputeWorkGroupSize)

    count = ffi.new("uint32_t *")
    vki.vkGetPhysicalDeviceQueueFamilyProperties(handle, count, ffi.NULL)
    families = ffi.new("VkQueueFamilyProperties[]", count[0])
    vki.vkGetPhysicalDeviceQueueFamilyProperties(handle, count, families)
    compute = [i for i in range(count[0]) if families[i].queueFlags & QUEUE_COMPUTE]
    # Vulkan 1.2 feature structs may only be chained for a 1.2 device; older ones are unusable.
    features = supported_features(vki, handle) if p.apiVersion >= API_1_2 else {}
    return PhysicalDevice(handle, ffi.string(p.deviceName).decode(errors="replace"),
                          format_uuid(ids.deviceUUID), p.apiVersion,
                          compute[0] if compute else None, limits, features)


def feature_chain(values: dict | None = None):
    """(VkPhysicalDeviceFeatures2, [the structs it points to]) with ``values`` set."""
    v12 = ffi.new("VkPhysicalDeviceVulkan12Features *", {"sType": STYPE_VULKAN_1_2_FEATURES})
    v11 = ffi.new("VkPhysicalDeviceVulkan11Features *", {"sType": STYPE_VULKAN_1_1_FEATURES,
                                                          "pNext": v12})
    f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": STYPE_FEATURES_2, "pNext": v11})
    for name, value in (values or {}).items():
        for struct in (f2.features, v11[0], v12[0]):
            if hasattr(struct, name):
                setattr(struct, name, value)
    return f2, (v11, v12)


_FEATURES = ("shaderInt64", "shaderFloat64", "shaderInt16", "storageBuffer16BitAccess",
             "storageBuffer8BitAccess", "shaderFloat16", "shaderInt8", "timelineSemaphore")


def supported_features(vki: Functions, handle) -> dict:
    f2, (v11, v12) = feature_chain()
    vki.vkGetPhysicalDeviceFeatures2(handle, f2)
    out = {}
    for name in _FEATURES:
        for struct in (f2.features, v11[0], v12[0]):
            if hasattr(struct, name):
                out[name] = bool(getattr(struct, name))
    return out


def memory_types(vki: Functions, handle) -> list[int]:
    """propertyFlags of each memory type, by index."""
    mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
    vki.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    return [mem.memoryTypes[i].propertyFlags for i in range(mem.memoryTypeCount)]
