"""What the driver learns about a VkPhysicalDevice before using it: name, UUID, API version,
compute queue family, memory types, limits, the optional features the shaders may need, and
what identifies its pipeline caches (vendor, device, driver version, pipelineCacheUUID)."""

from __future__ import annotations

from pyree.hal.vulkan.symbols import Functions, ffi

API_1_2 = (1 << 22) | (2 << 12)
QUEUE_COMPUTE = 0x2
STYPE_PROPERTIES_2, STYPE_ID_PROPERTIES = 1000059001, 1000071004
STYPE_FEATURES_2, STYPE_VULKAN_1_1_FEATURES, STYPE_VULKAN_1_2_FEATURES = 1000059000, 49, 51
STYPE_COOPMAT_FEATURES, STYPE_COOPMAT_PROPERTIES = 1000506000, 1000506001
COOPERATIVE_MATRIX_EXTENSION = b"VK_KHR_cooperative_matrix"
BFLOAT16_EXTENSION = b"VK_KHR_shader_bfloat16"   # bf16 cooperative matrices
STYPE_BFLOAT16_FEATURES = 1000141000
# reports per pipeline whether the pipeline cache had it (pipeline_cache.py counts the hits)
CREATION_FEEDBACK_EXTENSION = b"VK_EXT_pipeline_creation_feedback"
SCOPE_SUBGROUP = 3
# VkComponentTypeKHR -> the float type it names (VK_COMPONENT_TYPE_BFLOAT16_KHR for bf16).
COMPONENT_FLOATS = {0: "f16", 1: "f32", 2: "f64", 1000141000: "bf16"}

# SPIR-V capability -> the device feature that allows it (pyree.compiler.codegen.spirv emits these).
CAPABILITY_FEATURES = {
    9: "shaderFloat16", 10: "shaderFloat64", 11: "shaderInt64", 22: "shaderInt16", 39: "shaderInt8",
    4433: "storageBuffer16BitAccess", 4448: "storageBuffer8BitAccess",
    5345: "vulkanMemoryModel", 6022: "cooperativeMatrix",
    5116: "shaderBFloat16Type", 5118: "shaderBFloat16CooperativeMatrix",
}


def version_text(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def format_uuid(raw) -> str:
    h = bytes(raw).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class PhysicalDevice:
    """What pyree needs to know of one Vulkan physical device. (A plain class: dataclasses'
    import, with inspect and ast, would be most of this driver's.)"""

    def __init__(self, handle, name: str, uuid: str, api_version: int, queue_family: int | None,
                 limits: dict, features: dict | None = None,
                 cooperative_matrix_shapes: frozenset = frozenset(), timestamp_bits: int = 0,
                 vendor_id: int = 0, device_id: int = 0, driver_version: int = 0,
                 pipeline_cache_uuid: bytes = bytes(16), extensions: frozenset = frozenset()):
        self.handle, self.name, self.uuid, self.api_version = handle, name, uuid, api_version
        self.queue_family, self.limits = queue_family, limits
        self.features = features if features is not None else {}
        # Subgroup-scope (M, N, K, A bits, B bits, C bits) float multiply-adds the tensor units
        # run.
        self.cooperative_matrix_shapes = cooperative_matrix_shapes
        # valid bits of the compute queue's timestamps (0: it has none; a trace then sees only
        # whole submissions)
        self.timestamp_bits = timestamp_bits
        # what a pipeline cache's data is valid for (VkPipelineCacheHeaderVersionOne and the
        # driver)
        self.vendor_id, self.device_id, self.driver_version = vendor_id, device_id, driver_version
        self.pipeline_cache_uuid = pipeline_cache_uuid
        self.extensions = extensions

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
        "minStorageBufferOffsetAlignment", "maxStorageBufferRange", "maxPushConstantsSize",
        "timestampPeriod", "maxPerStageDescriptorStorageBuffers", "maxDescriptorSetStorageBuffers",
        "maxPerStageResources")}
    limits["maxComputeWorkGroupCount"] = tuple(p.limits.maxComputeWorkGroupCount)
    limits["maxComputeWorkGroupSize"] = tuple(p.limits.maxComputeWorkGroupSize)

    count = ffi.new("uint32_t *")
    vki.vkGetPhysicalDeviceQueueFamilyProperties(handle, count, ffi.NULL)
    families = ffi.new("VkQueueFamilyProperties[]", count[0])
    vki.vkGetPhysicalDeviceQueueFamilyProperties(handle, count, families)
    compute = [i for i in range(count[0]) if families[i].queueFlags & QUEUE_COMPUTE]
    # Vulkan 1.2 feature structs may only be chained for a 1.2 device; older ones are unusable.
    extensions = device_extensions(vki, handle)
    cooperative = COOPERATIVE_MATRIX_EXTENSION in extensions
    bfloat16 = BFLOAT16_EXTENSION in extensions
    features = supported_features(vki, handle, cooperative, bfloat16) \
        if p.apiVersion >= API_1_2 else {}
    shapes = cooperative_matrix_shapes(vki, handle) if features.get("cooperativeMatrix") else frozenset()
    return PhysicalDevice(handle, ffi.string(p.deviceName).decode(errors="replace"),
                          format_uuid(ids.deviceUUID), p.apiVersion,
                          compute[0] if compute else None, limits, features, shapes,
                          families[compute[0]].timestampValidBits if compute else 0,
                          p.vendorID, p.deviceID, p.driverVersion, bytes(p.pipelineCacheUUID),
                          extensions)


