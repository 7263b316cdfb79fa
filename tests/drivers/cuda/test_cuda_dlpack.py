"""On an NVIDIA GPU: DLPack both ways on the cuda driver (issue 12). Results go out as kDLCUDA
tensors over the runtime's own buffers, and CUDA tensors of other libraries come in as buffers
over their device pointers, both without a copy, in every command-buffer mode.

Needs no torch: pyree's own export is the producer for its import (through a wrapper, so the
DLPack path is taken, not the DeviceArray one). With torch (a CUDA build) or CuPy installed,
their tensors are tested too; those tests skip where the library or its GPU support is absent.
Modules: ``add_37x53`` (results in mapped memory) and ``add_64x1024`` (device memory) of
cases.py, from PYREE_CUDA_MODULE_DIR as the other GPU tests. The driver's side of it (hal.h
revision 3 in pyree.hal.cuda.device) is also run on any host, in test_cuda_driver_cpu.py.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_spy import record_imports  # noqa: E402
from test_cuda_gpu import MODES, module_bytes  # noqa: E402

CASES = {"add_37x53": (37, 53), "add_64x1024": (64, 1024)}


class Producer:
    """Any DLPack producer: forwards to ``source`` (a DeviceArray, a torch or CuPy tensor)."""

    def __init__(self, source):
        self.source, self.streams = source, []

    def __dlpack__(self, stream=None, **kwargs):
        self.streams.append(stream)
        return self.source.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self.source.__dlpack_device__()


@pytest.fixture
def imports(monkeypatch):
    """Records every (address, size) a call hands the device to read in place."""
    return record_imports(monkeypatch)


def _load(name, mode):
    import pyree.runtime as rt
    return rt.load_module(module_bytes(name), device=f"cuda://0?command_buffer={mode}").main


def _values(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    a.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    b.flat[:4] = [1.0, 2.0, 3.0, -0.0]
    return a, b


def _check(got, want):
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_results_go_out_and_come_back_in_place(name, mode, imports):
    """A result exported as kDLCUDA and passed back through DLPack is read at its own address;
    the producer is asked to order its work before the device's stream."""
    fn = _load(name, mode)
    rng = np.random.default_rng()
    for _ in range(3):  # the recorded command buffer replays on other buffers each time
        a, b = _values(rng, CASES[name])
        first = fn(a, b)
        assert first.__dlpack_device__() == (2, 0)
        producer = Producer(first)
        second = fn(producer, b)
        address = first.device.buffer_address(first.buffer)
        assert imports[-1] == (address, a.nbytes)
        stream = first.device.dlpack[2]
        assert stream and producer.streams == [stream]
        _check(second.to_host(), (a + b) + b)


class Capsule:
    """A consumer that took a capsule earlier and hands it on now."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, max_version=None):
        return self.capsule

    def __dlpack_device__(self):
        return (2, 0)


@pytest.mark.cuda
def test_an_exported_result_outlives_its_device_array():
    """The capsule holds the buffer until the consumer's deleter runs: a dropped DeviceArray's
    buffer goes to no later call while a consumer still has it."""
    from pyree.runtime.vm import dlpack
    fn = _load("add_64x1024", "graph")
    rng = np.random.default_rng()
    a, b = _values(rng, CASES["add_64x1024"])
    result = fn(a, b)
    capsule = result.__dlpack__(stream=1)  # a consumer on the legacy default stream
    address = result.device.buffer_address(result.buffer)
    del result
    gc.collect()
    for _ in range(10):
        other = fn(*_values(rng, CASES["add_64x1024"]))
        assert other.device.buffer_address(other.buffer) != address
    zeros = np.zeros(CASES["add_64x1024"], np.float32)
    _check(fn(Capsule(capsule), zeros).to_host(), (a + b) + zeros)
    del capsule
    gc.collect()
    assert not dlpack._EXPORTED  # the consumer's deleter ran (after a wait for its stream)
    _check(fn(a, b).to_host(), a + b)


@pytest.mark.cuda
def test_an_unconsumed_capsule_lets_go():
    from pyree.runtime.vm import dlpack
    fn = _load("add_37x53", "direct")
    a, b = _values(np.random.default_rng(), CASES["add_37x53"])
    capsule = fn(a, b).__dlpack__(stream=2)
    del capsule
    gc.collect()
    assert not dlpack._EXPORTED
    _check(fn(a, b).to_host(), a + b)


@pytest.mark.cuda
def test_host_tensors_are_copied_to_the_gpu(imports):
    fn = _load("add_37x53", "graph")
    a, b = _values(np.random.default_rng(), CASES["add_37x53"])
    _check(fn(Producer(a), b).to_host(), a + b)
    assert imports == []


@pytest.mark.cuda
def test_memory_not_on_the_device_is_refused():
    """A producer that claims device memory but hands over host memory."""
    import pyree.runtime as rt

    class Liar(Producer):
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None, **kwargs):  # numpy takes no stream
            return self.source.__dlpack__(**kwargs)

    fn = _load("add_37x53", "graph")
    a, b = _values(np.random.default_rng(), CASES["add_37x53"])
    with pytest.raises(rt.InvocationError, match="argument 0: the Liar says it is on DLPack "
                                                 "device \\(2, 0\\)"):
        fn(Liar(a), b)
    # A producer that refuses the device's stream (numpy takes none): its error, by name.
    with pytest.raises(rt.InvocationError, match="argument 0: the Producer's __dlpack__ failed: "
                                                 ".*stream"):
        fn(type("Producer", (Producer,), {"__dlpack_device__": lambda self: (2, 0)})(a), b)


# -- other libraries -----------------------------------------------------------------------

def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA support")
    return torch


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
def test_torch_cuda_tensors_both_ways(mode, imports):
    torch = _torch_cuda()
    fn = _load("add_64x1024", mode)
    a, b = _values(np.random.default_rng(), CASES["add_64x1024"])
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    ta = ta * 1  # pending work on torch's stream: the call must see its result
    result = fn(ta, tb)
    assert imports == [(ta.data_ptr(), a.nbytes), (tb.data_ptr(), b.nbytes)]
    t = torch.from_dlpack(result)
    assert t.device.type == "cuda" and t.data_ptr() == result.device.buffer_address(result.buffer)
    del result
    gc.collect()
    doubled = (t * 2).cpu().numpy()  # torch's kernel reads our buffer on torch's stream
    for _ in range(5):
        fn(tb, tb).to_host()
    _check(doubled, (a + b) * 2)
    _check(t.cpu().numpy(), a + b)


@pytest.mark.cuda
def test_cupy_arrays_both_ways(imports):
    cupy = pytest.importorskip("cupy")
    fn = _load("add_64x1024", "graph")
    a, b = _values(np.random.default_rng(), CASES["add_64x1024"])
    ca, cb = cupy.asarray(a), cupy.asarray(b)
    result = fn(ca, cb)
    assert imports == [(ca.data.ptr, a.nbytes), (cb.data.ptr, b.nbytes)]
    c = cupy.from_dlpack(result)
    assert c.data.ptr == result.device.buffer_address(result.buffer)
    _check(cupy.asnumpy(c), a + b)
