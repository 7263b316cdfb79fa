"""torch's cummax and cummin as scans (importers/torch_scans.py): pyree's running max/min carried
through torch-mlir as a custom op, then a ``tm_tensor.scan``. Against PyTorch on local-task and
lavapipe: ties (the latest index), NaN (from the first NaN on, the latest NaN's index), -0 and
infinities, every integer width, narrow floats, odd and empty shapes, run-time sizes; and the
imported MLIR has scans, not the log-step chain (45x PyTorch's CPU time)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tooling
from importers.test_torch_less_common_forms import Fn
from pyree.compiler import CompileOptions, compile_str, import_torch

torch = tooling.require_module("torch")
tooling.require_module("torch_mlir")
ml_dtypes = tooling.require_module("ml_dtypes")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
INF, NAN = float("inf"), float("nan")

BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]


def _specials(shape, seed: int) -> torch.Tensor:
    """Normal values with ties, NaN, +-inf and both zeros sprinkled in."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal(shape) * 4) / 2  # halves: many ties
    flat = x.reshape(-1)
    for value, every in ((np.nan, 53), (np.inf, 31), (-np.inf, 29), (-0.0, 7), (0.0, 11)):
        flat[rng.integers(0, flat.size, max(1, flat.size // every))] = value
    return torch.from_numpy(x.astype(np.float32))


def _both(x, dim):
    return (*torch.cummax(x, dim), *torch.cummin(x, dim))


CASES = {  # name -> (function, arguments)
    "ties_nan_and_zeros_along_rows": (lambda x: _both(x, 1), (torch.tensor(
        [[1.0, 3, 3, 2, NAN, 5, 1], [-1, -1, 0, 0, -0.0, 7, 7], [NAN, 1, 2, NAN, 3, 0, 9],
         [-0.0, 0.0, -0.0, INF, -INF, INF, 2]]),)),
    "specials_odd_rows_and_columns": (lambda x: (*_both(x, 1), *_both(x, 0), *_both(x, -1)),
                                      (_specials((37, 1001), 1),)),
    "middle_dim_of_3d_and_a_line_of_one": (lambda x, y: (*_both(x, 1), *_both(y, 1)),
                                           (_specials((3, 257, 5), 2), _specials((4, 1, 3), 3))),
    "long_rows": (lambda x: _both(x, 1), (_specials((3, 8191), 4),)),
    "integers_of_every_width": (
        lambda a, b, c, d, u: (*_both(a, 1), *_both(b, 0), *_both(c, 1), *_both(d, -1), *_both(u, 1)),
        (torch.randint(-2**62, 2**62, (5, 67)), torch.randint(-9, 9, (41, 3), dtype=torch.int32),
         torch.randint(-300, 300, (2, 99), dtype=torch.int16),
         torch.randint(-128, 127, (3, 40), dtype=torch.int8),
         torch.randint(0, 256, (4, 77), dtype=torch.uint8))),
    "narrow_floats_and_f64": (
        lambda h, d: (*_both(h, 1), *_both(d, 0)),
        (_specials((3, 129), 5).half(), _specials((19, 4), 6).double())),
    "empty_and_scalar": (lambda e, s: (*_both(e, 1), *_both(s, 0)),
                         (torch.zeros(3, 0, 2), torch.tensor(2.5))),
}


def _flat(values) -> list:
    if isinstance(values, (tuple, list)):
        return [v for value in values for v in _flat(value)]
    return [values]


def _run(fn, args, backend, device, dynamic_shapes=None, run_args=None):
    import pyree.runtime as rt
    text = import_torch(Fn(fn), *args, dynamic_shapes=dynamic_shapes)
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=[backend])),
                            device=device)
    return [np.asarray(v) for v in _flat(module["main"](*[a.numpy() for a in run_args or args]))]


def _assert_pytorchs(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0]))
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_pytorch(name, backend):
    fn, args = CASES[name]
    if backend[0] == "vulkan-spirv" and any(a.dtype in (torch.float64, torch.int64) for a in args):
        args = [a.float() if a.dtype == torch.float64 else a for a in args]
    if backend[0] == "vulkan-spirv" and name == "integers_of_every_width":
        args = [args[0] % 2**30, *args[1:]]  # the 64-bit values demoted: kept within i32
    got = _run(fn, args, *backend)
    with torch.no_grad():
        want = [w.numpy() for w in _flat(fn(*args))]
    _assert_pytorchs(got, want)


def test_bf16_matches_pytorch():
    fn = lambda x: (*_both(x, 1), *_both(x, 0))  # noqa: E731
    x = _specials((5, 300), 7).bfloat16()
    import pyree.runtime as rt
    module = rt.load_module(compile_str(import_torch(Fn(fn), x),
                                        CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    got = _flat(module["main"](x.float().numpy().astype(ml_dtypes.bfloat16)))
    want = _flat(fn(x))
    for g, w in zip(got, want):
        g = np.asarray(g)
        w = w.float().numpy() if w.dtype == torch.bfloat16 else w.numpy()
        np.testing.assert_array_equal(g.astype(w.dtype), w)


class _RowsAndColumns(torch.nn.Module):
    def forward(self, x):
        return (*_both(x, 1), *_both(x, 0))


def test_run_time_sizes_match_pytorch():
    """One module for every row count and line length (torch.export's Dim): the scan's sizes
    are read from the input."""
    import pyree.runtime as rt
    rows, length = torch.export.Dim("rows", max=64), torch.export.Dim("length", max=9000)
    text = import_torch(_RowsAndColumns(), _specials((4, 33), 8),
                        dynamic_shapes={"x": {0: rows, 1: length}})
    assert "tensor<?x?xf32>" in text
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")["main"]
    for shape in ((7, 1001), (2, 8191), (64, 3), (5, 1)):
        x = _specials(shape, shape[1])
        got = [np.asarray(v) for v in _flat(module(x.numpy()))]
        _assert_pytorchs(got, [w.numpy() for w in _flat(_RowsAndColumns()(x))])


def test_imported_as_scans():
    """Two scans an op (the running value, the running index), one gather; torch-mlir's
    operator and pyree's declared functions are gone."""
    text = import_torch(Fn(lambda x: _both(x, 1)), torch.randn(6, 1000))
    assert len(re.findall(r"tm_tensor\.scan dimension\(1\)", text)) == 4
    assert len(re.findall(r"arith\.maximumf", text)) == 1 and len(re.findall(r"arith\.minimumf", text)) == 1
    assert len(re.findall(r"arith\.maxsi", text)) == 2  # both indices: the latest position
    assert "torch.operator" not in text and "pyree." not in text and "call" not in text
    assert text.count("linalg.generic") < 20  # the log-step chain had ~10 ops a step, 10 steps