def device_extensions(vki: Functions, handle) -> frozenset[bytes]:
    count = ffi.new("uint32_t *")
    vki.vkEnumerateDeviceExtensionProperties(handle, ffi.NULL, count, ffi.NULL)
    props = ffi.new("VkExtensionProperties[]", count[0])
    vki.vkEnumerateDeviceExtensionProperties(handle, ffi.NULL, count, props)
    return frozenset(ffi.string(props[i].extensionName) for i in range(count[0]))


def cooperative_matrix_shapes(vki: Functions, handle) -> frozenset:
    """What vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR lists, floats at subgroup scope:
    (M, N, K, A's, B's and C's float type)."""
    query_fn = vki.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR
    if query_fn is None:
        return frozenset()
    count = ffi.new("uint32_t *")
    query_fn(handle, count, ffi.NULL)
    props = ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for i in range(count[0]):
        props[i].sType = STYPE_COOPMAT_PROPERTIES
    query_fn(handle, count, props)
    out = set()
    for i in range(count[0]):
        p = props[i]
        types = (p.AType, p.BType, p.CType)
        if p.scope == SCOPE_SUBGROUP and all(t in COMPONENT_FLOATS for t in types):
            out.add((p.MSize, p.NSize, p.KSize, *(COMPONENT_FLOATS[t] for t in types)))
    return frozenset(out)


def feature_chain(values: dict | None = None, cooperative: bool = False, bfloat16: bool = False):
    """(VkPhysicalDeviceFeatures2, [the structs it points to]) with ``values`` set; with
    ``cooperative`` and ``bfloat16``, VK_KHR_cooperative_matrix's and VK_KHR_shader_bfloat16's
    features are chained too."""
    bf16 = ffi.new("VkPhysicalDeviceShaderBfloat16FeaturesKHR *",
                   {"sType": STYPE_BFLOAT16_FEATURES}) if bfloat16 else ffi.NULL
    coop = ffi.new("VkPhysicalDeviceCooperativeMatrixFeaturesKHR *",
                   {"sType": STYPE_COOPMAT_FEATURES, "pNext": bf16}) if cooperative else bf16
    v12 = ffi.new("VkPhysicalDeviceVulkan12Features *", {"sType": STYPE_VULKAN_1_2_FEATURES,
                                                          "pNext": coop})
    v11 = ffi.new("VkPhysicalDeviceVulkan11Features *", {"sType": STYPE_VULKAN_1_1_FEATURES,
                                                          "pNext": v12})
    f2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": STYPE_FEATURES_2, "pNext": v11})
    structs = _structs(f2, v11, v12, coop if cooperative else None, bf16 if bfloat16 else None)
    for name, value in (values or {}).items():
        for struct in structs:
            if hasattr(struct, name):
                setattr(struct, name, value)
    return f2, (v11, v12, coop, bf16)


def _structs(f2, v11, v12, coop, bf16) -> tuple:
    return (f2.features, v11[0], v12[0]) + tuple(s[0] for s in (coop, bf16) if s is not None)


_FEATURES = ("shaderInt64", "shaderFloat64", "shaderInt16", "storageBuffer16BitAccess",
             "storageBuffer8BitAccess", "shaderFloat16", "shaderInt8", "timelineSemaphore",
             "vulkanMemoryModel", "cooperativeMatrix", "shaderBFloat16Type",
             "shaderBFloat16CooperativeMatrix")


def supported_features(vki: Functions, handle, cooperative: bool, bfloat16: bool = False) -> dict:
    f2, (v11, v12, coop, bf16) = feature_chain(cooperative=cooperative, bfloat16=bfloat16)
    vki.vkGetPhysicalDeviceFeatures2(handle, f2)
    out = {}
    for name in _FEATURES:
        for struct in _structs(f2, v11, v12, coop if cooperative else None,
                               bf16 if bfloat16 else None):
            if hasattr(struct, name):
                out[name] = bool(getattr(struct, name))
    return out


def memory_types(vki: Functions, handle) -> list[int]:
    """propertyFlags of each memory type, by index."""
    mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
    vki.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    return [mem.memoryTypes[i].propertyFlags for i in range(mem.memoryTypeCount)]
