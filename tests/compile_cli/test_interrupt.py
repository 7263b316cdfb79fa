"""Ctrl-C in pyree-compile (while LLVM runs, on worker processes or on one core) and in
pyree-import-onnx (while torch-mlir holds the GIL): exit 130 within a couple of seconds, one
line on stderr and no traceback, no output file, no process left behind."""

from __future__ import annotations

import os
import re
import sys

import pytest
from generated import matmul_chain
from interrupting import PROMPT_S, interrupt
from tooling import require_module

# LLVM has done the first part of the kernels and is at work on the rest
CODEGEN_STARTED = re.compile(r"codegen for llvm-cpu: \d+/\d+ kernels")


def assert_interrupted(result, tool: str, folder, inputs: set[str]) -> None:
    assert result.returncode == 130, result.stderr
    assert result.seconds < PROMPT_S, result.seconds
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith(f"{tool}: [")]
    assert lines == [f"{tool}: interrupted"], result.stderr
    assert {p.name for p in folder.iterdir()} == inputs  # no output, no temporary file
    assert result.left_behind == []


@pytest.mark.parametrize("cpus", [2, 1])
def test_compile_while_llvm_runs(cpus, tmp_path):
    """On two cores, interrupted once LLVM runs on the workers; on one, LLVM runs in the tool's
    main thread, in one long native call each part, and the watcher thread ends the process."""
    source = tmp_path / "chain.mlir"
    source.write_text(matmul_chain(48))
    available = sorted(os.sched_getaffinity(0))
    if len(available) < cpus:
        pytest.skip(f"this machine lets the tests use {len(available)} core")
    ready = (lambda err, pids: len(pids) > 1) if cpus > 1 else \
        (lambda err, pids: bool(CODEGEN_STARTED.search(err)))
    result = interrupt(
        [sys.executable, "-m", "pyree.compiler.tools.compile", str(source), "-o",
         str(tmp_path / "chain.vmfb"), "--pyree-progress"], ready,
        preexec_fn=lambda: os.sched_setaffinity(0, available[:cpus]))
    assert_interrupted(result, "pyree-compile", tmp_path, {"chain.mlir"})


def test_import_onnx_while_torch_mlir_runs(tmp_path):
    onnx = require_module("onnx")
    require_module("torch_mlir")
    source = tmp_path / "chain.onnx"
    onnx.save(_onnx_chain(onnx, 3000), source)  # 4 s to import on the dev VM (600 took 1 s)
    result = interrupt(
        [sys.executable, "-m", "pyree.compiler.tools.import_onnx", str(source), "-o",
         str(tmp_path / "chain.mlir")],
        lambda err, pids: len(pids) > 1, settle_s=1.0)  # its worker has started importing
    assert_interrupted(result, "pyree-import-onnx", tmp_path, {"chain.onnx"})


def _onnx_chain(onnx, n: int):
    """``n`` MatMul + Tanh pairs: torch-mlir's pipelines take seconds on it."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, weights, value = [], [], "x"
    for i in range(n):
        weights.append(numpy_helper.from_array(
            rng.standard_normal((16, 16)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [value, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Tanh", [f"m{i}"], [f"t{i}"])]
        value = f"t{i}"
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info(value, TensorProto.FLOAT, [4, 16])],
                              weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
