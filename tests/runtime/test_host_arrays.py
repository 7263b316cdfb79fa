"""The runtime without numpy (issue 13): HostArray arguments and results, DeviceArray's numpy
operators imported on first use, the Record value classes, and what importing the runtime and
running the CLI do not import."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.element_types import BY_NAME
from pyree.runtime.hal.device import DeviceInfo
from pyree.runtime.records import Record
from pyree.runtime.vm.device_array import _OPERATORS
from pyree.runtime.vm.host_array import HostArray

from .module_factory import COLS, ROWS

F32, I32 = 0, 7
# Never needed by a process that runs a module with text in and out (each cost it 2-120 ms).
NOT_ON_THE_CLI_PATH = ("numpy", "ml_dtypes", "flatbuffers", "dataclasses", "inspect", "typing",
                       "_hashlib", "pathlib", "shutil", "platform")


@pytest.fixture
def module(arith_bytes):
    return rt.load_module(arith_bytes, device="local-sync")


def test_host_array_arguments_and_results_match_numpys(module, rng):
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    a.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    result = module.add(HostArray.from_numpy(a), HostArray.from_numpy(b))
    host = result.to_host_array()
    assert host.type == result.type and host.shape == (ROWS, COLS)
    np.testing.assert_array_equal(np.asarray(host), a + b)
    np.testing.assert_array_equal(host.to_numpy(), module.add(a, b).to_host())
    mixed = module.add(HostArray.from_numpy(a), b).to_host()  # one of each
    np.testing.assert_array_equal(mixed, a + b)
    assert host.values(5)[4] == float(a.flat[4] + b.flat[4])


def test_a_host_array_of_the_wrong_type_is_refused(module):
    wrong = HostArray.from_values([1], (ROWS, COLS), I32)
    with pytest.raises(rt.InvocationError, match="argument 1: expected 37x53xf32, got 37x53xi32"):
        module.add(HostArray.from_values([1.0], (ROWS, COLS), F32), wrong)


def test_host_array_values_round_trip_every_element_type():
    for name, values in [("f32", [1.5, -0.0, float("inf")]), ("f16", [65504.0, 2**-24, -2.0]),
                         ("f64", [0.1, 1e300, -1e-300]), ("i1", [True, False, True]),
                         ("i8", [-128, 0, 127]), ("ui64", [0, 2**64 - 1, 7]),
                         ("i64", [-(2**63), 2**63 - 1, 0]), ("ui16", [0, 65535, 1])]:
        host = HostArray.from_values(values, (3,), BY_NAME[name])
        assert host.values() == values, name
        assert np.asarray(host).tolist() == values, name
    for name in ("f32", "f16", "bf16"):
        with pytest.raises(OverflowError):
            HostArray.from_values([1e39], (1,), BY_NAME[name])


def test_a_splat_too_large_for_host_memory_says_how_large():
    with pytest.raises(MemoryError, match=r"cannot allocate 3\.64 TiB for a 100000x100000x100xf32"):
        HostArray.from_values([1.0], (100000, 100000, 100), F32)


def test_device_arrays_have_numpys_operators(module, rng):
    """The same operators as numpy.lib.mixins.NDArrayOperatorsMixin (imported on first use)."""
    from numpy.lib.mixins import NDArrayOperatorsMixin

    theirs = {n for n, v in vars(NDArrayOperatorsMixin).items()
              if n.startswith("__") and n.endswith("__") and callable(v)}
    assert {f"__{n}__" for n in _OPERATORS} == theirs
    a = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    r = module.add(a, a)
    host = r.to_host()
    np.testing.assert_array_equal(r + 1, host + 1)
    np.testing.assert_array_equal(1 - r, 1 - host)
    np.testing.assert_array_equal(-r, -host)
    np.testing.assert_array_equal(abs(r), abs(host))
    np.testing.assert_array_equal(r == host, np.ones(host.shape, bool))
    # BLAS may sum in another order for a copy at another alignment: equal within the
    # rounding bound of a dot product (cancellation makes a fixed tolerance flaky)
    bound = COLS * np.finfo(np.float32).eps * (abs(host) @ abs(host).T)
    assert np.all(abs((r @ host.T) - host @ host.T) <= bound)
    with pytest.raises(TypeError):
        hash(r)  # == is elementwise, as with the mixin
    with pytest.raises(TypeError):
        r += 1  # numpy cannot write into a DeviceArray, as before


def test_records_behave_like_frozen_dataclasses():
    t = rt.TensorType(F32, (2, 3))
    assert t == rt.TensorType(element_type=F32, shape=(2, 3)) and hash(t) == hash(rt.TensorType(F32, (2, 3)))
    assert t != rt.TensorType(I32, (2, 3)) and t != (F32, (2, 3))
    assert repr(t) == "TensorType(element_type=0, shape=(2, 3))" and str(t) == "2x3xf32"
    assert t.dtype == np.float32  # cached_property on a record
    with pytest.raises(AttributeError):
        t.shape = (1,)
    assert pickle.loads(pickle.dumps(t)) == t and copy.deepcopy(t) == t
    info = rt.DriverInfo("x", False, "why")
    assert info.driver is None and repr(info) == \
        "DriverInfo(name='x', available=False, reason='why', driver=None)"
    with pytest.raises(TypeError, match="missing argument 'name'"):
        DeviceInfo(uri="a")
    with pytest.raises(TypeError, match="without a default follows"):
        class Bad(Record):
            a: int = 0
            b: int


def _imported_by(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(sorted(sys.modules))"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = eval(proc.stdout.strip().splitlines()[-1])
    return sorted(n for n in names if n.split(".")[0] in NOT_ON_THE_CLI_PATH)


def test_importing_the_runtime_imports_none_of_them():
    assert _imported_by("import pyree.runtime") == []


@pytest.mark.parametrize("device", ["local-task", "local-sync"])
def test_running_text_through_the_cli_imports_none_of_them(arith_bytes, tmp_path, device):
    path = tmp_path / "arith.vmfb"
    path.write_bytes(arith_bytes)
    run = ("from pyree.runtime.tools.run_module import _run\n"
           f"assert _run(['--device={device}', '--module={path}', '--function=add',"
           f" '--input={ROWS}x{COLS}xf32=1.5', '--input={ROWS}x{COLS}xf32=-0',"
           f" '--print_max_element_count=4']) == 0")
    assert _imported_by(run) == []
