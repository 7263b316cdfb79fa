"""Donated arguments (``Function.__call__``'s ``donate``) on the CPU drivers: a result tied to an
argument (schema 1.10) takes a donated DeviceArray's buffer and is written in place, the same
buffer call after call; the donated array is spent, and says so; where the buffer cannot be
taken (the array is passed twice, another call still reads it, it is not this module's, it is a
numpy array) the argument is copied as without ``donate`` and stays the caller's. Threads
donating their own chains to one module at once, and traced calls, get numpy's answers."""

from __future__ import annotations

import threading

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from tools.tool_process import run_tool

DEVICES = ["local-task", "local-sync"]
# cache[:, p:p+2] = rows 0-1 of ``new`` + 1; ``new`` also returned, doubled
PROGRAM = """
func.func @main(%cache: tensor<5x11x3xf32>, %new: tensor<5x11x3xf32>, %pos: tensor<i64>)
    -> (tensor<5x11x3xf32>, tensor<5x11x3xf32>) {
  %s = tensor.extract_slice %new[0, 0, 0] [5, 2, 3] [1, 1, 1]
      : tensor<5x11x3xf32> to tensor<5x2x3xf32>
  %one = arith.constant dense<1.0> : tensor<5x2x3xf32>
  %u = arith.addf %s, %one : tensor<5x2x3xf32>
  %p = tensor.extract %pos[] : tensor<i64>
  %i = arith.index_cast %p : i64 to index
  %r = tensor.insert_slice %u into %cache[0, %i, 0] [5, 2, 3] [1, 1, 1]
      : tensor<5x2x3xf32> into tensor<5x11x3xf32>
  %d = arith.addf %new, %new : tensor<5x11x3xf32>
  return %r, %d : tensor<5x11x3xf32>, tensor<5x11x3xf32>
}"""


@pytest.fixture(scope="module")
def module_bytes() -> bytes:
    return compile_str(PROGRAM, target_backends=["llvm-cpu"])


