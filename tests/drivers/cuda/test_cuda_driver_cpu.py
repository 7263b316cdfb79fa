"""CPU-only: the CUDA driver's pieces that need no GPU: a host without libcuda, the loading and
error paths over a stand-in libcuda, the declared C table against cuda.h (through cuda-python's
copy of it, where installed), and the DLPack entries against a recorder."""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pyree.runtime as rt
import pytest
from pyree.hal.cuda import symbols
from pyree.hal.cuda.device import CudaDevice, ExternalBuffer, parse_device_path
from pyree.hal.cuda.executable import cubin_fits
from pyree.hal.cuda.ffi_build import DECLARATIONS
from pyree.hal.cuda.symbols import SYMBOLS, ffi
from pyree.runtime.hal.python_driver import HalError, PythonDevice
from tooling import missing, require_module, require_tool

no_libcuda = pytest.mark.skipif(ctypes.util.find_library("cuda") is not None,
                                reason="this host has libcuda")


def _cuda_line(env: dict | None = None) -> str:
    """The cuda line of ``pyree-run-module --list_drivers``."""
    proc = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module", "--list_drivers"],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    assert "local-task" in proc.stdout
    return next(line for line in proc.stdout.splitlines() if line.strip().startswith("cuda:"))


@no_libcuda
def test_list_drivers_shows_cuda_unavailable_with_the_reason():
    line = _cuda_line()
    assert "unavailable" in line.lower() and "libcuda.so.1 could not be loaded" in line


@no_libcuda
def test_cpu_devices_still_work_when_cuda_is_unavailable():
    import numpy as np
    infos = {d.name: d for d in rt.list_drivers()}
    assert not infos["cuda"].available
    buf = rt.get_device("local-task").allocate(16)
    buf.write(0, np.arange(4, dtype=np.float32))
    assert buf.read(0, 16) == np.arange(4, dtype=np.float32).tobytes()


def test_importing_the_driver_imports_neither_cuda_python_nor_pycparser():
    code = ("import sys, pyree.hal.cuda.device, pyree.hal.cuda.instance\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cuda', 'pycparser')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_command_buffer_mode_from_uri_or_environment(monkeypatch):
    monkeypatch.delenv("PYREE_CUDA_COMMAND_BUFFER_MODE", raising=False)
    assert parse_device_path("") == ("", "graph")
    assert parse_device_path("0?command_buffer=stream") == ("0", "stream")
    monkeypatch.setenv("PYREE_CUDA_COMMAND_BUFFER_MODE", "direct")
    assert parse_device_path("GPU-1234") == ("GPU-1234", "direct")
    assert parse_device_path("0?command_buffer=graph") == ("0", "graph")


@pytest.mark.parametrize("path, message", [
    ("0?command_buffer=fast", "unknown command buffer mode 'fast'"),
    ("0?streams=2", "unknown cuda device parameter"),
])
def test_bad_device_parameters_are_named(path, message):
    with pytest.raises(HalError, match=message):
        parse_device_path(path)


@pytest.mark.parametrize("arch, cc, fits", [
    ("sm_90", (9, 0), True), ("sm_80", (8, 6), True), ("sm_86", (8, 0), False),
    ("sm_80", (9, 0), False), ("sm_90a", (9, 0), True), ("sm_90a", (9, 1), False), ("", (9, 0), False),
    ("sm_100", (10, 0), True), ("sm_100", (12, 0), False), ("sm_100a", (10, 0), True),
    ("sm_120", (12, 0), True), ("sm_120", (12, 1), True), ("sm_120", (10, 0), False),
    ("sm_90", (10, 0), False),
])
def test_cubin_is_used_only_where_it_runs(arch, cc, fits):
    assert cubin_fits(arch, *cc) is fits


def test_symbol_table_puts_error_lookups_first_and_has_no_duplicates():
    assert SYMBOLS[:2] == ("cuGetErrorName", "cuGetErrorString")
    assert len(set(SYMBOLS)) == len(SYMBOLS)
    assert {"cuLaunchKernel", "cuGraphLaunch", "cuStreamWaitValue64", "cuMemAllocFromPoolAsync"} <= set(SYMBOLS)


# -- the table against cuda.h ----------------------------------------------------------------

def _arguments(text: str) -> list[str]:
    """``const char **pStr, int len`` -> ['const char**', 'int']: the types, names dropped."""
    types = []
    for argument in filter(None, (a.strip() for a in " ".join(text.split()).split(","))):
        kind = re.match(r"(.*?)\w+(\[\d*\])?$", argument).group(1)
        types.append(re.sub(r"\s*\*\s*", "*", kind).strip())
    return types


def _declared() -> dict[str, list[str]]:
    """Our table: entry point -> argument types, for the PFN types and the two dlsym'd ones."""
    table = {name: _arguments(args) for name, args in
             re.findall(r"\(\*PFN_(\w+)\)\((.*?)\);", DECLARATIONS, re.S)}
    for name, args in re.findall(r"^CUresult (\w+)\((.*?)\);", DECLARATIONS, re.S | re.M):
        table[name.removesuffix("_v2")] = _arguments(args)  # cuda.h's name for cuGetProcAddress_v2
    return table


def _cuda_typedefs() -> Path | None:
    """The CUDA toolkit's cudaTypedefs.h: $CUDA_HOME's, else the newest under /usr/local."""
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda",
             *sorted(map(str, Path("/usr/local").glob("cuda-*")), reverse=True)]
    return next((Path(h, "include", "cudaTypedefs.h") for h in homes
                 if h and Path(h, "include", "cudaTypedefs.h").is_file()), None)


