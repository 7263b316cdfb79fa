"""The on-disk pipeline cache (pyree.hal.vulkan.pipeline_cache) and pipelines created on several
threads: the first load writes the executable's file, the second seeds the driver's cache from
it and writes nothing; damaged or foreign files are ignored and replaced; ``off`` writes
nothing; a cache that cannot be written costs nothing but time; processes loading one module
at once all succeed and leave one whole file. Results are checked against numpy every time.
Lavapipe keeps no pipelines in its cache data (only the header), so the driver's hit count is
checked only where the data holds more (NVIDIA's driver)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numerics_cases as C
import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import vulkan_vmfb

pytestmark = pytest.mark.vulkan
CASE = C.transpose_broadcast_slices  # three kernels: several pipelines, several threads
CHILD = """
import sys
import numpy as np, pyree.runtime as rt
module = rt.load_module(sys.argv[1], device=sys.argv[2])
inputs = [np.load(path) for path in sys.argv[4:]]
np.savez(sys.argv[3], *(r.to_host() for r in module[{function!r}](*inputs)))
"""


@pytest.fixture(scope="module")
def vmfb(vulkan_device, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("module") / "m.vmfb"
    path.write_bytes(vulkan_vmfb(CASE().mlir))
    return path


def driver_device(device):
    """The vulkan driver's own object behind a runtime Device."""
    from pyree.runtime.hal.ffi import ffi
    return ffi.from_handle(device._vt.self)


def load_and_check(vmfb: Path, uri: str) -> dict:
    """Loads the module on a new device for ``uri``, checks a call against numpy and returns
    what the device's pipeline caches did."""
    device = rt.get_device(uri, cache=False)
    case = CASE()
    module = rt.load_module(vmfb, device=device)
    inputs = case.inputs(np.random.default_rng())
    C.check(case, C.results(module[case.function](*inputs)), inputs)
    return dict(driver_device(device).executables.stats)


def saved(path: Path) -> tuple:
    """The results a child process saved."""
    with np.load(path) as f:
        return tuple(f[f"arr_{i}"] for i in range(len(f.files)))


def cache_files(root: Path) -> list[Path]:
    """pyree's cache files under ``root``, asserting no temporary file was left (the driver
    itself may keep a cache of its own there: Mesa's under $XDG_CACHE_HOME)."""
    assert not list(root.rglob("*.tmp"))
    return sorted(root.rglob("*.vkpc"))


def files_of(uri: str):
    """The PipelineCacheFiles of a device for ``uri``."""
    return driver_device(rt.get_device(uri, cache=False)).executables.files


def test_first_load_writes_the_file_and_the_second_is_seeded_from_it(vmfb, tmp_path):
    uri = f"vulkan://?pipeline_cache={tmp_path}"
    first = load_and_check(vmfb, uri)
    assert first["written"] == 1 and first["seeded"] == 0 and first["pipelines"] == 3, first
    (path,) = cache_files(tmp_path)
    assert path.suffix == ".vkpc" and path.parent.parent == tmp_path
    before = path.read_bytes(), path.stat().st_mtime_ns
    second = load_and_check(vmfb, uri)
    assert second["seeded"] == 1 and second["written"] == second["refused"] == 0, second
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before  # read, not rewritten
    files = files_of(uri)
    data = files.unpack(before[0], bytes.fromhex(path.stem))
    assert data is not None and files.valid(data)
    driver_keeps_pipelines = len(data) > 32 + 32  # more than VkPipelineCacheHeaderVersionOne
    if driver_keeps_pipelines and second["creation_ns"]:
        assert second["hits"] == second["pipelines"], second


