"""Python values as arguments (vm/conversion.py): converted where no value changes, refused
with an InvocationError naming the argument otherwise -- a float for an integer, an integer out
of its element type's range -- as numpy arrays of the wrong dtype are; and the same inputs
through pyree-run-module's text are one clean error line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str

SOURCE = """
func.func @f(%x: tensor<3xi8>, %n: tensor<i32>, %y: tensor<2xf32>, %b: tensor<2xi1>)
    -> (tensor<3xi8>, tensor<i32>, tensor<2xf32>, tensor<2xi1>) {
  return %x, %n, %y, %b : tensor<3xi8>, tensor<i32>, tensor<2xf32>, tensor<2xi1>
}
"""
GOOD = ([1, -128, 127], -7, [2.5, -0.0], [True, False])


@pytest.fixture(scope="module")
def vmfb(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("args") / "f.vmfb"
    path.write_bytes(compile_str(SOURCE))
    return str(path)


@pytest.fixture(scope="module")
def f(vmfb):
    return rt.load_module(vmfb, device="local-sync").f


def test_python_values_that_convert_exactly(f):
    x, n, y, b = (r.to_host() for r in f(*GOOD))
    np.testing.assert_array_equal(x, np.array([1, -128, 127], np.int8))
    assert n.dtype == np.int32 and n == -7
    assert y.dtype == np.float32 and y[0] == 2.5 and np.signbit(y[1])
    np.testing.assert_array_equal(b, [True, False])
    # ints (and bools) into floats, numpy scalars of a kind that fits, NaN and inf
    _, n, y, _ = (r.to_host() for r in f([0, 0, 0], np.int64(2**31 - 1), [3, np.inf], [True, 0 > 1]))
    assert n == 2**31 - 1 and y[0] == 3.0 and y[1] == np.inf


@pytest.mark.parametrize("index, value, message", [
    (1, 2.5, "argument 1: expected i32, got float64 values, which i32 cannot hold exactly "
             "(give integers)"),
    (1, 3.0, "argument 1: expected i32, got float64 values"),
    (1, np.float32(3), "argument 1: expected i32, got float32 values"),
    (0, [1, 2.5, 3], "argument 0: expected 3xi8, got float64 values"),
    (0, [1, 2, 128], "argument 0: expected 3xi8, got a value outside i8's range [-128, 127]"),
    (0, [1, 2, -129], "argument 0: expected 3xi8, got a value outside i8's range [-128, 127]"),
    (1, 2**31, "argument 1: expected i32, got a value outside i32's range "
               "[-2147483648, 2147483647]"),
    (1, -2**63, "argument 1: expected i32, got a value outside i32's range"),
    (1, 2**64, "argument 1: expected i32, got a value outside i32's range"),
    (1, 1 + 2j, "argument 1: expected i32, got a complex holding complex128 values"),
    (3, [1, 0], "argument 3: expected 2xi1, got int64 values, which i1 cannot hold exactly "
                "(give booleans)"),
    (2, [[1.0], [2.0, 3.0]], "argument 2: expected 2xf32, got a list that is not a rectangular"),
    (2, [1.0, 2.0, 3.0], "argument 2: expected 2xf32, got 3xf32"),
])
def test_python_values_that_would_change_are_refused(f, index, value, message):
    args = list(GOOD)
    args[index] = value
    with pytest.raises(rt.InvocationError) as error:
        f(*args)
    assert str(error.value).startswith(f"function 'f' {message}"), str(error.value)


@pytest.mark.parametrize("flag, message", [
    ("3xi8=[1 2 128]", "128 is out of range for i8 [-128, 127]"),
    ("i32=2147483648", "2147483648 is out of range for i32 [-2147483648, 2147483647]"),
    ("i32=2.5", "'2.5' is not an integer"),
])
def test_the_same_through_the_cli(vmfb, flag, message):
    inputs = {"i8": "3xi8=[1 2 3]", "i32": "i32=1"}
    inputs[flag.split("=")[0].split("x")[-1]] = flag
    proc = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module",
                           f"--module={vmfb}", f"--input={inputs['i8']}", f"--input={inputs['i32']}",
                           "--input=2xf32=[1 2]", "--input=2xi1=[1 0]"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert message in proc.stderr, proc.stderr


# Integer arrays of an argument's width but the other signedness are read as its type, bits
# kept, as IREE's runtime does (iree_hal_element_types_are_compatible): MLIR's integers are
# signless, so an ONNX model's uint64 input is an i64 argument that its ops read as unsigned.
UNSIGNED = """
func.func @udiv(%x: tensor<5xi64>, %y: tensor<5xi64>) -> tensor<5xi64> {
  %e = tensor.empty() : tensor<5xi64>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                        affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x, %y : tensor<5xi64>, tensor<5xi64>) outs(%e : tensor<5xi64>) {
  ^bb0(%a: i64, %b: i64, %o: i64):
    %q = arith.divui %a, %b : i64
    linalg.yield %q : i64
  } -> tensor<5xi64>
  return %r : tensor<5xi64>
}
func.func @bytes(%x: tensor<4xui8>) -> tensor<4xui8> {
  return %x : tensor<4xui8>
}
"""


def test_integer_arrays_of_the_other_signedness_keep_their_bits():
    module = rt.load_module(compile_str(UNSIGNED), device="local-sync")
    rng = np.random.default_rng(7)
    x = rng.integers(2**63, 2**64 - 1, 5, dtype=np.uint64, endpoint=True)  # past int64's range
    y = rng.integers(1, 2**40, 5, dtype=np.uint64)
    y[0] = 3
    got = module.udiv(x, y).to_host()
    assert got.dtype == np.int64  # the function's type; its bits are the unsigned quotient
    np.testing.assert_array_equal(got.view(np.uint64), x // y)
    got = module.bytes(np.array([-1, -128, 0, 127], np.int8)).to_host()
    assert got.dtype == np.uint8 and got.tolist() == [255, 128, 0, 127]


@pytest.mark.parametrize("value, message", [
    (np.zeros(5, np.uint32), "expected 5xi64, got 5xui32"),     # another width
    (np.zeros(5, np.float64), "expected 5xi64, got 5xf64"),     # not an integer
    (np.zeros(5, np.bool_), "expected 5xi64, got 5xi1"),
])
def test_other_integer_widths_and_kinds_are_still_refused(value, message):
    module = rt.load_module(compile_str(UNSIGNED), device="local-sync")
    with pytest.raises(rt.InvocationError, match=message):
        module.udiv(value, np.ones(5, np.int64))