def test_each_signature_is_what_get_proc_address_returns():
    """cudaTypedefs.h lists every version of every entry point (``PFN_cuMemGetInfo_v3020``...):
    asked for a name at TABLE_VERSION (or NEWER's version), cuGetProcAddress returns its newest
    version not above it (the ``_ptsz`` ones only when asked for per-thread streams). Header
    macros are no guide: cuda.h's cuGraphInstantiate is cuGraphInstantiateWithFlags, a name of
    its own here."""
    header = _cuda_typedefs()
    if header is None:
        missing("no CUDA toolkit headers (cudaTypedefs.h): set CUDA_HOME")
    versions: dict[str, dict[int, list[str]]] = {}
    for name, version, stream, args in re.findall(
            r"typedef\s+CUresult\s*\(CUDAAPI \*PFN_(cu\w+?)_v(\d+)(_pt[sd][sz])?\)\((.*?)\);",
            header.read_text(), re.S):
        if not stream:  # cuda.h's versioned type names (CUdevice_v1) are its plain ones
            versions.setdefault(name, {})[int(version)] = _arguments(re.sub(r"(\w)_v\d+\b", r"\1",
                                                                            args))
    for name, types in _declared().items():
        asked = symbols.NEWER.get(name, symbols.TABLE_VERSION)
        chosen = max(v for v in versions[name] if v <= asked)
        assert types == versions[name][chosen], (name, chosen)


def test_each_signature_is_cuda_hs():
    """cuda-python's cydriver.pxd is cuda.h's prototypes for its own ABI (13.x here, where none of
    these entry points differs from 12.0's), under cuda.h's names: its cuGraphInstantiate is the
    macro for cuGraphInstantiateWithFlags."""
    spec = importlib.util.find_spec("cuda.bindings") if importlib.util.find_spec("cuda") else None
    if spec is None:
        missing("cuda-python (cuda-bindings) is not installed: its cydriver.pxd is the reference")
    pxd = (Path(spec.origin).parent / "cydriver.pxd").read_text()
    reference = {name: _arguments(args) for name, args in
                 re.findall(r"^cdef CUresult (cu\w+)\((.*?)\) except", pxd, re.M)}
    declared = _declared()
    assert len(declared) == len(SYMBOLS) + 2
    for name, types in declared.items():
        assert types == reference[name.replace("InstantiateWithFlags", "Instantiate")], name


def test_each_constant_is_cuda_hs():
    driver = require_module("cuda.bindings.driver")
    values = {name: value for name, value in vars(driver).items() if isinstance(value, int)}
    for enum in (v for v in vars(driver).values() if isinstance(v, type) and hasattr(v, "__members__")):
        values.update((name, int(member)) for name, member in enum.__members__.items())
    constants = {n: v for n, v in vars(symbols).items() if re.match(r"CU(DA)?_[A-Z_0-9]+$", n)}
    assert len(constants) >= 19
    for name, value in constants.items():
        assert values[name] == value, name