def test_the_default_folder_and_the_environment_variable(vmfb, tmp_path):
    """In fresh processes: $XDG_CACHE_HOME/pyree/vulkan by default, the variable's directory
    when set, nothing anywhere when it is off."""
    for setting, where in [(None, tmp_path / "xdg" / "pyree" / "vulkan"),
                           (str(tmp_path / "env"), tmp_path / "env"), ("off", None)]:
        env = {k: v for k, v in os.environ.items() if k != "PYREE_VULKAN_PIPELINE_CACHE"}
        env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path / "home"))
        if setting is not None:
            env["PYREE_VULKAN_PIPELINE_CACHE"] = setting
        inputs = CASE().inputs(np.random.default_rng())
        paths = []
        for i, x in enumerate(inputs):
            paths.append(str(tmp_path / f"in{i}.npy"))
            np.save(paths[-1], x)
        out = tmp_path / "out.npz"
        proc = subprocess.run([sys.executable, "-c", CHILD.format(function=CASE().function),
                               str(vmfb), "vulkan", str(out), *paths], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr, proc.stderr
        C.check(CASE(), saved(out), inputs)
        written = cache_files(tmp_path / "xdg") + cache_files(tmp_path / "env") \
            + cache_files(tmp_path / "home")
        if where is None:
            assert written == [], written
        else:
            assert [p.parent.parent for p in written] == [where], written
        for p in written:
            p.unlink()


def test_off_in_the_device_uri_writes_nothing(vmfb, tmp_path, monkeypatch):
    monkeypatch.setenv("PYREE_VULKAN_PIPELINE_CACHE", str(tmp_path))
    stats = load_and_check(vmfb, "vulkan://?pipeline_cache=off")
    assert stats["written"] == stats["seeded"] == 0 and stats["pipelines"] == 3
    assert cache_files(tmp_path) == []


def test_the_pyree_run_module_cli_takes_the_cache_in_the_device_uri(vmfb, tmp_path):
    case = CASE()
    inputs = case.inputs(np.random.default_rng())
    flags = []
    for i, x in enumerate(inputs):
        np.save(tmp_path / f"in{i}.npy", x)
        flags.append(f"--input=@{tmp_path / f'in{i}.npy'}")
    outs = [tmp_path / f"out{i}.npy" for i in range(3)]
    proc = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module",
                           f"--module={vmfb}", f"--device=vulkan://?pipeline_cache={tmp_path / 'c'}",
                           *flags, *(f"--output=@{o}" for o in outs)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    C.check(case, tuple(np.load(o) for o in outs), inputs)
    assert len(cache_files(tmp_path / "c")) == 1


def _damage(raw: bytes, how: str) -> bytes:
    from pyree.hal.vulkan import pipeline_cache as P
    header, data = raw[:P.HEADER.size], raw[P.HEADER.size:]
    fields = list(P.HEADER.unpack(header))

    def repack(data: bytes, **changes) -> bytes:
        values = dict(zip(("magic", "format", "vendor", "device", "driver", "uuid", "digest",
                           "length", "sha"), fields))
        values.update(length=len(data), sha=hashlib.sha256(data).digest())
        values.update(changes)
        return P.HEADER.pack(*values.values()) + data

    if how == "empty":
        return b""
    if how == "truncated":
        return raw[:len(raw) - max(1, len(data) // 2)]
    if how == "header_only":
        return header
    if how == "garbage":
        return os.urandom(len(raw))
    if how == "flipped_byte":  # checksum no longer matches
        return header + bytes([data[0] ^ 0x5A]) + data[1:]
    if how == "other_driver_version":
        return repack(data, driver=fields[4] + 1)
    if how == "other_format":
        return repack(data, format=fields[1] + 1)
    if how == "foreign_vulkan_header":  # pyree's header right, the driver data another vendor's
        vendor = int.from_bytes(data[8:12], "little") ^ 0x1
        return repack(data[:8] + vendor.to_bytes(4, "little") + data[12:])
    if how == "short_vulkan_header":
        return repack(data[:20])
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["empty", "truncated", "header_only", "garbage", "flipped_byte",
                                 "other_driver_version", "other_format",
                                 "foreign_vulkan_header", "short_vulkan_header"])
def test_a_damaged_or_foreign_file_is_ignored_and_replaced(vmfb, tmp_path, how):
    uri = f"vulkan://?pipeline_cache={tmp_path}"
    load_and_check(vmfb, uri)
    (path,) = cache_files(tmp_path)
    files = files_of(uri)
    path.write_bytes(_damage(path.read_bytes(), how))
    stats = load_and_check(vmfb, uri)
    assert stats["refused"] == 1 and stats["seeded"] == 0 and stats["written"] == 1, stats
    assert files.unpack(path.read_bytes(), bytes.fromhex(path.stem)) is not None
    assert cache_files(tmp_path) == [path]


def test_a_cache_that_cannot_be_written_costs_nothing_but_time(vmfb, tmp_path, capfd):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    stats = load_and_check(vmfb, f"vulkan://?pipeline_cache={blocker / 'cache'}")
    assert stats["unwritable"] == 1 and stats["written"] == 0 and stats["pipelines"] == 3
    assert capfd.readouterr().err == ""
    assert cache_files(tmp_path) == [] and blocker.read_text() == "not a directory"


def test_processes_loading_one_module_at_once_all_succeed(vmfb, tmp_path):
    case = CASE()
    inputs = case.inputs(np.random.default_rng())
    paths = []
    for i, x in enumerate(inputs):
        paths.append(str(tmp_path / f"in{i}.npy"))
        np.save(paths[-1], x)
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", CHILD.format(function=case.function),
                               str(vmfb), f"vulkan://?pipeline_cache={cache}",
                               str(tmp_path / f"out{k}.npz"), *paths],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for k in range(4):
        C.check(case, saved(tmp_path / f"out{k}.npz"), inputs)
    (path,) = cache_files(cache)  # one whole file, no temporary left
    files = files_of(f"vulkan://?pipeline_cache={cache}")
    assert files.unpack(path.read_bytes(), bytes.fromhex(path.stem)) is not None


@pytest.mark.parametrize("threads", ["1", "2", "7"])
def test_pipelines_made_on_any_number_of_threads_give_numpys_answer(vmfb, monkeypatch, threads):
    monkeypatch.setenv("PYREE_VULKAN_PIPELINE_THREADS", threads)
    stats = load_and_check(vmfb, "vulkan://?pipeline_cache=off")
    assert stats["pipelines"] == 3


def test_pipeline_threads_may_take_the_devices_lock(vmfb, monkeypatch):
    """The garbage collector may run a finalizer on a pipeline thread, and one that releases a
    buffer takes the device's lock: a load must not hold it while it waits for those threads
    (the hostile-module fuzz deadlocked that way)."""
    monkeypatch.setenv("PYREE_VULKAN_PIPELINE_THREADS", "3")
    device = rt.get_device("vulkan://?pipeline_cache=off", cache=False)
    driver = driver_device(device)
    create, took = driver.vk.vkCreateComputePipelines, []

    def create_as_a_finalizer_would(*args):
        if threading.current_thread() is threading.main_thread():
            time.sleep(0.2)   # leaves the other pipelines to the threads
        else:
            took.append(driver.lock.acquire(timeout=10))
            if took[-1]:
                driver.lock.release()
        return create(*args)

    driver.vk.vkCreateComputePipelines = create_as_a_finalizer_would
    try:
        case = CASE()
        module = rt.load_module(vmfb, device=device)
    finally:
        driver.vk.vkCreateComputePipelines = create
    assert took and all(took), took
    inputs = case.inputs(np.random.default_rng())
    C.check(case, C.results(module[case.function](*inputs)), inputs)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_a_pipeline_that_fails_is_named_and_nothing_is_left(vmfb, monkeypatch, threads):
    """One pipeline of three fails (as a driver out of memory would): the load fails naming
    that kernel and every pipeline, layout and module created for it is destroyed."""
    from pyree.hal.vulkan.symbols import ffi
    monkeypatch.setenv("PYREE_VULKAN_PIPELINE_THREADS", threads)
    device = rt.get_device("vulkan://?pipeline_cache=off", cache=False)
    vk = driver_device(device).vk
    create, destroy = vk.vkCreateComputePipelines, vk.vkDestroyPipeline
    made, destroyed, victim = [], [], []

    def failing_create(dev, cache, count, infos, allocator, out):
        names = [ffi.string(infos[i].stage.pName).decode() for i in range(count)]
        if not victim:
            victim.append(names[-1])
        result = create(dev, cache, count, infos, allocator, out)
        for i, name in enumerate(names):
            if name == victim[0]:
                if out[i]:
                    destroy(dev, out[i], ffi.NULL)
                out[i] = 0
                result = -1
            elif out[i]:
                made.append(out[i])
        return result

    def counting_destroy(dev, pipeline, allocator):
        destroyed.append(pipeline)
        destroy(dev, pipeline, allocator)

    vk.vkCreateComputePipelines, vk.vkDestroyPipeline = failing_create, counting_destroy
    try:
        with pytest.raises(rt.DriverError) as error:
            rt.load_module(vmfb, device=device)
    finally:
        vk.vkCreateComputePipelines, vk.vkDestroyPipeline = create, destroy
    assert (f"creating the compute pipeline of kernel '{victim[0]}' failed: "
            "VK_ERROR_OUT_OF_HOST_MEMORY") in str(error.value)
    assert sorted(made) == sorted(destroyed)
    assert driver_device(device).executables._by_code == {}


@pytest.mark.parametrize("uri, text", [
    ("vulkan://?pipeline_cahce=off", r"unknown vulkan device parameter\(s\) \['pipeline_cahce'\]; "
                                     r"accepted: pipeline_cache=off\|<directory>"),
])
def test_a_misspelt_device_parameter_is_refused_by_name(vulkan_device, uri, text):
    with pytest.raises(rt.DriverError, match=text):
        rt.get_device(uri, cache=False)


def test_a_bad_thread_count_is_refused_by_name(vmfb, monkeypatch):
    monkeypatch.setenv("PYREE_VULKAN_PIPELINE_THREADS", "many")
    with pytest.raises(rt.DriverError, match=r"PYREE_VULKAN_PIPELINE_THREADS='many': give a "
                                             r"positive number of threads"):
        rt.load_module(vmfb, device=rt.get_device("vulkan://?pipeline_cache=off", cache=False))
