"""dev/module_corpus.py, the refactor check: collect records the compiles a test run makes, a
corpus entry builds to the same digests twice, on every target with --all-targets, and compare
reports a changed result."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "dev" / "module_corpus.py"

ADD = """
func.func @add(%a: tensor<7xf32>, %b: tensor<7xf32>) -> tensor<7xf32> {
  %e = tensor.empty() : tensor<7xf32>
  %r = linalg.add ins(%a, %b : tensor<7xf32>, tensor<7xf32>) outs(%e : tensor<7xf32>) -> tensor<7xf32>
  return %r : tensor<7xf32>
}
"""


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def test_a_corpus_builds_to_the_same_digests_and_compare_sees_a_change(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    entry = {"source_name": "add.mlir", "text": ADD,
             "options": {"target_backends": ["llvm-cpu"], "dump_executables_to": ["binaries"]}}
    (corpus / "add.json").write_text(json.dumps(entry))
    (corpus / "bad.json").write_text(json.dumps({**entry, "text": "func.func @f("}))
    for out in ("a", "b"):
        built = _run("build", corpus, tmp_path / out, "--all-targets", "--jobs", 2)
        assert built.returncode == 0, built.stderr
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert set(manifest) == {"add", "bad"} | {f"{n}@{t}" for n in ("add", "bad")
                                              for t in ("vmvx", "cuda", "vulkan-spirv", "rocm")}
    assert len(manifest["add"]["module"]) == 64 and len(manifest["add"]) >= 2  # module + dump
    assert manifest["bad"]["error"].startswith("CompileError")
    same = _run("compare", tmp_path / "a", tmp_path / "b")
    assert same.returncode == 0 and "0 differ" in same.stdout
    manifest["add@cuda"]["module"] = "0" * 64
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))
    changed = _run("compare", tmp_path / "a", tmp_path / "b")
    assert changed.returncode == 1 and "add@cuda" in changed.stdout and "1 differ" in changed.stdout


def test_collect_records_each_distinct_compile_a_test_run_makes(tmp_path):
    (tmp_path / "test_compiles.py").write_text(
        "from pyree.compiler import compile_str\n"
        f"ADD = {ADD!r}\n"
        "def test_twice():\n"
        "    assert compile_str(ADD, target_backends=['llvm-cpu'])\n"
        "    assert compile_str(ADD, target_backends=['llvm-cpu'])\n"
        "def test_vulkan():\n"
        "    assert compile_str(ADD, target_backends=['vulkan-spirv'])\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "collect", str(tmp_path / "corpus"),
                           str(tmp_path / "test_compiles.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    entries = [json.loads(p.read_text()) for p in (tmp_path / "corpus").glob("*.json")]
    assert sorted(e["options"]["target_backends"] for e in entries) == [["llvm-cpu"],
                                                                        ["vulkan-spirv"]]
    assert all(e["text"] == ADD for e in entries)