def reference(cache: np.ndarray, new: np.ndarray, pos: int) -> np.ndarray:
    out = cache.copy()
    for t in range(cache.shape[1]):
        if 0 <= t - pos < 2:
            out[:, t] = new[:, t - pos] + np.float32(1)
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_a_donated_chain_writes_one_buffer_in_place(module_bytes, device):
    module = rt.load_module(module_bytes, device=device)
    assert module.main.tied_results == [0, None]
    rng = np.random.default_rng(1)
    want = rng.standard_normal((5, 11, 3)).astype(np.float32)
    cache, _ = module.main(want, want, np.int64(0))
    want = reference(want, want, 0)
    buffer = cache.buffer
    for step in range(40):
        new = rng.standard_normal((5, 11, 3)).astype(np.float32)
        pos = int(rng.integers(-2, 12))
        spent = cache
        cache, doubled = module.main(cache, new, np.int64(pos), donate=(0,))
        want = reference(want, new, pos)
        assert cache.buffer is buffer  # the same bytes, written in place
        assert "donated to 'main'" in repr(spent)
        if step % 8 == 0:
            np.testing.assert_array_equal(cache.to_host(), want)
            np.testing.assert_array_equal(doubled.to_host(), new + new)
    np.testing.assert_array_equal(cache.to_host(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_a_donated_array_is_spent(module_bytes, device):
    module = rt.load_module(module_bytes, device=device)
    x = np.ones((5, 11, 3), np.float32)
    first, _ = module.main(x, x, np.int64(3))
    module.main(first, x, np.int64(4), donate=True)
    for use in (first.to_host, lambda: np.asarray(first),
                lambda: module.main(first, x, np.int64(0))):
        with pytest.raises(rt.InvocationError, match="donated to a call of 'main'"):
            use()


@pytest.mark.parametrize("device", DEVICES)
def test_what_cannot_be_donated_is_copied_and_kept(module_bytes, device):
    module = rt.load_module(module_bytes, device=device)
    other = rt.load_module(module_bytes, device=device)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 11, 3)).astype(np.float32)
    kept = x.copy()
    mine, _ = module.main(x, x, np.int64(0))
    theirs, _ = other.main(x, x, np.int64(0))
    base = reference(x, x, 0)
    cases = {
        "passed twice": lambda: module.main(mine, mine, np.int64(5), donate=True),
        "another module's": lambda: module.main(theirs, x, np.int64(5), donate=True),
        "a numpy array": lambda: module.main(x, x, np.int64(5), donate=True),
        "a host copy": lambda: module.main(rt.asdevicearray(module.device, base), x,
                                           np.int64(5), donate=True),
    }
    for name, call in cases.items():
        got, _ = call()
        np.testing.assert_array_equal(mine.to_host(), base, err_msg=name)
        np.testing.assert_array_equal(theirs.to_host(), base, err_msg=name)
        np.testing.assert_array_equal(x, kept, err_msg=name)
        update = base if name == "passed twice" else x
        start = x if name == "a numpy array" else base
        np.testing.assert_array_equal(got.to_host(), reference(start, update, 5), err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_an_array_another_call_still_reads_is_copied(module_bytes, device):
    module = rt.load_module(module_bytes, device=device)
    x = np.arange(5 * 11 * 3, dtype=np.float32).reshape(5, 11, 3)
    cache, _ = module.main(x, x, np.int64(0))
    reader = module.main(x, cache, np.int64(2))  # not waited: its call still reads ``cache``
    assert cache.readers
    got, _ = module.main(cache, x, np.int64(7), donate=True)
    np.testing.assert_array_equal(cache.to_host(), reference(x, x, 0))
    np.testing.assert_array_equal(got.to_host(), reference(reference(x, x, 0), x, 7))
    np.testing.assert_array_equal(reader[0].to_host(), reference(x, reference(x, x, 0), 2))


def test_threads_donate_their_own_chains_to_one_module(module_bytes):
    module = rt.load_module(module_bytes, device="local-task")
    failures = []

    def chain(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            want = rng.standard_normal((5, 11, 3)).astype(np.float32)
            cache, _ = module.main(want, want, np.int64(1))
            want = reference(want, want, 1)
            for _ in range(30):
                new = rng.standard_normal((5, 11, 3)).astype(np.float32)
                pos = int(rng.integers(0, 10))
                cache, _ = module.main(cache, new, np.int64(pos), donate=(0,))
                want = reference(want, new, pos)
            np.testing.assert_array_equal(cache.to_host(), want)
        except Exception as e:  # reported below, in the test's own thread
            failures.append(e)

    threads = [threading.Thread(target=chain, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


def test_a_traced_call_donates_too(module_bytes):
    module = rt.load_module(module_bytes, device="local-task")
    x = np.full((5, 11, 3), 2.0, np.float32)
    cache, _ = module.main(x, x, np.int64(0))
    with rt.trace():
        got, _ = module.main(cache, x, np.int64(9), donate=(0,))
        got.wait()
    assert got.buffer is not None and "donated" in repr(cache)
    np.testing.assert_array_equal(got.to_host(), reference(reference(x, x, 0), x, 9))


def test_the_tools_show_and_run_a_tied_result(module_bytes, tmp_path):
    """pyree-dump-module names the tie; pyree-run-module, which donates nothing, prints the
    copy written into."""
    path = tmp_path / "tied.vmfb"
    path.write_bytes(module_bytes)
    proc = run_tool("dump_module", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "    result 0: tied to argument 0 (updated in place where the caller donates it)" \
        in proc.stdout.splitlines()
    proc = run_tool("run_module", f"--module={path}", "--function=main",
                    "--input=5x11x3xf32=4", "--input=5x11x3xf32=2", "--input=i64=9")
    assert proc.returncode == 0, proc.stderr
    want = reference(np.full((5, 11, 3), 4, np.float32), np.full((5, 11, 3), 2, np.float32), 9)
    first = proc.stdout.split("result[0]:")[1].split("result[1]:")[0]
    assert first.count("3 3 3") == 5 * 2 and first.count("4 4 4") == 5 * 9, proc.stdout
    assert want[0, 9, 0] == 3


def test_a_large_host_array_read_in_place_is_copied_not_written():
    """On the CPU drivers a large numpy argument is read in place (vm/call_plan.py
    IMPORT_MIN_BYTES): for a tied argument it is copied into the result, and the caller's
    array keeps its bytes."""
    text = PROGRAM.replace("5x11x3", "5x1100x30").replace("5x2x3", "5x2x30") \
        .replace("[5, 2, 3]", "[5, 2, 30]")
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    assert module.main.tied_results == [0, None]
    rng = np.random.default_rng(4)
    cache = rng.standard_normal((5, 1100, 30)).astype(np.float32)  # 660 KB: read in place
    new = rng.standard_normal((5, 1100, 30)).astype(np.float32)
    kept = cache.copy()
    got, _ = module.main(cache, new, np.int64(700))
    want = cache.copy()
    want[:, 700:702] = new[:, :2] + np.float32(1)
    np.testing.assert_array_equal(got.to_host(), want)
    np.testing.assert_array_equal(cache, kept)
