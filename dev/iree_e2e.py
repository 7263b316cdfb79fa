"""Run a copy of IREE's e2e check files (tests/e2e of iree-org/iree) through pyree on local-task.

    python dev/iree_e2e.py DIR [--jobs N] [--timeout S] [--json OUT.json] [--only NAME ...]

DIR holds IREE's folders as IREE has them (``linalg``, ``linalg_ext_ops``, ``stablehlo_ops``,
``tensor_ops``, ``tosa_ops``); the files stay outside this repository. Each file is compiled for
llvm-cpu with the flags its folder's BUILD rule gives (``--iree-input-type`` for the StableHLO
and TOSA folders) plus those on its own ``// RUN:`` lines, and every exported function without
arguments runs on local-task as ``iree-check-module`` runs it. A file is:

- pass: it compiled and every check held;
- fail: a check failed or a function failed to run (listed first: these are wrong answers);
- refused: the compiler refused it (grouped by the first line of its error, digits blanked);
- crash: the child process died or raised something that is not a pyree error;
- timeout: it ran past ``--timeout`` seconds.

Each file runs in a child process of its own, so one crash or hang costs only that file.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# The compiler flags of each folder's llvm-cpu check suite in IREE's BUILD files.
FOLDER_FLAGS = {
    "stablehlo_ops": ["--iree-input-type=stablehlo"],
    "tosa_ops": ["--iree-input-type=tosa"],
    "linalg": ["--iree-llvmcpu-target-cpu=generic"],
}
_FLAG = re.compile(r"(--iree-[\w-]+(?:=\S+)?)")


def file_flags(path: Path) -> list[str]:
    """The folder's flags, then the ``--iree-*`` flags of the file's ``// RUN:`` lines."""
    flags = list(FOLDER_FLAGS.get(path.parent.name, []))
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("// RUN:"):
            flags += [f for f in _FLAG.findall(line) if f not in flags
                      and not f.startswith(("--iree-hal-target", "--iree-input-type"))]
    return flags


def run_one(path: str, flags: list[str]) -> dict:
    """In the child: compile ``path`` and run its tests; the outcome as a dict."""
    import pyree.runtime as rt
    from pyree.compiler import CompileError, compile_str

    text = Path(path).read_text()
    try:
        vmfb = compile_str(text, target_backends=["llvm-cpu"], extra_args=flags,
                           source_name=path)
    except CompileError as e:
        return {"status": "refused", "error": str(e)}
    module = rt.load_module(vmfb, device="local-task")
    tests = [module[n] for n in module.function_names if not module[n].argument_types]
    failures = []
    for test in tests:
        try:
            failures += [f"@{test.name}: {f.kind}: {f.message}" for f in test.run_checks()]
        except rt.PyreeError as e:
            failures.append(f"@{test.name} failed to run: {' '.join(str(e).split())}")
    if not tests:
        return {"status": "refused", "error": "no function without arguments to run"}
    return {"status": "fail" if failures else "pass", "tests": len(tests),
            "failures": failures}


def run_child(path: Path, timeout: float) -> dict:
    """Runs one file in a child process with a time limit."""
    flags = file_flags(path)
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", str(path), *flags],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "flags": flags, "seconds": timeout}
    seconds = round(time.perf_counter() - start, 1)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"status": "crash", "flags": flags, "seconds": seconds,
                "error": f"exit {proc.returncode}: {tail}"}
    return {**json.loads(lines[-1]), "flags": flags, "seconds": seconds}


def refusal_class(error: str) -> str:
    """The first line of a refusal, its location and numbers blanked, so alike ones group."""
    line = error.strip().splitlines()[0] if error.strip() else "(empty error)"
    line = re.sub(r"^\S+\.mlir:\d+:\d+:\s*", "", line)
    line = re.sub(r"'[^']*'", "'…'", line)
    return re.sub(r"\d+", "N", line)[:160]


def report(results: dict[str, dict]) -> str:
    by_status = collections.defaultdict(list)
    for name, r in sorted(results.items()):
        by_status[r["status"]].append(name)
    out = [f"{len(results)} files: " + ", ".join(
        f"{len(by_status[s])} {s}" for s in ("pass", "fail", "refused", "crash", "timeout"))]
    for name in by_status["fail"]:
        out.append(f"FAIL {name}")
        out += [f"    {f}" for f in results[name]["failures"][:5]]
    classes = collections.defaultdict(list)
    for name in by_status["refused"]:
        classes[refusal_class(results[name]["error"])].append(name)
    for cls, names in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        out.append(f"REFUSED ({len(names)}) {cls}")
        out += [f"    {n}" for n in names]
    for status in ("crash", "timeout"):
        for name in by_status[status]:
            out.append(f"{status.upper()} {name} {results[name].get('error', '')}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(run_one(argv[1], argv[2:])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", type=Path, help="write every file's outcome here")
    parser.add_argument("--only", nargs="*", default=[], help="run only files whose path "
                        "relative to DIR contains one of these")
    args = parser.parse_args(argv)
    files = sorted(args.dir.glob("*/*.mlir"))
    if args.only:
        files = [f for f in files if any(o in str(f.relative_to(args.dir)) for o in args.only)]
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(lambda f: run_child(f, args.timeout), files))
    results = {str(f.relative_to(args.dir)): r for f, r in zip(files, outcomes)}
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