def test_structs_are_laid_out_as_in_cuda_h():
    """CUmemPoolProps: 4 ints, the Windows pointer at 16, 64 bytes after it (cuda.h 12.0's
    reserved[64]; 12.2+ spends the first 10 on maxSize and usage, whose zero is the default)."""
    assert ffi.sizeof("CUmemPoolProps") == 88
    assert ffi.offsetof("CUmemPoolProps", "location") == 8
    assert ffi.offsetof("CUmemPoolProps", "win32SecurityAttributes") == 16
    assert ffi.sizeof("CUgraphExecUpdateResultInfo") == 24 and ffi.sizeof("CUuuid") == 16


# -- loading and error paths over a stand-in libcuda ------------------------------------------

_FAKE_LIBCUDA = r"""
/* A stand-in libcuda.so.1 for the driver's loading paths: the version, cuGetProcAddress_v2 over
   every name (except those in $FAKE_CUDA_MISSING, and only for the CUDA 12.0 ABI with default
   flags), and what the driver calls before it has a device: cuInit returns $FAKE_CUDA_INIT and
   appends the CUDA_DEVICE_MAX_CONNECTIONS it finds to $FAKE_CUDA_INIT_LOG, cuDeviceGetCount
   counts 0. Anything else it resolves returns CUDA_ERROR_NOT_SUPPORTED. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
static const char *env(const char *name, const char *fallback) {
  const char *value = getenv(name); return value ? value : fallback; }
int cuDriverGetVersion(int *version) { *version = atoi(env("FAKE_CUDA_VERSION", "12080")); return 0; }
static int error_name(int err, const char **out) {
  *out = err == 100 ? "CUDA_ERROR_NO_DEVICE" : NULL; return *out ? 0 : 1; }
static int error_string(int err, const char **out) {
  *out = err == 100 ? "no CUDA-capable device is detected" : NULL; return *out ? 0 : 1; }
static int init(unsigned flags) {
  (void)flags;
  const char *log = getenv("FAKE_CUDA_INIT_LOG");
  FILE *f = log ? fopen(log, "a") : NULL;
  if (f) { fputs(env("CUDA_DEVICE_MAX_CONNECTIONS", "unset"), f); fclose(f); }
  return atoi(env("FAKE_CUDA_INIT", "0"));
}
static int device_count(int *count) { *count = 0; return 0; }
static int not_supported(void) { return 801; }
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags,
                        int *status) {
  char token[128];
  snprintf(token, sizeof token, ",%s,", symbol);
  char missing[4096];
  snprintf(missing, sizeof missing, ",%s,", env("FAKE_CUDA_MISSING", ""));
  *pfn = NULL;
  if (version != 12000 || flags != 0) { *status = 2; return 500; }
  if (strstr(missing, token)) { *status = 1; return 500; }
  *status = 0;
  *pfn = !strcmp(symbol, "cuGetErrorName") ? (void *)error_name
       : !strcmp(symbol, "cuGetErrorString") ? (void *)error_string
       : !strcmp(symbol, "cuInit") ? (void *)init
       : !strcmp(symbol, "cuDeviceGetCount") ? (void *)device_count : (void *)not_supported;
  return 0;
}
"""


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory) -> str:
    gcc = require_tool("gcc")
    folder = tmp_path_factory.mktemp("fake_libcuda")
    (folder / "fake.c").write_text(_FAKE_LIBCUDA)
    subprocess.run([gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(folder / "libcuda.so.1"),
                    str(folder / "fake.c")], check=True)
    return str(folder / "libcuda.so.1")


@pytest.mark.parametrize("env, reason", [
    ({"FAKE_CUDA_MISSING": "cuGraphExecUpdate,cuMemPoolTrimTo"},
     "the CUDA driver (version 12.8) lacks entry points the HAL needs: cuMemPoolTrimTo, "
     "cuGraphExecUpdate"),
    ({"FAKE_CUDA_INIT": "100"}, "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"),
    ({"FAKE_CUDA_INIT": "999"}, "cuInit: CUresult 999: unknown error"),
    ({}, "the NVIDIA driver reports no CUDA devices"),
    ({"FAKE_CUDA_VERSION": "11080"}, "(version 11080) is older than CUDA 12.0"),
])
def test_loading_errors_name_the_cause(fake_libcuda, env, reason):
    line = _cuda_line({"PYREE_CUDA_LIBRARY": fake_libcuda, **env})
    assert "unavailable" in line and "UNAVAILABLE" in line and reason in line, line


