"""A loaded module does not follow its files: the module file, or a parameter file it reads in
place, rewritten in place (same size, new content) or truncated by another process after the
load leaves the module's answers as they were, and never kills it (SIGBUS). Each module runs in
a child process, so a signal shows as its exit status; this process changes the files between
its calls."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from parameter_cases import BATCH, IN, assert_matches, dense_mlir, parameter_mlir, weights
from pyree.compiler import compile_str
from pyree.compiler.parameters import write_parameters
from pyree.runtime.parameters import ParameterError, ParameterIndex

DEVICES = ["local-sync", "local-task"]
# Loads the module, then calls it once per line read from stdin, printing the result's bytes;
# the first line says whether any constant is a parameter file's pages used in place. With
# "fork", the calls are made by a process forked after the load (a pre-forking server's worker).
CHILD = """
import os
import sys
import numpy as np
import pyree.runtime as rt
module, parameters, device, x, fork = sys.argv[1:]
m = rt.load_module(module, device=device, parameters=[parameters] if parameters else None)
x = np.load(x)
size = max((len(getattr(c, "_source", b"")) for c in m.constants), default=0)
print(parameters != "" and size == os.path.getsize(parameters.split("=")[-1]), flush=True)
if fork == "fork" and (pid := os.fork()):
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) & 255)
for _ in iter(sys.stdin.readline, ""):
    print(m.main(x).to_host().tobytes().hex(), flush=True)
"""


def _write(path, w: dict[str, np.ndarray], mode: str = "wb") -> None:
    with open(path, mode) as f:
        write_parameters(f, path.suffix, [(k, "f32", v.shape, memoryview(v).cast("B"))
                                          for k, v in w.items()])


class _Child:
    """The module loaded in another process, called on demand."""

    def __init__(self, tmp_path, module: str, parameters: str, device: str, x: np.ndarray,
                 fork: bool = False):
        np.save(tmp_path / "x.npy", x)
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, module, parameters, device, str(tmp_path / "x.npy"),
             "fork" if fork else ""],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.in_place = self.process.stdout.readline().strip() == "True"

    def call(self) -> np.ndarray:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline().strip()
        assert line, self.finish()
        return np.frombuffer(bytes.fromhex(line), np.float32).reshape(BATCH, -1)

    def finish(self) -> str:
        self.process.stdin.close()
        stderr = self.process.stderr.read()
        assert self.process.wait(timeout=120) == 0, (self.process.returncode, stderr)
        return stderr


def _rewrite_then_truncate(child: _Child, path, rewrite) -> None:
    """Calls before, after ``rewrite`` (same size, new bytes) and after truncating ``path``:
    the same bytes each time, and a clean exit."""
    before = child.call()
    size = os.path.getsize(path)
    rewrite()
    assert os.path.getsize(path) == size
    np.testing.assert_array_equal(child.call(), before)
    os.truncate(path, 0)
    np.testing.assert_array_equal(child.call(), before)
    child.finish()
    return before


@pytest.mark.parametrize("device", DEVICES)
def test_a_module_file_changed_after_load(tmp_path, device):
    rng = np.random.default_rng()
    w = weights(rng)
    path = tmp_path / "mlp.vmfb"
    path.write_bytes(compile_str(dense_mlir(w)))
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    child = _Child(tmp_path, str(path), "", device, x)

    def rewrite():
        with open(path, "r+b") as f:
            f.write(os.urandom(os.path.getsize(path)))

    assert_matches(_rewrite_then_truncate(child, path, rewrite), x, w)


@pytest.mark.parametrize("device, fork", [("local-sync", False), ("local-task", False),
                                          ("local-sync", True)])
def test_a_parameter_file_used_in_place_changed_after_load(tmp_path, device, fork):
    """The file's pages are used in place under a lease: the rewrite waits until the module
    holds its own copy of what it uses, then goes ahead (parameters/lease.py); in a process
    forked after the load too."""
    rng = np.random.default_rng()
    w = weights(rng)
    params = tmp_path / "w.irpa"
    _write(params, w)
    module = tmp_path / "mlp.vmfb"
    module.write_bytes(compile_str(parameter_mlir(dict.fromkeys(w, "m"))))
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    child = _Child(tmp_path, str(module), f"m={params}", device, x, fork)
    assert child.in_place, "no lease on the parameter file: its tensors were copied at load"
    result = _rewrite_then_truncate(child, params, lambda: _write(params, weights(rng), "r+b"))
    assert_matches(result, x, w)


def test_a_parameter_file_that_cannot_be_leased_is_copied(tmp_path):
    """Open for writing elsewhere while the module loads, the file cannot be leased: its tensors
    are copied at load, and what happens to it later changes nothing."""
    rng = np.random.default_rng()
    w = weights(rng)
    params = tmp_path / "w.irpa"
    _write(params, w)
    module = tmp_path / "mlp.vmfb"
    module.write_bytes(compile_str(parameter_mlir(dict.fromkeys(w, "m"))))
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    with open(params, "r+b"):  # a writer elsewhere
        child = _Child(tmp_path, str(module), f"m={params}", "local-sync", x)
        assert not child.in_place
        result = _rewrite_then_truncate(child, params,
                                        lambda: _write(params, weights(rng), "r+b"))
    assert_matches(result, x, w)


def test_an_index_of_a_changed_file_is_refused(tmp_path):
    """A ParameterIndex outlives a module load: once its file changed, its entries no longer
    say where the tensors are, and resolving one is an error naming the file. (Opened for
    writing but unchanged, it still serves, by copies.)"""
    rng = np.random.default_rng()
    params = tmp_path / "w.irpa"
    _write(params, weights(rng))
    module = compile_str(parameter_mlir(dict.fromkeys(weights(rng), "m")))
    index = ParameterIndex([f"m={params}"])
    loaded = rt.load_module(module, device="local-sync", parameters=index)
    assert all(hasattr(c, "_source") for c in loaded.constants)
    open(params, "r+b").close()  # breaks the lease, changes nothing: the next load copies
    again = rt.load_module(module, device="local-sync", parameters=index)
    assert not any(hasattr(c, "_source") for c in again.constants)
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    np.testing.assert_array_equal(again.main(x).to_host(), loaded.main(x).to_host())
    _write(params, weights(rng), "r+b")
    message = f"parameter file '{params}' was changed"
    with pytest.raises(ParameterError, match=message):  # in place
        rt.load_module(module, device="local-sync", parameters=index)
    with pytest.raises(ParameterError, match=message):  # copied
        index.resolve("m", "b1", 0, [13], "constant")


def test_a_device_that_copies_parameters_reads_them_once(tmp_path, monkeypatch):
    """A device that cannot read host memory in place (the GPU drivers) gets each tensor read
    at load, never through a mapping: truncating the file afterwards changes nothing."""
    rng = np.random.default_rng()
    w = weights(rng)
    params = tmp_path / "w.safetensors"
    _write(params, w)
    device = rt.get_device("local-sync")
    monkeypatch.setattr(device, "imports_host", False)
    m = rt.load_module(compile_str(parameter_mlir(dict.fromkeys(w, "m"))), device=device,
                       parameters=[f"m={params}"])
    assert not any(hasattr(c, "_source") for c in m.constants)
    os.truncate(params, 0)
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    assert_matches(m.main(x).to_host(), x, w)
