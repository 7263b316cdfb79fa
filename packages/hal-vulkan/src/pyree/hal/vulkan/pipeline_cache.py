"""Pipeline caches on disk: the second load of a module hands the driver the pipelines it
compiled the first time, so the GPU compiler runs once per module, device and driver.

One file per executable, under the device's folder of the cache directory:
``<dir>/<vendorID>-<deviceID>-<driverVersion>-<pipelineCacheUUID>/<executable digest>.vkpc``.
The directory is ``$PYREE_VULKAN_PIPELINE_CACHE`` or the device URI's ``?pipeline_cache=``
(``off``: no cache), else ``$XDG_CACHE_HOME/pyree/vulkan`` (``~/.cache/pyree/vulkan``).
A file per executable, not per device: it is written whole, once, by whoever created its
pipelines, so no process merges into a file another may be writing, and a load reads only
its own module's pipelines.

A file is pyree's header (magic, format, the device's identity, the executable's digest, the
data's length and SHA-256) followed by what vkGetPipelineCacheData returned. Drivers check
the data's own header (VkPipelineCacheHeaderVersionOne), but not all of them survive damage
past it, so a file is used only when every field of both headers matches this device and the
checksum matches the data: anything else (truncated, damaged, another GPU's or driver's,
another format) is ignored and replaced. Writes go to a temporary file renamed over the old
one, so a reader, or a process writing the same file at once, sees one whole file or the
other. A cache that cannot be written (read-only or full disk) is skipped silently: it only
saves time, and stderr belongs to the program.
"""

from __future__ import annotations

import hashlib
import os
import struct

from pyree.hal.vulkan.physical_device import PhysicalDevice
from pyree.hal.vulkan.symbols import Functions, VulkanError, check, ffi

VARIABLE = "PYREE_VULKAN_PIPELINE_CACHE"
OFF = "off"
STYPE_PIPELINE_CACHE_CREATE_INFO = 17
MAGIC, FORMAT = b"PYREEVKC", 1
# magic, format, vendorID, deviceID, driverVersion, pipelineCacheUUID, executable digest,
# data length, data SHA-256
HEADER = struct.Struct("<8sIIII16s32sQ32s")
# VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID, UUID
VK_HEADER = struct.Struct("<IIII16s")
VK_HEADER_VERSION_ONE = 1


def directory(setting: str | None) -> str | None:
    """The cache directory a setting (the URI's, else the environment's, read as the device is
    created) names, made absolute then: None for ``off``; the default for an empty or missing
    setting."""
    if setting is None or setting == "":
        setting = os.environ.get(VARIABLE, "")
    if setting.lower() == OFF:
        return None
    if setting:
        return os.path.abspath(os.path.expanduser(setting))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pyree", "vulkan")


class PipelineCacheFiles:
    """A device's cache files: read (validated) and written (atomically)."""

    def __init__(self, root: str, physical: PhysicalDevice):
        p = physical
        self.identity = (p.vendor_id, p.device_id, p.driver_version, p.pipeline_cache_uuid)
        self.folder = os.path.join(root, f"{p.vendor_id:04x}-{p.device_id:04x}-"
                                         f"{p.driver_version:08x}-{p.pipeline_cache_uuid.hex()}")

    def path(self, digest: bytes) -> str:
        return os.path.join(self.folder, f"{digest.hex()}.vkpc")

    def read(self, digest: bytes) -> bytes | None:
        """The driver data stored for the executable, or None when there is no usable file
        (missing, unreadable, or failing any check)."""
        try:
            with open(self.path(digest), "rb") as f:
                raw = f.read()
        except OSError:
            return None
        return self.unpack(raw, digest)

    def unpack(self, raw: bytes, digest: bytes) -> bytes | None:
        if len(raw) < HEADER.size:
            return None
        magic, fmt, vendor, device, driver, uuid, stored, length, sha = HEADER.unpack_from(raw)
        data = raw[HEADER.size:]
        if (magic, fmt, (vendor, device, driver, uuid), stored) != (MAGIC, FORMAT, self.identity,
                                                                    digest):
            return None
        if length != len(data) or hashlib.sha256(data).digest() != sha or not self.valid(data):
            return None
        return data

    def valid(self, data: bytes) -> bool:
        """Whether the driver's data begins with a VkPipelineCacheHeaderVersionOne of this
        device (vendor, device, pipelineCacheUUID)."""
        if len(data) < VK_HEADER.size:
            return False
        size, version, vendor, device, uuid = VK_HEADER.unpack_from(data)
        return (VK_HEADER.size <= size <= len(data) and version == VK_HEADER_VERSION_ONE
                and (vendor, device, uuid) == (self.identity[0], self.identity[1],
                                               self.identity[3]))

    def write(self, digest: bytes, data: bytes) -> bool:
        """Stores the driver's data for the executable; False when the disk would not take it
        (read-only, full, not a directory). Nothing is left behind either way."""
        header = HEADER.pack(MAGIC, FORMAT, *self.identity, digest, len(data),
                             hashlib.sha256(data).digest())
        path = self.path(digest)
        temporary = f"{path}.{os.getpid()}-{os.urandom(6).hex()}.tmp"  # this writer's own
        try:
            os.makedirs(self.folder, exist_ok=True)
            with open(temporary, "xb") as f:
                f.write(header)
                f.write(data)
            os.replace(temporary, path)
            return True
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            return False


def create(vk: Functions, device, seed: bytes | None) -> int:
    """A VkPipelineCache holding ``seed`` (a driver that refuses it gets an empty one)."""
    out = ffi.new("VkPipelineCache *")
    for data in ([seed] if seed else []) + [b""]:
        keep = ffi.from_buffer(data)
        info = ffi.new("VkPipelineCacheCreateInfo *", {
            "sType": STYPE_PIPELINE_CACHE_CREATE_INFO, "initialDataSize": len(data),
            "pInitialData": keep if data else ffi.NULL})
        result = vk.vkCreatePipelineCache(device, info, ffi.NULL, out)
        if result >= 0:
            return out[0]
    raise VulkanError(result, "vkCreatePipelineCache")


def contents(vk: Functions, device, cache: int) -> bytes:
    """What vkGetPipelineCacheData returns for ``cache``."""
    size = ffi.new("size_t *")
    check(vk.vkGetPipelineCacheData(device, cache, size, ffi.NULL), "vkGetPipelineCacheData")
    data = ffi.new("char[]", size[0])
    check(vk.vkGetPipelineCacheData(device, cache, size, data), "vkGetPipelineCacheData")
    return ffi.buffer(data, size[0])[:]
