"""One sample of bench/vulkan/first_load.py, in a process of its own: ``load_module`` to the
first result, with each phase of the load timed apart (time.perf_counter around the functions
that do it, wrapped here: the runtime has no timing hook of its own).

    python3 first_load_child.py MODULE DEVICE PARAMS|'' OUT.npz SHAPES_JSON SPAWN_TIME

Prints one JSON line of seconds. ``spawn``: from the parent's ``time.time()`` just before it
started this process (SPAWN_TIME) to this file's first line (fork, exec, the interpreter and
its site). ``import_numpy``, ``import_runtime`` (with the loader's modules, which
``load_module`` would import), ``import_driver`` (the Vulkan driver's, which its device thread
would): imported here rather than inside the load so that they can be wrapped (the earlier
benches imported the driver here too: "load" is comparable).
Inside ``load`` (``load_module``): ``device`` (its thread: the driver's entry point, the
instance and its physical devices, ``instance``, then the logical device, ``create``), beside
it ``read`` (the module file read and checked: ``digest``, ``bounds``, ``unpack``, ``verify``)
and, while the device still starts, ``precheck`` (the SPIR-V checks); then ``executable``
(``check``: SPIR-V and device limits, ``pipelines``), ``constants`` (device buffers and their
upload; ``parameters``: a parameter file indexed and its tensors read) and ``functions`` (each
function's call plan and recording). Then ``first_call`` to the result in numpy. Phases on the
device thread overlap those beside it, so they need not add up to ``load``.
"""

import json
import sys
import time

WALL = time.time()
T0 = time.perf_counter()
spent: dict[str, float] = {}


def timed(owner, attr: str, name: str) -> None:
    """Adds the time spent in ``owner.attr`` (from any thread) to ``spent[name]``."""
    method = owner.__dict__[attr]
    function = method.__func__ if isinstance(method, (classmethod, staticmethod)) else method

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
    setattr(owner, attr, type(method)(wrapper) if function is not method else wrapper)


def main() -> None:
    module_path, device, params, out, shapes, spawned = sys.argv[1:7]
    spent["spawn"] = WALL - float(spawned)
    import numpy as np
    t1 = time.perf_counter()
    import pyree.runtime as rt
    from pyree.runtime.hal import registry
    from pyree.runtime.hal.ffi import ffi
    from pyree.runtime.module import reader, unpack
    from pyree.runtime.parameters import ParameterIndex
    from pyree.runtime.vm import executables, function, loaded_module
    t2 = time.perf_counter()
    from pyree.hal.vulkan import device as vk_device
    from pyree.hal.vulkan import executable as vk_executable
    from pyree.hal.vulkan import instance as vk_instance
    t3 = time.perf_counter()
    spent.update(import_numpy=t1 - T0, import_runtime=t2 - t1, import_driver=t3 - t2)
    for owner, attr, name in [
            (registry, "get_device", "device"),
            (vk_instance.VulkanDriver, "_physical_devices", "instance"),
            (vk_device.VulkanDevice, "__init__", "create"),
            (loaded_module, "open_module", "read"), (reader, "read_trailer", "digest"),
            (reader, "check_bounds", "bounds"), (unpack, "unpack", "unpack"),
            (reader, "verify", "verify"), (executables, "precheck", "precheck"),
            (executables, "load", "executable"),
            (vk_executable.ExecutableCache, "_check", "check"),
            (vk_executable.ExecutableCache, "_cached_pipelines", "pipelines"),
            (loaded_module.LoadedModule, "_constant", "constants"),
            (ParameterIndex, "__init__", "parameters"), (ParameterIndex, "resolve", "parameters"),
            (function.Function, "__init__", "functions")]:
        timed(owner, attr, name)
    t4 = time.perf_counter()
    module = rt.load_module(module_path, device=device, parameters=[params] if params else None)
    t5 = time.perf_counter()
    fn = module[module.function_names[0]]
    rng = np.random.default_rng(7)
    inputs = [rng.uniform(0, 1, a["shape"]).astype(a["dtype"]) for a in json.loads(shapes)]
    results = fn(*inputs)
    results = results if isinstance(results, tuple) else (results,)
    host = [r.to_host() for r in results]
    t6 = time.perf_counter()
    np.savez(out, *host)
    stats = ffi.from_handle(module.device._vt.self).executables.stats
    spent.update(load=t5 - t4, first_call=t6 - t5, to_result=t6 - t4,
                 total=spent["spawn"] + t6 - T0)
    print(json.dumps({**{f"{k}_s": v for k, v in spent.items()}, **stats}))


if __name__ == "__main__":
    main()
