"""Shape guards, size values and bounds on llvm-cpu (issue 29): comparisons, selects and
asserts on run-time sizes that the sizes decide fold at compile time, the rest run on the host
per call (schema 1.6); a linalg body that reads a size gets it from a push constant; bounds
from ``util.assume.int`` are held per call. Checked against numpy at sizes 0, 1, primes and
large, through the public API and the CLIs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str

CPU = CompileOptions(target_backends=["llvm-cpu"])

# A guard the sizes do not decide (n <= m), and a size chosen by a comparison (n < m ? n : m).
HEAD = """
func.func @head(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %m = tensor.dim %b, %c0 : tensor<?xf32>
  %le = arith.cmpi ule, %n, %m : index
  cf.assert %le, "the head may not be longer than the sequence"
  %lt = arith.cmpi slt, %n, %m : index
  %k = arith.select %lt, %n, %m : index
  %s = tensor.extract_slice %b[0] [%k] [1] : tensor<?xf32> to tensor<?xf32>
  %e = tensor.empty(%k) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%s : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = arith.mulf %x, %x : f32
    linalg.yield %z : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""

# torch-mlir's guards that the sizes decide: n >= 0, n == n, n < 0 ? .. : .., 8n / 8n with n >= 1
# (util.assume.int), an affine.apply, a reshape to sizes given as elements.
DECIDED = """
func.func @decided(%a: tensor<?x8xf32>) -> tensor<?x2x4xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c0_i64 = arith.constant 0 : i64
  %c1_i64 = arith.constant 1 : i64
  %c2_i64 = arith.constant 2 : i64
  %c4_i64 = arith.constant 4 : i64
  %c8_i64 = arith.constant 8 : i64
  %d = tensor.dim %a, %c0 : tensor<?x8xf32>
  %n = util.assume.int %d<umin = 1, umax = 4096> : index
  %ni = arith.index_cast %n : index to i64
  %nonneg = arith.cmpi sge, %ni, %c0_i64 : i64
  cf.assert %nonneg, "negative values not allowed in new dimensions"
  %neg = arith.cmpi slt, %ni, %c0_i64 : i64
  %total = arith.muli %ni, %c8_i64 : i64
  %div = arith.select %neg, %c8_i64, %total : i64
  %one = arith.divsi %total, %div : i64
  %same = arith.cmpi eq, %one, %c1_i64 : i64
  cf.assert %same, "must have at most one inferred (negative) dimension"
  %twice = affine.apply affine_map<()[s0] -> (s0 * 2)>()[%n]
  %half = arith.divsi %twice, %c2 : index
  %h64 = arith.index_cast %half : index to i64
  %shape = tensor.from_elements %h64, %c2_i64, %c4_i64 : tensor<3xi64>
  %r = tensor.reshape %a(%shape) : (tensor<?x8xf32>, tensor<3xi64>) -> tensor<?x2x4xf32>
  return %r : tensor<?x2x4xf32>
}
"""

# A body that reads sizes as values: x * n, + 100 where n == 1, + 1 in the last column; and
# a row mean that divides by n computed on the host side of the function.
SIZE_VALUES = """
func.func @f(%a: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %a, %c1 : tensor<?x?xf32>
  %hundred = arith.constant 100.0 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
      affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %j = linalg.index 1 : index
    %last = arith.subi %n, %c1 : index
    %at_last = arith.cmpi eq, %j, %last : index
    %single = arith.cmpi eq, %n, %c1 : index
    %ni = arith.index_cast %n : index to i64
    %nf = arith.sitofp %ni : i64 to f32
    %y = arith.mulf %x, %nf : f32
    %b = arith.select %single, %hundred, %zero : f32
    %c = arith.select %at_last, %one, %zero : f32
    %y1 = arith.addf %y, %b : f32
    %y2 = arith.addf %y1, %c : f32
    linalg.yield %y2 : f32
  } -> tensor<?x?xf32>
  %ni = arith.index_cast %n : index to i64
  %nf = arith.sitofp %ni : i64 to f32
  %s0 = tensor.empty(%m) : tensor<?xf32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<?xf32>) -> tensor<?xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
      affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<?x?xf32>) outs(%s1 : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = arith.addf %x, %o : f32
    linalg.yield %z : f32
  } -> tensor<?xf32>
  %mean = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%s : tensor<?xf32>) outs(%s0 : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %q = arith.divf %x, %nf : f32
    linalg.yield %q : f32
  } -> tensor<?xf32>
  return %r, %mean : tensor<?x?xf32>, tensor<?xf32>
}
"""

# Bounds and a divisor on a symbol, as IREE states them.
BOUNDED = """
func.func @bounded(%a: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %a, %c0 : tensor<?xf32>
  %n = util.assume.int %d<umin = 2, umax = 64, udiv = 2> : index
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = math.exp %x : f32
    linalg.yield %z : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


def _load(text: str) -> rt.LoadedModule:
    return rt.load_module(compile_str(text, CPU), device="local-task")


def _dump(tmp_path, text: str) -> str:
    path = tmp_path / "m.vmfb"
    # one CPU: the default variants (schema 1.7) would hide the version the sizes need
    path.write_bytes(compile_str(text, CPU, extra_args=["--pyree-llvmcpu-variants=none"]))
    out = subprocess.run([sys.executable, "-m", "pyree.runtime.tools.dump_module", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("n, m", [(0, 0), (0, 5), (1, 1), (3, 7), (7, 7), (131, 1021)])
def test_a_guard_that_holds_and_a_size_chosen_by_a_comparison(n, m):
    module = _load(HEAD)
    rng = np.random.default_rng(n * 1000 + m)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(m).astype(np.float32)
    got = module["head"](a, b).to_host()
    k = n if n < m else m
    np.testing.assert_array_equal(got, b[:k] * b[:k])


def test_a_guard_that_fails_is_an_invocation_error_quoting_the_assert():
    module = _load(HEAD)
    b = np.ones(5, np.float32)
    for n in (6, 1000):
        with pytest.raises(rt.InvocationError, match=r"the head may not be longer than the "
                           r"sequence \(the shape guard `\(s0 <= s1\)` at <string>:7:3 fails\)"):
            module["head"](np.ones(n, np.float32), b)
    np.testing.assert_array_equal(module["head"](b, b).to_host(), b)  # the module still works


def test_run_module_reports_a_failing_guard_without_a_traceback(tmp_path):
    path = tmp_path / "head.vmfb"
    path.write_bytes(compile_str(HEAD, CPU))
    run = lambda n: subprocess.run(
        [sys.executable, "-m", "pyree.runtime.tools.run_module", f"--module={path}",
         "--function=head", f"--input={n}xf32=3", "--input=5xf32=2"],
        capture_output=True, text=True, timeout=120)
    out = run(6)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "the head may not be longer than the sequence (the shape guard" in out.stderr
    out = run(2)
    assert out.returncode == 0 and "2xf32=4 4" in out.stdout


def test_guards_are_written_as_schema_1_6_and_dumped(tmp_path):
    out = _dump(tmp_path, HEAD)
    assert "schema version: 1.6" in out
    assert 'guard (s0 <= s1): "the head may not be longer than the sequence" (<string>:7:3)' in out


@pytest.mark.parametrize("n", [1, 2, 13, 4096])
def test_guards_the_sizes_decide_leave_no_trace(tmp_path, n):
    module = _load(DECIDED)
    a = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
    np.testing.assert_array_equal(module["decided"](a).to_host(), a.reshape(n, 2, 4))


def test_decided_guards_keep_schema_1_5(tmp_path):
    out = _dump(tmp_path, DECIDED)
    assert "schema version: 1.5" in out and "guard" not in out
    assert "symbol s0 in [1, 4096]" in out


@pytest.mark.parametrize("m, n", [(0, 3), (2, 0), (1, 1), (3, 1), (4, 7), (67, 131)])
def test_a_kernel_reads_a_run_time_size_as_a_value(m, n):
    module = _load(SIZE_VALUES)
    a = np.random.default_rng(m + 7 * n).standard_normal((m, n)).astype(np.float32)
    r, mean = module["f"](a)
    want = a * np.float32(n) + np.float32(100 if n == 1 else 0) + (np.arange(n) == n - 1)
    np.testing.assert_array_equal(r.to_host(), want.astype(np.float32))
    with np.errstate(invalid="ignore"):  # a row of none: 0 / 0
        want_mean = a.sum(1, dtype=np.float32) / np.float32(n)
    np.testing.assert_allclose(mean.to_host(), want_mean, rtol=1e-6, atol=1e-7)


# A comparison of sizes the host computes (n < m, two arguments' sizes) read by a kernel body.
HOST_CONDITION = """
func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %m = tensor.dim %b, %c0 : tensor<?xf32>
  %shorter = arith.cmpi ult, %n, %m : index
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%a : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.select %shorter, %one, %zero : f32
    %y = arith.addf %x, %s : f32
    linalg.yield %y : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


def test_a_kernel_reads_a_comparison_the_host_computes():
    module = _load(HOST_CONDITION)
    for n, m in [(0, 2), (1, 0), (3, 5), (5, 3), (4, 4), (131, 1021)]:
        a = np.random.default_rng(n + m).standard_normal(n).astype(np.float32)
        got = module["f"](a, np.ones(m, np.float32)).to_host()
        np.testing.assert_array_equal(got, a + np.float32(n < m))


def test_print_ir_shows_the_sizes_a_body_reads(tmp_path):
    source = tmp_path / "f.mlir"
    source.write_text(SIZE_VALUES)
    out = subprocess.run([sys.executable, "-m", "pyree.compiler.tools.compile", str(source),
                          "--pyree-hal-target-backends=llvm-cpu", "--pyree-print-ir-after-all",
                          "-o", str(tmp_path / "f.vmfb")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "size(s1):index" in out.stderr + out.stdout


def test_bounds_and_divisor_are_held_per_call_naming_the_argument(tmp_path):
    module = _load(BOUNDED)
    for n in (2, 38, 64):
        a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        np.testing.assert_allclose(module["bounded"](a).to_host(), np.exp(a), rtol=2e-6)
    for n, why in [(0, "below its bound 2"), (66, "past its bound 64"),
                   (7, "not a multiple of 2")]:
        with pytest.raises(rt.InvocationError, match=rf"`s0` \(argument 0 dim 0\) is {n}, {why}"):
            module["bounded"](np.ones(n, np.float32))
    assert "symbol s0 in [2, 64], a multiple of 2" in _dump(tmp_path, BOUNDED)


def test_assumptions_listed_per_call_site_bound_by_what_holds_for_any():
    """IREE's list form (one assumption per call site it saw): the lowest umin, the highest
    umax, the divisors' gcd."""
    module = _load(BOUNDED.replace("%d<umin = 2, umax = 64, udiv = 2>",
                                   "%d[<umin = 4, umax = 64, udiv = 4>, <umin = 3, umax = 90, udiv = 6>]"))
    for n in (4, 6, 90):
        a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        np.testing.assert_allclose(module["bounded"](a).to_host(), np.exp(a), rtol=2e-6)
    for n, why in [(2, "below its bound 3"), (92, "past its bound 90"),
                   (7, "not a multiple of 2")]:
        with pytest.raises(rt.InvocationError, match=rf"`s0` \(argument 0 dim 0\) is {n}, {why}"):
            module["bounded"](np.ones(n, np.float32))


def test_an_assumption_that_no_size_meets_is_refused():
    text = BOUNDED.replace("umin = 2, umax = 64", "umin = 65, umax = 64")
    with pytest.raises(CompileError, match=r"<string>:5:3: error: util.assume.int bounds "
                       r"umin=65 umax=64 udiv=2 hold for no size"):
        compile_str(text, CPU)


def test_a_size_guard_inside_control_flow_is_refused_by_name():
    text = """
func.func @f(%a: tensor<?xf32>, %b: tensor<?xf32>, %p: i1) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %m = tensor.dim %b, %c0 : tensor<?xf32>
  scf.if %p {
    %le = arith.cmpi ule, %n, %m : index
    cf.assert %le, "n <= m"
  }
  return %a : tensor<?xf32>
}
"""
    with pytest.raises(CompileError, match=r"<string>:8:5: error: cf.assert on run-time sizes "
                       r"inside a control-flow block is not supported"):
        compile_str(text, CPU)
