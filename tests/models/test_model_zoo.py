"""The model-zoo sweep's fast subset (issue 26), through bench/models/zoo.py's own command line:
two small torchvision models of different families, random weights, 224x224, compiled for
llvm-cpu, cuda and vulkan-spirv with their weights exported, the llvm-cpu module run on
local-task against float64 PyTorch (relative error <= 1e-4); then the GPU host's path, the
prebuilt modules run with their weights written again from the rebuilt torch model. The whole
sweep is the same command without ``--models`` (BENCHMARKS.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch  # noqa: F401 - CI installs it: a missing torch fails there, never skips

sys.path.insert(0, str(Path(__file__).resolve().parent))
import definitions  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "bench" / "models" / "zoo.py"
# Two families at the least compile time (the whole test's budget is about a minute on the
# 2-core CI machine): fire modules with ceil-mode pooling and concatenations; channel split
# and shuffle around depthwise convolutions. MobileNet v2's inverted residuals are
# test_models.py's.
SUBSET = ["squeezenet1_1", "shufflenet_v2_x0_5"]
FORMATS = {"llvm-cpu": 0, "cuda": 1, "vulkan-spirv": 3}  # schemas/module.fbs ExecutableFormat


def zoo(*args: str) -> tuple[subprocess.CompletedProcess, dict]:
    json_path = Path(args[0]) / "results.json"
    proc = subprocess.run([sys.executable, str(ZOO), *args, f"--json={json_path}"],
                          capture_output=True, text=True, timeout=600)
    return proc, json.loads(json_path.read_text()) if json_path.exists() else {}


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zoo")
    proc, results = zoo(str(folder / "build"), f"--models={','.join(SUBSET)}")
    return folder, proc, results


def test_zoo_follows_torchvision():
    """The list is torchvision's, cut at 50 MB of fp32 weights: every family the issue names
    and nothing larger than the cut."""
    models = definitions.zoo_models()
    assert {"squeezenet1_0", "shufflenet_v2_x2_0", "mnasnet1_3", "mobilenet_v3_large",
            "efficientnet_b3", "regnet_y_1_6gf", "resnet18", "densenet121",
            "googlenet"} <= set(models)
    assert not {"resnet34", "densenet169", "efficientnet_b4", "vit_b_16"} & set(models)
    assert all(4 * n <= 50_000_000 for n in models.values())


def test_subset_on_local_task(build):
    folder, proc, results = build
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(results) == SUBSET
    for name, r in results.items():
        assert r["fails"] == [], name
        assert r["local-task"]["err"] <= 1e-4, name
        assert set(r["compile_s"]) == set(FORMATS), name
    assert f"{len(SUBSET)}/{len(SUBSET)} models pass" in proc.stdout


def test_subset_compiles_for_gpus(build):
    """cuda and vulkan-spirv compile with no GPU: each module verifies in the runtime's reader
    and holds its target's executables; the weights are in the archive, not the modules."""
    import pyree.runtime as rt
    folder, proc, results = build
    for name in SUBSET:
        archive = (folder / "build-params" / f"{name}.irpa").stat().st_size
        assert archive >= 0.9 * 4 * results[name]["params"], name  # under 256 B stays inline
        for target, fmt in FORMATS.items():
            data = (folder / "build" / f"{name}.{target}.vmfb").read_bytes()
            assert {e.format for e in rt.read_module(data).tree.executables} == {fmt}, target
            assert len(data) < archive / 4, (name, target)  # the weights are not inside


@pytest.fixture(scope="module")
def rerun(build, tmp_path_factory):
    """The GPU host's command (``--device=...``) on local-task over the subset's prebuilt
    modules, weights written again from the seeded torch models into a fresh folder; the
    manifest says shufflenet's weights differ, as a host whose torch builds other ones would."""
    folder, _, _ = build
    again = tmp_path_factory.mktemp("zoo_rerun")
    manifest = json.loads((folder / "build" / "manifest.json").read_text())
    manifest["shufflenet_v2_x0_5"]["checksum"] *= 1.01
    (again / "build").mkdir()
    (again / "build" / "manifest.json").write_text(json.dumps(manifest))
    module = "squeezenet1_1.llvm-cpu.vmfb"
    (again / "build" / module).write_bytes((folder / "build" / module).read_bytes())
    proc, results = zoo(str(again / "build"), "--device=local-task",
                        f"--params={again / 'params'}")
    return folder, again, proc, results


def test_prebuilt_modules_with_rebuilt_weights(rerun):
    """The archive written from the rebuilt model is the build's, byte for byte, and the
    prebuilt module gives the same answer with it."""
    folder, again, proc, results = rerun
    assert (again / "params" / "squeezenet1_1.irpa").read_bytes() == \
        (folder / "build-params" / "squeezenet1_1.irpa").read_bytes()
    assert results["squeezenet1_1"]["local-task"]["err"] <= 1e-4
    assert "fail" not in results["squeezenet1_1"]["local-task"]


def test_changed_weights_fail_the_run(rerun):
    """Weights that differ from the build's stop that model with a FAIL row and exit 1."""
    _, _, proc, results = rerun
    assert proc.returncode == 1
    assert "weights differ" in results["shufflenet_v2_x0_5"]["fail"]
    assert "1/2 models pass" in proc.stdout
