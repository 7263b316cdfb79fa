"""The Vulkan entry points the driver uses: one declared table, loaded from libvulkan.so.1 at run
time through vkGetInstanceProcAddr / vkGetDeviceProcAddr. The table is the list of what the
driver needs from the host's Vulkan loader. Result names come first so that any failure, a
failed load included, is reported by name.
"""

from __future__ import annotations

from pyree.hal.vulkan._ffi import ffi
from pyree.runtime.hal.python_driver import HalError

LOADER = "libvulkan.so.1"

RESULTS = {
    0: "VK_SUCCESS", 1: "VK_NOT_READY", 2: "VK_TIMEOUT", 5: "VK_INCOMPLETE",
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED", -4: "VK_ERROR_DEVICE_LOST",
    -5: "VK_ERROR_MEMORY_MAP_FAILED", -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT", -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER", -10: "VK_ERROR_TOO_MANY_OBJECTS",
    -11: "VK_ERROR_FORMAT_NOT_SUPPORTED", -12: "VK_ERROR_FRAGMENTED_POOL", -13: "VK_ERROR_UNKNOWN",
    -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY", -1000012000: "VK_ERROR_INVALID_SHADER_NV",
    -1000161000: "VK_ERROR_FRAGMENTATION",
}
# What a result means for pyree's status codes and for the person reading the message.
_STATUS = {-1: "RESOURCE_EXHAUSTED", -2: "RESOURCE_EXHAUSTED", -4: "INTERNAL", -9: "UNAVAILABLE",
           -3: "UNAVAILABLE", -1000069000: "RESOURCE_EXHAUSTED", 2: "DEADLINE_EXCEEDED"}
_HINT = {-2: "the GPU is out of memory", -1: "the host is out of memory",
         -4: "the device was lost (a GPU fault, reset or driver crash); recreate the device",
         -9: "no compatible Vulkan driver (ICD) is installed"}

