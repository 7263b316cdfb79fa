"""Calling functions: argument checking, unknown names, missing executables, the public API."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest

from .module_factory import COLS, ROWS, arith_builder


@pytest.fixture
def module(arith_bytes):
    return rt.load_module(arith_bytes, device="local-sync")


def test_function_signatures(module):
    add = module["add"]
    assert module.name == "arith" and "add" in module.function_names
    assert [str(t) for t in add.argument_types] == ["37x53xf32", "37x53xf32"]
    assert add.result_types[0].dtype == np.float32 and add.result_types[0].shape == (ROWS, COLS)
    assert str(module.flags.argument_types[0]) == "i32"
    assert module.module.tree.functions[0].name == "add"


def test_wrong_argument_count(module, rng):
    with pytest.raises(rt.InvocationError, match=r"function 'add' takes 2 arguments "
                                                 r"\(37x53xf32, 37x53xf32\), got 1"):
        module.add(rng.standard_normal((ROWS, COLS)).astype(np.float32))


def test_wrong_shape(module, rng):
    a = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    with pytest.raises(rt.InvocationError, match="function 'add' argument 1: expected 37x53xf32, "
                                                 "got 53x37xf32"):
        module.add(a, a.T.copy())


def test_wrong_dtype(module, rng):
    a = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    with pytest.raises(rt.InvocationError, match="function 'add' argument 0: expected 37x53xf32, "
                                                 "got 37x53xf64"):
        module.add(a.astype(np.float64), a)


def test_device_array_of_the_wrong_type(module):
    filled, _ = module.fill_copy()
    with pytest.raises(rt.InvocationError, match="argument 0: expected 37x53xf32, got 4xi32"):
        module.add(filled, filled)


def test_scalars_for_rank_zero(module):
    assert module.flags.run_checks(3, np.array([1, 1, 1, 1], bool)) == []
    with pytest.raises(rt.InvocationError, match="function 'flags' argument 0: expected i32, got "
                                                 "a str holding"):
        module.flags("three", np.ones(4, bool))


def test_non_contiguous_arguments_are_accepted(module, rng):
    wide = rng.standard_normal((ROWS, 2 * COLS)).astype(np.float32)
    a, b = wide[:, ::2], wide[:, 1::2]
    np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)


def test_unknown_function_lists_exports(module):
    with pytest.raises(rt.InvocationError, match="module 'arith' has no function 'mul'; it "
                                                 "exports: add, add_scaled, fill_copy"):
        _ = module["mul"]
    with pytest.raises(rt.InvocationError, match="no function 'mul'"):
        _ = module.mul


def test_module_without_executable_for_the_device(kernel_library, offset_constant):
    data = arith_builder(kernel_library, offset_constant, cuda_only=True).finish()
    with pytest.raises(rt.ModuleError, match=r"module 'arith' has no executable for device "
                                             r"'local-task' \(format cpu\); it was compiled for: "
                                             r"cuda \(sm_90\)\. Recompile with "
                                             r"--pyree-hal-target-backends=llvm-cpu"):
        rt.load_module(data, device="local-task")


def test_load_from_a_path(tmp_path, arith_bytes, rng):
    path = tmp_path / "arith.vmfb"
    path.write_bytes(arith_bytes)
    module = rt.load_module(str(path), device="local-task")
    a, b = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)


def test_format_array_follows_iree():
    assert rt.format_array(np.arange(4, dtype=np.float32) + 0.5) == "4xf32=0.5 1.5 2.5 3.5"
    assert rt.format_array(np.array([[1, 2], [3, 4]], np.int32)) == "2x2xi32=[1 2][3 4]"
    assert rt.format_array(np.array(7, np.int32)) == "i32=7"
    long = rt.format_array(np.ones(2000, np.int8))
    assert long.endswith("1...") and long.count("1") == 1024
