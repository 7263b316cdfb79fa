"""A refactor changes no output: compile a fixed corpus with two compiler trees and compare.

    python dev/module_corpus.py collect CORPUS [PYTEST_ARGS...]
    python dev/module_corpus.py build CORPUS OUT [--src SRC] [--all-targets] [--jobs N] [--sample K]
    python dev/module_corpus.py compare OUT_A OUT_B

``collect`` runs pytest in this process with ``compile_str`` wrapped: every compile the chosen
tests make that succeeds (the MLIR text, its options, its source name) is written once to CORPUS
(one JSON file per distinct compile). The models of tests/models come in through their importer
tests as MLIR text, so building the corpus later needs neither torch nor the tests.

``build`` compiles every corpus entry with the compiler in SRC (a ``packages/base-compiler/src``
folder; default this tree's), in worker processes whose ``PYTHONPATH`` starts with SRC, and
writes ``OUT/manifest.json``: each entry's module digest (sha256), or its parameter file's and
dumped executable files' digests too, or the error it raised. ``--all-targets`` also compiles each
entry for every target backend it was not recorded with (llvm-cpu, vmvx, cuda, vulkan-spirv,
rocm), so a program the tests run on one target still guards the others.

``--sample K`` builds every K-th entry only (a quick check while working; the full build
before merging).

``compare`` prints every entry whose result differs and exits 1 when any does.

A base tree for SRC: ``git worktree add /tmp/base COMMIT`` then ``--src
/tmp/base/packages/base-compiler/src``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("llvm-cpu", "vmvx", "cuda", "vulkan-spirv", "rocm")
# Options that name files or streams: the build points them into a scratch folder.
_PATH_FIELDS = ("export_parameters", "splat_parameters")
_DROPPED = ("progress", "print_ir_after_all", "print_ir_after")


def _record(options) -> dict:
    fields = {}
    for name, value in vars(options).items():
        if name in _DROPPED:
            continue
        if name in _PATH_FIELDS and value:
            scope, _, path = value.rpartition("=")
            value = (scope + "=" if scope else "") + "PARAMS" + Path(path).suffix
        if name == "dump_executables_to":
            value = sorted(value)  # the kinds asked for; the folders are the build's
        fields[name] = value
    return fields


def collect(corpus: Path, pytest_args: list[str]) -> int:
    import pytest
    from pyree.compiler import pipeline

    corpus.mkdir(parents=True, exist_ok=True)
    inner = pipeline._compile

    def recording(text: str, options, source_name: str) -> bytes:
        data = inner(text, options, source_name)
        entry = {"source_name": source_name, "options": _record(options), "text": text}
        blob = json.dumps(entry, sort_keys=True, default=str)
        name = hashlib.sha256(blob.encode()).hexdigest()[:20]
        (corpus / f"{name}.json").write_text(blob)
        return data

    pipeline._compile = recording
    return pytest.main(["-q", "-p", "no:cacheprovider", *pytest_args])


def _entries(corpus: Path, all_targets: bool, sample: int) -> list[tuple[str, dict]]:
    entries = []
    for path in sorted(corpus.glob("*.json"))[::sample]:
        entry = json.loads(path.read_text())
        entries.append((path.stem, entry))
        if all_targets:
            recorded = entry["options"]["target_backends"]
            for target in TARGETS:
                if target not in recorded:
                    other = {**entry, "options": {**entry["options"], "target_backends": [target]}}
                    entries.append((f"{path.stem}@{target}", other))
    return entries


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _build_one(entry: dict) -> dict:
    from pyree.compiler import CompileOptions, compile_str

    with tempfile.TemporaryDirectory() as scratch:
        fields = dict(entry["options"])
        for name in _PATH_FIELDS:
            if fields.get(name):
                fields[name] = fields[name].replace("PARAMS", f"{scratch}/params")
        kinds = fields.pop("dump_executables_to", [])
        fields["dump_executables_to"] = {kind: [f"{scratch}/dump"] for kind in kinds}
        try:
            data = compile_str(entry["text"], CompileOptions(**fields), entry["source_name"])
        except Exception as e:  # noqa: BLE001 -- an error is a result to compare, not a stop
            return {"error": f"{type(e).__name__}: {e}"}
        result = {"module": _digest(data)}
        for path in sorted(Path(scratch).rglob("*")):
            if path.is_file():
                result[str(path.relative_to(scratch))] = _digest(path.read_bytes())
        return result


def worker(corpus: Path, all_targets: bool, sample: int, jobs: int, index: int) -> None:
    results = {}
    for k, (name, entry) in enumerate(_entries(corpus, all_targets, sample)):
        if k % jobs == index:
            results[name] = _build_one(entry)
    json.dump(results, sys.stdout)


def build(corpus: Path, out: Path, src: Path, all_targets: bool, sample: int, jobs: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(src), *filter(None, [os.environ.get("PYTHONPATH")])])}
    check = subprocess.run([sys.executable, "-c", "import pyree.compiler; print(pyree.compiler.__file__)"],
                           env=env, capture_output=True, text=True, check=True)
    print(f"compiler: {check.stdout.strip()}", file=sys.stderr)
    workers = [subprocess.Popen([sys.executable, __file__, "_worker", str(corpus), str(sample),
                                 str(jobs), str(k)]
                                + (["--all-targets"] if all_targets else []),
                                env=env, stdout=subprocess.PIPE, text=True) for k in range(jobs)]
    results = {}
    for w in workers:
        results.update(json.loads(w.communicate()[0]))
        if w.returncode:
            print(f"a worker failed (exit {w.returncode})", file=sys.stderr)
            return 1
    (out / "manifest.json").write_text(json.dumps(dict(sorted(results.items())), indent=1))
    errors = sum("error" in r for r in results.values())
    print(f"{len(results)} compiles, {errors} errors -> {out / 'manifest.json'}", file=sys.stderr)
    return 0


def compare(a: Path, b: Path) -> int:
    left = json.loads((a / "manifest.json").read_text())
    right = json.loads((b / "manifest.json").read_text())
    differ = sorted(name for name in left.keys() | right.keys() if left.get(name) != right.get(name))
    for name in differ:
        print(f"{name}:\n  {a}: {left.get(name)}\n  {b}: {right.get(name)}")
    print(f"{len(left.keys() & right.keys())} entries in both, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    if sys.argv[1:2] == ["_worker"]:
        corpus, sample, jobs, index = sys.argv[2], *map(int, sys.argv[3:6])
        worker(Path(corpus), "--all-targets" in sys.argv, sample, jobs, index)
        return 0
    if sys.argv[1:2] == ["collect"]:
        return collect(Path(sys.argv[2]), sys.argv[3:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("corpus", type=Path)
    b.add_argument("out", type=Path)
    b.add_argument("--src", type=Path, default=ROOT / "packages/base-compiler/src")
    b.add_argument("--all-targets", action="store_true")
    b.add_argument("--sample", type=int, default=1)
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args()
    if args.command == "build":
        return build(args.corpus, args.out, args.src.resolve(), args.all_targets, args.sample,
                     args.jobs)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