# (name, C signature with the name as '(*)', level): level says how the pointer is found.
# "global": vkGetInstanceProcAddr(NULL, ...); "instance": with the instance; "device": with
# vkGetDeviceProcAddr. A level ending in "?" marks an extension's entry point: None when absent.
ENTRY_POINTS = [
    ("vkEnumerateInstanceVersion", "VkResult (*)(uint32_t *)", "global"),
    ("vkCreateInstance", "VkResult (*)(const VkInstanceCreateInfo *, const VkAllocationCallbacks *, "
                         "VkInstance *)", "global"),
    ("vkDestroyInstance", "void (*)(VkInstance, const VkAllocationCallbacks *)", "instance"),
    ("vkEnumeratePhysicalDevices", "VkResult (*)(VkInstance, uint32_t *, VkPhysicalDevice *)",
     "instance"),
    ("vkGetPhysicalDeviceProperties2", "void (*)(VkPhysicalDevice, VkPhysicalDeviceProperties2 *)",
     "instance"),
    ("vkGetPhysicalDeviceFeatures2", "void (*)(VkPhysicalDevice, VkPhysicalDeviceFeatures2 *)",
     "instance"),
    ("vkGetPhysicalDeviceQueueFamilyProperties",
     "void (*)(VkPhysicalDevice, uint32_t *, VkQueueFamilyProperties *)", "instance"),
    ("vkGetPhysicalDeviceMemoryProperties",
     "void (*)(VkPhysicalDevice, VkPhysicalDeviceMemoryProperties *)", "instance"),
    ("vkEnumerateDeviceExtensionProperties", "VkResult (*)(VkPhysicalDevice, const char *, "
                                             "uint32_t *, VkExtensionProperties *)", "instance"),
    ("vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR",
     "VkResult (*)(VkPhysicalDevice, uint32_t *, VkCooperativeMatrixPropertiesKHR *)", "instance?"),
    ("vkCreateDevice", "VkResult (*)(VkPhysicalDevice, const VkDeviceCreateInfo *, "
                       "const VkAllocationCallbacks *, VkDevice *)", "instance"),
    ("vkGetDeviceProcAddr", "PFN_vkVoidFunction (*)(VkDevice, const char *)", "instance"),
    ("vkDestroyDevice", "void (*)(VkDevice, const VkAllocationCallbacks *)", "device"),
    ("vkGetDeviceQueue", "void (*)(VkDevice, uint32_t, uint32_t, VkQueue *)", "device"),
    ("vkDeviceWaitIdle", "VkResult (*)(VkDevice)", "device"),
    ("vkCreateBuffer", "VkResult (*)(VkDevice, const VkBufferCreateInfo *, "
                       "const VkAllocationCallbacks *, VkBuffer *)", "device"),
    ("vkDestroyBuffer", "void (*)(VkDevice, VkBuffer, const VkAllocationCallbacks *)", "device"),
    ("vkGetBufferMemoryRequirements", "void (*)(VkDevice, VkBuffer, VkMemoryRequirements *)",
     "device"),
    ("vkAllocateMemory", "VkResult (*)(VkDevice, const VkMemoryAllocateInfo *, "
                         "const VkAllocationCallbacks *, VkDeviceMemory *)", "device"),
    ("vkFreeMemory", "void (*)(VkDevice, VkDeviceMemory, const VkAllocationCallbacks *)", "device"),
    ("vkBindBufferMemory", "VkResult (*)(VkDevice, VkBuffer, VkDeviceMemory, VkDeviceSize)",
     "device"),
    ("vkMapMemory", "VkResult (*)(VkDevice, VkDeviceMemory, VkDeviceSize, VkDeviceSize, VkFlags, "
                    "void **)", "device"),
    ("vkUnmapMemory", "void (*)(VkDevice, VkDeviceMemory)", "device"),
    ("vkCreateShaderModule", "VkResult (*)(VkDevice, const VkShaderModuleCreateInfo *, "
                             "const VkAllocationCallbacks *, VkShaderModule *)", "device"),
    ("vkDestroyShaderModule", "void (*)(VkDevice, VkShaderModule, const VkAllocationCallbacks *)",
     "device"),
    ("vkCreateDescriptorSetLayout", "VkResult (*)(VkDevice, const VkDescriptorSetLayoutCreateInfo *, "
                                    "const VkAllocationCallbacks *, VkDescriptorSetLayout *)",
     "device"),
    ("vkDestroyDescriptorSetLayout",
     "void (*)(VkDevice, VkDescriptorSetLayout, const VkAllocationCallbacks *)", "device"),
    ("vkCreatePipelineLayout", "VkResult (*)(VkDevice, const VkPipelineLayoutCreateInfo *, "
                               "const VkAllocationCallbacks *, VkPipelineLayout *)", "device"),
    ("vkDestroyPipelineLayout", "void (*)(VkDevice, VkPipelineLayout, const VkAllocationCallbacks *)",
     "device"),
    ("vkCreateComputePipelines", "VkResult (*)(VkDevice, VkPipelineCache, uint32_t, "
                                 "const VkComputePipelineCreateInfo *, "
                                 "const VkAllocationCallbacks *, VkPipeline *)", "device"),
    ("vkDestroyPipeline", "void (*)(VkDevice, VkPipeline, const VkAllocationCallbacks *)", "device"),
    # the on-disk pipeline caches (pipeline_cache.py)
    ("vkCreatePipelineCache", "VkResult (*)(VkDevice, const VkPipelineCacheCreateInfo *, "
                              "const VkAllocationCallbacks *, VkPipelineCache *)", "device"),
    ("vkDestroyPipelineCache", "void (*)(VkDevice, VkPipelineCache, const VkAllocationCallbacks *)",
     "device"),
    ("vkGetPipelineCacheData", "VkResult (*)(VkDevice, VkPipelineCache, size_t *, void *)",
     "device"),
    ("vkCreateDescriptorPool", "VkResult (*)(VkDevice, const VkDescriptorPoolCreateInfo *, "
                               "const VkAllocationCallbacks *, VkDescriptorPool *)", "device"),
    ("vkDestroyDescriptorPool", "void (*)(VkDevice, VkDescriptorPool, const VkAllocationCallbacks *)",
     "device"),
    ("vkAllocateDescriptorSets", "VkResult (*)(VkDevice, const VkDescriptorSetAllocateInfo *, "
                                 "VkDescriptorSet *)", "device"),
    ("vkUpdateDescriptorSets", "void (*)(VkDevice, uint32_t, const VkWriteDescriptorSet *, uint32_t, "
                               "const void *)", "device"),
    ("vkCreateCommandPool", "VkResult (*)(VkDevice, const VkCommandPoolCreateInfo *, "
                            "const VkAllocationCallbacks *, VkCommandPool *)", "device"),
    ("vkDestroyCommandPool", "void (*)(VkDevice, VkCommandPool, const VkAllocationCallbacks *)",
     "device"),
    ("vkAllocateCommandBuffers", "VkResult (*)(VkDevice, const VkCommandBufferAllocateInfo *, "
                                 "VkCommandBuffer *)", "device"),
    ("vkFreeCommandBuffers", "void (*)(VkDevice, VkCommandPool, uint32_t, const VkCommandBuffer *)",
     "device"),
    ("vkBeginCommandBuffer", "VkResult (*)(VkCommandBuffer, const VkCommandBufferBeginInfo *)",
     "device"),
    ("vkEndCommandBuffer", "VkResult (*)(VkCommandBuffer)", "device"),
    ("vkCmdBindPipeline", "void (*)(VkCommandBuffer, VkPipelineBindPoint, VkPipeline)", "device"),
    ("vkCmdBindDescriptorSets", "void (*)(VkCommandBuffer, VkPipelineBindPoint, VkPipelineLayout, "
                                "uint32_t, uint32_t, const VkDescriptorSet *, uint32_t, "
                                "const uint32_t *)", "device"),
    ("vkCmdPushConstants", "void (*)(VkCommandBuffer, VkPipelineLayout, VkShaderStageFlags, "
                           "uint32_t, uint32_t, const void *)", "device"),
    ("vkCmdDispatch", "void (*)(VkCommandBuffer, uint32_t, uint32_t, uint32_t)", "device"),
    ("vkCmdCopyBuffer", "void (*)(VkCommandBuffer, VkBuffer, VkBuffer, uint32_t, "
                        "const VkBufferCopy *)", "device"),
    ("vkCmdFillBuffer", "void (*)(VkCommandBuffer, VkBuffer, VkDeviceSize, VkDeviceSize, uint32_t)",
     "device"),
    ("vkCmdUpdateBuffer", "void (*)(VkCommandBuffer, VkBuffer, VkDeviceSize, VkDeviceSize, "
                          "const void *)", "device"),
    ("vkCmdPipelineBarrier", "void (*)(VkCommandBuffer, VkPipelineStageFlags, VkPipelineStageFlags, "
                             "VkDependencyFlags, uint32_t, const VkMemoryBarrier *, uint32_t, "
                             "const void *, uint32_t, const void *)", "device"),
    ("vkQueueSubmit", "VkResult (*)(VkQueue, uint32_t, const VkSubmitInfo *, VkFence)", "device"),
    ("vkCreateSemaphore", "VkResult (*)(VkDevice, const VkSemaphoreCreateInfo *, "
                          "const VkAllocationCallbacks *, VkSemaphore *)", "device"),
    ("vkDestroySemaphore", "void (*)(VkDevice, VkSemaphore, const VkAllocationCallbacks *)", "device"),
    ("vkGetSemaphoreCounterValue", "VkResult (*)(VkDevice, VkSemaphore, uint64_t *)", "device"),
    ("vkWaitSemaphores", "VkResult (*)(VkDevice, const VkSemaphoreWaitInfo *, uint64_t)", "device"),
    ("vkSignalSemaphore", "VkResult (*)(VkDevice, const VkSemaphoreSignalInfo *)", "device"),
    # timestamps around each command of a traced submission
    ("vkCreateQueryPool", "VkResult (*)(VkDevice, const VkQueryPoolCreateInfo *, "
                          "const VkAllocationCallbacks *, VkQueryPool *)", "device"),
    ("vkDestroyQueryPool", "void (*)(VkDevice, VkQueryPool, const VkAllocationCallbacks *)",
     "device"),
    ("vkCmdResetQueryPool", "void (*)(VkCommandBuffer, VkQueryPool, uint32_t, uint32_t)", "device"),
    ("vkCmdWriteTimestamp", "void (*)(VkCommandBuffer, VkPipelineStageFlagBits, VkQueryPool, "
                            "uint32_t)", "device"),
    ("vkGetQueryPoolResults", "VkResult (*)(VkDevice, VkQueryPool, uint32_t, uint32_t, size_t, "
                              "void *, VkDeviceSize, VkQueryResultFlags)", "device"),
]


