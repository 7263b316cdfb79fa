"""The HAL core: the cffi ABI, driver discovery, Python wrappers over devices, the driver SDK."""
