"""The compiler and the runtime installed alone, each in its own fresh virtual environment: a module
compiled by one runs in the other. Proves the two packages share nothing but the module format."""

import os
import subprocess
import venv
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ADD = ROOT / "tests/data/add.mlir"
# each environment sees only what is installed in it, not a PYTHONPATH of source folders
ALONE = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def make_env(path: Path, package: str) -> Path:
    venv.EnvBuilder(with_pip=True).create(path)
    python = path / "bin/python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT / "packages" / package)],
                   check=True, env=ALONE)
    return path / "bin"


@pytest.mark.slow
def test_runtime_alone_runs_module_from_compiler_alone(tmp_path):
    compiler_bin = make_env(tmp_path / "compiler-env", "base-compiler")
    runtime_bin = make_env(tmp_path / "runtime-env", "base-runtime")
    probe = "import importlib.util as u; print(u.find_spec('pyree.{}') is None)"
    assert subprocess.run([str(compiler_bin / "python"), "-c", probe.format("runtime")],
                          capture_output=True, text=True, check=True, env=ALONE).stdout.strip() == "True"
    assert subprocess.run([str(runtime_bin / "python"), "-c", probe.format("compiler")],
                          capture_output=True, text=True, check=True, env=ALONE).stdout.strip() == "True"

    module = tmp_path / "add.vmfb"
    subprocess.run([str(compiler_bin / "pyree-compile"), str(ADD), "-o", str(module),
                    "--pyree-hal-target-backends=llvm-cpu"], check=True, env=ALONE)
    rng = np.random.default_rng()
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    run = subprocess.run([str(runtime_bin / "pyree-run-module"), "--device=local-task",
                          f"--module={module}", "--function=add", f"--input=@{tmp_path / 'a.npy'}",
                          f"--input=@{tmp_path / 'b.npy'}", f"--output=@{tmp_path / 'out.npy'}"],
                         capture_output=True, text=True, env=ALONE)
    assert run.returncode == 0, run.stderr
    assert "EXEC @add" in run.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), a + b, rtol=1e-6)
