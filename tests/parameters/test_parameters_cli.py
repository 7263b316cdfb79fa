"""External parameters through the command line, as a user runs them: pyree-compile exports
(IREE's and pyree's flag spellings), pyree-run-module and pyree-benchmark-module load with
--parameters, and every broken parameter file is one clear error line, exit 1, no traceback."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from parameter_cases import (
    BATCH,
    IN,
    SHAPES,
    assert_clean_error,
    assert_matches,
    dense_mlir,
    numpy_safetensors,
    parameter_mlir,
    reference,
    run,
    weights,
)
from pyree.compiler.parameters import write_parameters

COMPILE = "pyree.compiler.tools.compile"
RUN = "pyree.runtime.tools.run_module"


def write(path, w: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        write_parameters(f, path.suffix, [(k, "f32", v.shape, v) for k, v in w.items()])


def run_mlp(tmp_path, module, *parameters: str) -> np.ndarray:
    x = np.random.default_rng().standard_normal((BATCH, IN)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    done = run(RUN, f"--module={module}", "--device=local-sync", "--input=@" + str(tmp_path / "x.npy"),
               "--output=@" + str(tmp_path / "y.npy"), *(f"--parameters={p}" for p in parameters))
    assert done.returncode == 0, done.stderr
    return x, np.load(tmp_path / "y.npy")


@pytest.mark.parametrize("flags", [
    ["--iree-opt-export-parameters=model={file}", "--iree-opt-minimum-parameter-export-size=0"],
    ["--pyree-opt-export-parameters=model={file}", "--pyree-opt-minimum-parameter-export-size=0"],
    ["--iree-parameter-export=model={file}", "--iree-parameter-export-minimum-size=0"],
])
@pytest.mark.parametrize("name", ["w.irpa", "w.safetensors"])
def test_compile_export_run_and_swap_weights(tmp_path, flags, name):
    rng = np.random.default_rng()
    w = weights(rng)
    (tmp_path / "mlp.mlir").write_text(dense_mlir(w))
    file, module = tmp_path / name, tmp_path / "mlp.vmfb"
    done = run(COMPILE, str(tmp_path / "mlp.mlir"), "-o", str(module),
               *(f.format(file=file) for f in flags))
    assert done.returncode == 0, done.stderr
    x, y = run_mlp(tmp_path, module, f"model={file}")
    assert_matches(y, x, w)
    new = weights(rng, special=False)
    write(file, new)
    x, y = run_mlp(tmp_path, module, f"model={file}")
    assert_matches(y, x, new)
    dump = run("pyree.runtime.tools.dump_module", str(module))
    assert dump.returncode == 0, dump.stderr
    assert "constants: 0, 0 B" in dump.stdout  # every weight is in the parameter file
    assert all(f'"model"::"{k}": ' in dump.stdout for k in SHAPES), dump.stdout


def test_splat_parameters_run_the_model_on_zeros(tmp_path):
    """--iree-opt-splat-parameters: one zero splat per parameter, scopes aside, so the module
    runs without its weights (exported ones included)."""
    w = weights(np.random.default_rng())
    (tmp_path / "mlp.mlir").write_text(dense_mlir(w))
    module, splats = tmp_path / "mlp.vmfb", tmp_path / "zeros.irpa"
    done = run(COMPILE, str(tmp_path / "mlp.mlir"), "-o", str(module),
               f"--iree-opt-export-parameters=model={tmp_path / 'w.irpa'}",
               f"--iree-opt-splat-parameters={splats}")
    assert done.returncode == 0, done.stderr
    x, y = run_mlp(tmp_path, module, f"model={splats}")
    zeros = {k: (v if v.nbytes < 256 else np.zeros_like(v)) for k, v in w.items()}
    assert_matches(y, x, zeros)


def test_benchmark_module_takes_parameters(tmp_path):
    w = weights(np.random.default_rng(), special=False)
    module = tmp_path / "mlp.vmfb"
    (tmp_path / "mlp.mlir").write_text(parameter_mlir(dict.fromkeys(SHAPES, "")))
    assert run(COMPILE, str(tmp_path / "mlp.mlir"), "-o", str(module)).returncode == 0
    write(tmp_path / "w.irpa", w)
    done = run("pyree.runtime.tools.benchmark_module", f"--module={module}", "--device=local-sync",
               f"--input={BATCH}x{IN}xf32=0.5", f"--parameters={tmp_path / 'w.irpa'}",
               "--benchmark_min_time=3x")
    assert done.returncode == 0, done.stderr
    assert "BM_main" in done.stdout


def test_unscoped_and_scoped_files_together(tmp_path):
    w = weights(np.random.default_rng())
    module = tmp_path / "mlp.vmfb"
    (tmp_path / "mlp.mlir").write_text(parameter_mlir({"w1": "a", "b1": "a", "w2": "", "b2": ""}))
    assert run(COMPILE, str(tmp_path / "mlp.mlir"), "-o", str(module)).returncode == 0
    write(tmp_path / "a.irpa", {k: w[k] for k in ("w1", "b1")})
    numpy_safetensors(tmp_path / "rest.safetensors", {k: w[k] for k in ("w2", "b2")})
    x, y = run_mlp(tmp_path, module, f"a={tmp_path / 'a.irpa'}", str(tmp_path / "rest.safetensors"))
    assert_matches(y, x, w)


@pytest.fixture(scope="module")
def scoped_module(tmp_path_factory) -> str:
    """The MLP with every weight a parameter of scope ``model``."""
    folder = tmp_path_factory.mktemp("scoped")
    (folder / "mlp.mlir").write_text(parameter_mlir(dict.fromkeys(SHAPES, "model")))
    done = run(COMPILE, str(folder / "mlp.mlir"), "-o", str(folder / "mlp.vmfb"))
    assert done.returncode == 0, done.stderr
    return str(folder / "mlp.vmfb")


def _irpa_with_misaligned_w1(path) -> None:
    write(path, weights(np.random.default_rng()))
    data = bytearray(path.read_bytes())
    first_entry = 96  # after the 88-byte header, 16-aligned
    struct.pack_into("<Q", data, first_entry + 60, 4)  # the storage offset of entry 0 (w1)
    path.write_bytes(bytes(data))


def _safetensors_with(path, **change) -> None:
    w = weights(np.random.default_rng())
    w.update(change)
    numpy_safetensors(path, w)


# name, how to make the file, what the error line names
BROKEN = [
    ("missing.irpa", None, ["cannot open parameter file", "missing.irpa"]),
    ("nokey.irpa", lambda p: write(p, {k: v for k, v in weights(np.random.default_rng()).items()
                                       if k != "w2"}),
     ["'model::w2'", "not in the parameter file(s) of scope 'model'", "nokey.irpa"]),
    ("small.irpa", lambda p: write(p, {**weights(np.random.default_rng()),
                                       "b1": np.zeros(12, np.float32)}),
     ["'model::b1'", "small.irpa", "is 48 bytes", "13xf32, 52 bytes"]),
    ("dtype.safetensors", lambda p: numpy_safetensors(
        p, {k: v.astype(np.float64) for k, v in weights(np.random.default_rng()).items()}, "F64"),
     ["'model::w1'", "is F64 [7, 13]", "is 7x13xf32"]),
    ("shape.safetensors", lambda p: _safetensors_with(p, w1=np.zeros((13, 7), np.float32)),
     ["'model::w1'", "is F32 [13, 7]", "is 7x13xf32"]),
    ("truncated.irpa", lambda p: (write(p, weights(np.random.default_rng())),
                                  p.write_bytes(p.read_bytes()[:200])),
     ["truncated.irpa", "not a valid IREE parameter archive", "truncated"]),
    ("magic.irpa", lambda p: p.write_bytes(b"NOPE" + bytes(200)),
     ["magic.irpa", "magic b'NOPE'"]),
    ("aligned.irpa", _irpa_with_misaligned_w1, ["'w1'", "not 64-byte aligned"]),
    ("json.safetensors", lambda p: p.write_bytes(struct.pack("<Q", 9) + b'{"w1": [}'),
     ["json.safetensors", "header is not valid JSON"]),
    ("cut.safetensors", lambda p: (numpy_safetensors(p, weights(np.random.default_rng())),
                                   p.write_bytes(p.read_bytes()[:-10])),
     ["cut.safetensors", "runs past", "truncated"]),
    ("other.bin", lambda p: p.write_bytes(b"\x01" * 64),
     ["other.bin", "neither an IREE parameter archive"]),
    ("deep.safetensors", lambda p: _safetensors_header(p, b'{"w1": ' + b"[" * 100_000
                                                       + b"]" * 100_000 + b"}"),
     ["deep.safetensors", "its header nests JSON arrays or objects too deeply"]),
    ("listed.safetensors", lambda p: _safetensors_header(
        p, b'{"w1": {"dtype": ["F32"], "shape": [7, 13], "data_offsets": [0, 364]}}'),
     ["listed.safetensors", "tensor 'w1' has unknown dtype ['F32']"]),
    ("twice.safetensors", lambda p: _safetensors_header(
        p, b'{"w1": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
           b'"w1": {"dtype": "F32", "shape": [7, 13], "data_offsets": [0, 364]}}'),
     ["twice.safetensors", "its header has the key 'w1' twice"]),
]


def _safetensors_header(path, header: bytes) -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(364))


@pytest.mark.parametrize("name, make, fragments", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_parameter_files_are_one_clear_error(tmp_path, scoped_module, name, make, fragments):
    path = tmp_path / name
    if make is not None:
        make(path)
    done = run(RUN, f"--module={scoped_module}", "--device=local-sync",
               f"--input={BATCH}x{IN}xf32=1", f"--parameters=model={path}")
    assert_clean_error(done, fragments)


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "folder"])
def test_a_parameter_path_that_is_not_a_regular_file_is_refused(scoped_module, tmp_path, kind):
    """Not read until memory runs out (/dev/zero), not waited on (a FIFO nobody writes)."""
    path = {"/dev/zero": "/dev/zero", "fifo": tmp_path / "fifo", "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    done = run(RUN, f"--module={scoped_module}", "--device=local-sync",
               f"--input={BATCH}x{IN}xf32=1", f"--parameters=model={path}")
    assert_clean_error(done, [f"parameter file '{path}' is not a regular file"])


def test_no_file_for_the_scope(scoped_module, tmp_path):
    write(tmp_path / "w.irpa", weights(np.random.default_rng()))
    done = run(RUN, f"--module={scoped_module}", "--device=local-sync",
               f"--input={BATCH}x{IN}xf32=1", f"--parameters={tmp_path / 'w.irpa'}")
    assert_clean_error(done, ["is parameter 'model::", "no parameter file was given for scope "
                              "'model'", "--parameters=model=FILE"])


def test_export_to_an_unknown_format_is_a_compile_error(tmp_path):
    (tmp_path / "mlp.mlir").write_text(dense_mlir(weights(np.random.default_rng())))
    done = run(COMPILE, str(tmp_path / "mlp.mlir"), "-o", str(tmp_path / "m.vmfb"),
               f"--iree-opt-export-parameters={tmp_path / 'w.gguf'}", "--no-pyree-progress")
    assert_clean_error(done, ["--iree-opt-export-parameters", "must end in .irpa"])


def test_reference_is_not_trivial():
    """The reference the tests compare with has finite, NaN and ±inf entries."""
    out = reference(np.ones((BATCH, IN), np.float32), weights(np.random.default_rng()))
    assert np.isnan(out).any() and np.isinf(out).any() and np.isfinite(out).sum() >= 2 * BATCH