class VulkanError(HalError):
    """A failed Vulkan call: what we did, the VkResult's name and what it means."""

    def __init__(self, result: int, what: str):
        name = RESULTS.get(result, f"VkResult {result}")
        hint = _HINT.get(result)
        super().__init__(_STATUS.get(result, "INTERNAL"),
                         f"{what} failed: {name}" + (f" ({hint})" if hint else ""))
        self.result = result


def check(err: int, what: str) -> None:
    """Raises VulkanError for a VkResult that is an error (negative: VK_NOT_READY, VK_TIMEOUT and
    VK_INCOMPLETE are not): its name and what it means, after ``what`` we did."""
    if err < 0:
        raise VulkanError(err, what)


class Functions:
    """Attribute access to the table's entry points for one level (global, instance, device)."""

    def __init__(self, lookup, level: str):
        for name, signature, where in ENTRY_POINTS:
            if where.rstrip("?") != level:
                continue
            pointer = lookup(name.encode())
            if pointer != ffi.NULL:
                setattr(self, name, ffi.cast(signature, pointer))
            elif where.endswith("?"):
                setattr(self, name, None)
            else:
                raise HalError("UNAVAILABLE", f"the Vulkan loader has no entry point {name}")


_library = None


def load_loader():
    """The loader library, opened once; UNAVAILABLE names what is missing."""
    global _library
    if _library is None:
        try:
            _library = ffi.dlopen(LOADER)
        except OSError as e:
            raise HalError("UNAVAILABLE", f"the Vulkan loader {LOADER} is not installed or cannot "
                                          f"be opened ({e}); install libvulkan1 and a Vulkan "
                                          "driver (e.g. mesa-vulkan-drivers)") from None
    return _library


def global_functions() -> Functions:
    lib = load_loader()
    return Functions(lambda name: lib.vkGetInstanceProcAddr(ffi.NULL, name), "global")


def instance_functions(instance) -> Functions:
    lib = load_loader()
    return Functions(lambda name: lib.vkGetInstanceProcAddr(instance, name), "instance")


def device_functions(vki: Functions, device) -> Functions:
    return Functions(lambda name: vki.vkGetDeviceProcAddr(device, name), "device")