@pytest.mark.parametrize("command, env, seen", [
    ("cli", {}, "1"),  # a tool process: one hardware queue
    ("cli", {"CUDA_DEVICE_MAX_CONNECTIONS": "4"}, "4"),  # the user's choice stands
    ("api", {}, "unset"),  # a library process keeps CUDA's default
])
def test_cuda_starts_with_one_hardware_queue_only_in_tool_processes(fake_libcuda, tmp_path,
                                                                     command, env, seen):
    """And cuInit runs once: begun by the driver's entry point (startup.py), joined by its use."""
    log = tmp_path / "init.log"
    clean = {k: v for k, v in os.environ.items()
             if k not in ("CUDA_DEVICE_MAX_CONNECTIONS", "PYREE_TOOL_PROCESS")}
    env = {**clean, "PYREE_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_INIT_LOG": str(log), **env}
    argv = ["-m", "pyree.runtime.tools.run_module", "--list_drivers"] if command == "cli" else \
        ["-c", "import pyree.runtime as rt; rt.list_drivers()"]
    subprocess.run([sys.executable, *argv], check=True, env=env, capture_output=True)
    assert log.read_text() == seen


def test_cuinit_starts_before_the_driver_kit_is_imported(fake_libcuda, tmp_path):
    """The entry point starts cuInit having imported only the table (startup.py): the driver kit
    and the device's modules come after, beside it."""
    code = ("import sys; from pyree.hal.cuda import startup; startup.begin()\n"
            "print(sorted(m for m in ('pyree.runtime.hal.python_driver', 'pyree.hal.cuda.instance',"
            " 'pyree.hal.cuda.device') if m in sys.modules)); startup.finish()")
    log = tmp_path / "init.log"
    env = {**os.environ, "PYREE_CUDA_LIBRARY": fake_libcuda, "FAKE_CUDA_INIT_LOG": str(log)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]"] and log.exists()


def test_a_library_without_the_resolver_is_named():
    line = _cuda_line({"PYREE_CUDA_LIBRARY": "libc.so.6"})
    assert "the CUDA driver libc.so.6 lacks an entry point the HAL needs (CUDA 12.0 or newer)" in line


# -- the DLPack entries (hal.h revision 3), libcuda replaced by a recorder ---------------------

class _RecordingCuda:
    """The entry points the DLPack entries call, recorded; pointers 0x7000 and 0x9000 are on
    devices 1 and 0, any other is no CUDA memory."""

    ORDINALS = {0x7000: 1, 0x9000: 0}

    def __init__(self):
        self.calls = []

    def cuCtxSetCurrent(self, context):
        return symbols.CUDA_SUCCESS

    def cuPointerGetAttribute(self, data, attribute, pointer):
        assert attribute == symbols.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        if pointer not in self.ORDINALS:
            return 1  # CUDA_ERROR_INVALID_VALUE
        ffi.cast("int *", data)[0] = self.ORDINALS[pointer]
        return symbols.CUDA_SUCCESS

    def cuEventCreate(self, out, flags):
        assert flags == symbols.CU_EVENT_DISABLE_TIMING
        out[0] = ffi.cast("CUevent", 0xE7)
        return symbols.CUDA_SUCCESS

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", symbols.address(event), symbols.address(stream)))
        return symbols.CUDA_SUCCESS

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", symbols.address(stream), symbols.address(event)))
        return symbols.CUDA_SUCCESS

    def cuEventDestroy(self, event):
        self.calls.append(("destroy", symbols.address(event)))
        return symbols.CUDA_SUCCESS


