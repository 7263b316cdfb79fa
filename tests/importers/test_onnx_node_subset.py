"""A fast subset of ONNX's backend node tests, through dev/onnx_node_tests.py as the full sweep
runs them (import, llvm-cpu, local-task, ONNX's tolerances), on the cases that onnx 1.23
computes in memory (its wheel ships no data folder). The subset covers each class of model the
importer's own rewrites fixed (importers/onnx_rewrites/), plus a few plain ops; every case must
pass, and the ones that must be refused must be refused, not answered wrongly. The full sweep,
and its counts, are in BENCHMARKS.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import tooling

tooling.require_module("onnx")
tooling.require_module("torch_mlir")
RUNNER = Path(__file__).resolve().parents[2] / "dev" / "onnx_node_tests.py"

PASS = {
    # unsigned arrays into signless arguments (the runtime), unsigned Div/Mod (nodes)
    "add": ["test_add_uint64"],
    "bitshift": ["test_bitshift_right_uint32"],
    "bitwiseor": ["test_bitwise_or_ui64_bcast_3v1d"],
    "div": ["test_div_uint8", "test_div_uint64"],
    "mod": ["test_mod_uint16"],
    # ops torch-mlir cannot convert, by their function bodies, shape arithmetic folded
    "attention": ["test_attention_3d", "test_attention_3d_gqa_causal", "test_attention_3d_softcap",
                  "test_attention_3d_with_past_and_present_qk_matmul_bias",
                  "test_attention_3d_gqa_softcap_expanded"],
    "rotaryembedding": ["test_rotary_embedding", "test_rotary_embedding_interleaved",
                        "test_rotary_embedding_no_position_ids_rotary_dim",
                        "test_rotary_embedding_with_interleaved_rotary_dim_expanded"],
    "negativeloglikelihoodloss": ["test_nllloss_NCd1d2_with_weight_reduction_sum_ii"],
    "softmax_cross_entropy_loss": ["test_sce_mean_weight_ii_3d_log_prob",
                                   "test_sce_mean_weight_expanded"],
    "rmsnormalization": ["test_rms_normalization_3d_axis1_epsilon",
                         "test_rms_normalization_4d_axis_negative_2_expanded"],
    "reducel2": ["test_reduce_l2_default_axes_keepdims_example_expanded"],
    "reducesum": ["test_reduce_sum_default_axes_keepdims_random",
                  "test_reduce_sum_do_not_keepdims_random"],
    # axes and scales given at run time, specialised to the declared shapes, checked on entry
    "reduce_log_sum_exp": ["test_reduce_log_sum_exp_negative_axes_keepdims_random_expanded"],
    "cumsum": ["test_cumsum_2d_negative_axis"],
    "resize": ["test_resize_upsample_scales_cubic_align_corners"],
    "center_crop_pad": ["test_center_crop_pad_crop_negative_axes_hwc"],
    # torch-mlir's wrong answers, rewritten: GELU's constant, QLinearMatMul's zero points,
    # GridSample's ties and edges, LpNormalization of zeros, Det's pivots
    "gelu": ["test_gelu_tanh_2"],
    "qlinearmatmul": ["test_qlinearmatmul_3D_uint8_float32", "test_qlinearmatmul_2D_int8_float16"],
    "gridsample": ["test_gridsample_nearest_align_corners_0_additional_1",
                   "test_gridsample_zeros_padding"],
    "lpnormalization": ["test_l2normalization_axis_0"],
    "det": ["test_det_nd", "test_det_2d"],
    "reversesequence": ["test_reversesequence_time"],
    # plain ops
    "abs": ["test_abs"],
    "conv": ["test_conv_with_strides_padding"],
    "matmul": ["test_matmul_4d", "test_matmul_1d_3d"],
    "softmax": ["test_softmax_axis_1"],
    "gather": ["test_gather_1"],
    "layernormalization": ["test_layer_normalization_3d_axis1_epsilon"],
    "split": ["test_split_equal_parts_1d_opset18", "test_split_variable_parts_2d_opset18"],
    # AveragePool in 1-D and 3-D (sum pooling), with dilations (ceildivsi)
    "averagepool": ["test_averagepool_1d_default", "test_averagepool_3d_dilations_small",
                    "test_averagepool_2d_dilations"],
    "lstm": ["test_lstm_defaults", "test_lstm_batchwise"],
}
REFUSED = {  # refused by name (on import, or by the call): torch-mlir would crash, or be wrong
    "test_lstm_with_peepholes": ("import-refused", "torch-mlir's conversion ignores"),
    "test_cast_FLOAT_to_UINT4": ("import-refused", "the ONNX model uses UINT4"),
    "test_resize_downsample_scales_linear_align_corners": (
        "run-error", "align_corners with scales that do not give the output shape"),
}
MODULES = [*PASS, "cast"]


def test_node_subset(tmp_path):
    out = tmp_path / "results.json"
    names = [name for cases in PASS.values() for name in cases] + list(REFUSED)
    proc = subprocess.run([sys.executable, str(RUNNER), "--generated", ",".join(MODULES),
                           "--jobs", str(max(os.cpu_count() or 1, 2)), "--timeout", "120",
                           "--json", str(out), *names],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert sorted(results) == sorted(names)
    wrong = {n: r["reason"] for n, r in results.items() if r["class"] == "wrong"}
    assert not wrong, f"wrong answers: {wrong}"
    failed = {n: f"{r['class']}: {r['reason']}" for n, r in results.items()
              if n not in REFUSED and r["class"] != "pass"}
    assert not failed, f"no longer pass: {failed}"
    for name, (klass, reason) in REFUSED.items():
        assert results[name]["class"] == klass, results[name]
        assert reason in results[name]["reason"], results[name]


BLOCKED = ("onnx", "torch_mlir", "torch", "xdsl", "cffi", "pyree.compiler")


def test_compile_here_run_where_no_compiler_is(tmp_path):
    """--compile-only writes the modules, inputs and ONNX's expectations; --run compares them
    importing none of onnx, torch-mlir, xdsl, cffi or the compiler (a GPU host has none)."""
    names = ["test_abs", "test_cumsum_2d_negative_axis", "test_lstm_with_peepholes"]
    out = tmp_path / "compiled"
    proc = subprocess.run([sys.executable, str(RUNNER), "--generated", "abs,cumsum,lstm",
                           "--jobs", "2", "--compile-only", str(out), *names],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compiled 2" in proc.stdout and "import-refused 1" in proc.stdout, proc.stdout
    block = (f"import runpy, sys\nfor m in {BLOCKED!r}: sys.modules[m] = None\n"
             f"sys.argv = ['onnx_node_tests.py', '--run', {str(out)!r}, '--jobs', '2', "
             f"'--json', {str(tmp_path / 'results.json')!r}]\n"
             f"runpy.run_path({str(RUNNER)!r}, run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert {n: r["class"] for n, r in results.items()} == {
        "test_abs": "pass", "test_cumsum_2d_negative_axis": "pass",
        "test_lstm_with_peepholes": "import-refused"}