def test_cuda_driver_dlpack_entries_without_a_gpu():
    cu = _RecordingCuda()
    device = object.__new__(CudaDevice)
    PythonDevice.__init__(device)
    device.cu, device.ordinal, device.name = cu, 1, "GPU 1"
    device.stream = ffi.cast("CUstream", 0x5150)
    device.context, device._local = None, threading.local()
    device.allocator = device.mapped = None  # an external buffer must reach neither

    assert device.dlpack_device() == (2, 1, 0x5150)
    buffer = device.import_device(0x7000, 4096)
    assert type(buffer) is ExternalBuffer and (buffer.ptr, buffer.size) == (0x7000, 4096)
    assert device.buffer_address(buffer) == 0x7000
    device.release_buffer(buffer)  # never freed by the driver
    with pytest.raises(HalError, match=r"memory at 0x9000 is on device 0, not on GPU 1"):
        device.import_device(0x9000, 16)
    with pytest.raises(HalError, match=r"memory at 0x1234 is on no CUDA device"):
        device.import_device(0x1234, 16)
    device.stream_wait(1)  # the consumer's stream (here CUDA's legacy default stream)
    assert cu.calls == [("record", 0xE7, 1), ("wait", 0x5150, 0xE7), ("destroy", 0xE7)]


# -- hostile modules: what the driver checks before it hands code or a launch to CUDA ---------

class _ParamInfo:
    """A libcuda whose cuFuncGetParamInfo reports ``sizes`` (or which lacks it: None)."""

    def __init__(self, sizes, version=12080):
        self.version = version
        self.cuFuncGetParamInfo = None if sizes is None else self._info
        self.sizes = sizes

    def _info(self, function, index, offset, size):
        if index >= len(self.sizes):
            return symbols.CUDA_ERROR_INVALID_VALUE
        offset[0], size[0] = 8 * index, self.sizes[index]
        return symbols.CUDA_SUCCESS


def test_kernel_parameters_come_from_the_code_and_a_dispatch_must_give_them_all():
    from pyree.hal.cuda.executable import Kernel, parameter_sizes
    from pyree.runtime.hal.python_driver import Export
    assert parameter_sizes(_ParamInfo([8, 8, 4]), None, "k") == (8, 8, 4)
    kernel = Kernel(None, Export("k", (1, 1, 1), (64, 1, 1), 0, (16, 16)), (8, 8, 4))
    kernel.check_arguments(2, 1, "command 0 (dispatch)")
    # the dispatch's own bindings count, not the export's: a module whose layout and dispatch
    # were both shortened must not pass on a kernel cached for the unshortened layout
    for bindings, push in ((2, 0), (2, 2), (1, 1)):
        with pytest.raises(HalError, match=f"command 0 \\(dispatch\\): kernel 'k' takes 3 "
                                           f"parameters, the dispatch gives {bindings} bindings "
                                           f"and {push} push constants"):
            kernel.check_arguments(bindings, push, "command 0 (dispatch)")


def test_a_driver_without_cufuncgetparaminfo_is_named():
    from pyree.hal.cuda.executable import parameter_sizes
    with pytest.raises(HalError, match=r"the CUDA driver \(12.2\) lacks cuFuncGetParamInfo \(CUDA "
                                       r"12.4\), which the HAL needs to check kernel 'k''s"):
        parameter_sizes(_ParamInfo(None, 12020), None, "k")


def test_cut_cubins_and_ptx_are_refused_before_the_driver_sees_them(tmp_path):
    from pyree.hal.cuda.executable import check_image
    from pyree.runtime.hal.python_driver import ExecutableParams, Export
    ptxas = require_tool("ptxas", env="PYREE_PTXAS")
    ptx = (b".version 7.8\n.target sm_90\n.address_size 64\n"
           b".visible .entry k(.param .u64 a)\n{\n\tret;\n}\n")
    (tmp_path / "k.ptx").write_bytes(ptx)
    subprocess.run([ptxas, "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                   check=True)
    cubin = (tmp_path / "k.cubin").read_bytes()
    export = Export("k", (1, 1, 1), (1, 1, 1), 0, (8,))

    def params(code, alt):
        return ExecutableParams("cuda", "sm_90", code, "sm_90", alt, (export,))

    check_image(params(ptx, cubin), cubin=True)
    check_image(params(ptx, cubin), cubin=False)
    with pytest.raises(HalError, match="the CUDA executable's cubin sm_90 is refused: .*cut short"):
        check_image(params(ptx, cubin[:64]), cubin=True)
    with pytest.raises(HalError, match="PTX for sm_90 is refused: the PTX's braces do not balance"):
        check_image(params(ptx[:-3], cubin), cubin=False)
