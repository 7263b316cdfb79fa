"""ONNX's backend node tests through pyree: import, compile (llvm-cpu), run (local-task), compare.

    python dev/onnx_node_tests.py --data DIR [--sample N] [--jobs J] [--json OUT] [-k REGEX] [NAME...]
    python dev/onnx_node_tests.py --generated MODULE[,MODULE...] [--json OUT] [-k REGEX] [NAME...]
    python dev/onnx_node_tests.py --data DIR --backend cuda --device cuda   # (vulkan-spirv, vulkan)
    python dev/onnx_node_tests.py --data DIR --backend cuda --compile-only OUT  # then, on a GPU
    python dev/onnx_node_tests.py --run OUT --device cuda                      # host: no onnx

``--data``: the ``data/node`` folder of an onnx wheel that still ships it (onnx 1.22: ``pip
download onnx==1.22.0 --no-deps`` and unzip ``onnx/backend/test/data/node``; keep it outside the
repository, ONNX's data is not ours to commit). ``--generated``: the cases regenerated in memory
from ``onnx.backend.test.case.node.<MODULE>`` (what the installed onnx computes with numpy;
onnx 1.23 ships no data folder), as CI runs a subset.

Each test's ``model.onnx`` goes through ``import_onnx``, ``compile_str`` (``--backend``, default
llvm-cpu) and ``load_module`` (``--device``, default local-task); every ``test_data_set_*`` is
run and compared as ``onnx.backend.test.runner`` compares (same count and shape, same dtype,
``assert_allclose`` with the case's rtol/atol, 1e-3/1e-7 by default, NaN equal to NaN). One
exception to "same dtype": a result of a signless integer type (pyree's functions have no
signedness) is read as the integer type of the same width that the ONNX graph declares, as a
backend returning the graph's types would (and as IREE's runtime lets signless and signed
buffers of one width stand for each other).

Every test ends in one class, printed worst first: wrong (numbers, shape or dtype differ),
import-refused, compile-refused, run-error (loading or calling), crash (the child process died),
timeout, random (a random op's draws differ from ONNX's, as any generator's would, but their
shapes, dtypes and range are right), pass. Each test runs in a child process forked from this
one (the frameworks are imported once, here), under ``--timeout`` seconds, ``--jobs`` at a time.

A GPU host without torch-mlir, onnx or the compiler's dependencies runs the sweep in two steps:
``--compile-only OUT`` here writes each test's module (for ``--backend``), inputs and ONNX's
expected results (numpy's ``.npz``) and its facts (or the refusal) under ``OUT/<test>/``;
``--run OUT`` there needs only numpy and pyree.runtime, and compares as above.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import multiprocessing
import os
import re
import sys
import time
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path

CLASSES = ("wrong", "import-refused", "compile-refused", "run-error", "crash", "timeout", "random",
           "pass")
# Ops whose results are draws: no value can match ONNX's (numpy's) generator, so a test that
# uses one is "random" when the values differ but the results' count, shapes, dtypes (and
# Bernoulli's 0-or-1 values) are right.
RANDOM = frozenset({"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike",
                    "RandomUniform", "RandomUniformLike"})
COMPILED = "compiled"  # --compile-only: written out for --run


class Case:
    """One node test: its name, and how to get (model, data sets, rtol, atol) in the child
    (or, for ``--run``, the folder ``--compile-only`` wrote it to)."""

    def __init__(self, name: str, folder: Path | None = None, test_case=None):
        self.name, self.folder, self.test_case = name, folder, test_case

    def load(self):
        import onnx
        from onnx import numpy_helper

        if self.test_case is not None:
            t = self.test_case
            sets = [([_array(v) for v in inputs], [_array(v) for v in outputs])
                    for inputs, outputs in t.data_sets]
            return t.model, sets, t.rtol, t.atol
        model = onnx.load(str(self.folder / "model.onnx"))
        rtol, atol = 1e-3, 1e-7
        if (self.folder / "data.json").exists():
            data = json.loads((self.folder / "data.json").read_text())
            rtol, atol = data.get("rtol", rtol), data.get("atol", atol)
        sets = []
        for data_set in sorted(glob.glob(str(self.folder / "test_data_set_*"))):
            pair = []
            for kind, declared in (("input", model.graph.input), ("output", model.graph.output)):
                values = []
                for i in range(len(glob.glob(os.path.join(data_set, f"{kind}_*.pb")))):
                    values.append(_read(os.path.join(data_set, f"{kind}_{i}.pb"),
                                        declared[i].type, onnx, numpy_helper))
                pair.append(values)
            sets.append(tuple(pair))
        return model, sets, rtol, atol


def _array(value):
    """A regenerated case's value as an array (ONNX's expectations hold protos and numpy
    scalars; the runner's ``_normalize_tensor`` leaves scalars as they are, of shape ())."""
    import numpy as np
    import onnx
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value) if isinstance(value, np.generic) else value


def _read(path: str, type_proto, onnx, numpy_helper):
    """A test data file as the ONNX runner reads it (a tensor, sequence or optional)."""
    data = Path(path).read_bytes()
    if type_proto.HasField("sequence_type"):
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if type_proto.HasField("optional_type"):
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return numpy_helper.to_array(proto)


def run_case(case: Case, backend: str = "llvm-cpu", device: str = "local-task") -> tuple[str, str]:
    """(class, reason) for one test, in this process, compiled for ``backend`` and run on
    ``device``."""
    prepared = prepare(case, backend)
    if isinstance(prepared[0], str):
        return prepared
    return execute(*prepared, device)


# --target as a CompileOptions field (forked children inherit it)
TARGET_OPTIONS: dict[str, str] = {}


def prepare(case: Case, backend: str):
    """(vmfb, data sets, facts) for ``case`` compiled for ``backend``, or (class, reason) where
    it is refused. ``facts``: what ``execute`` needs besides: the function's name, the graph's
    declared result dtypes, rtol and atol."""
    from pyree.compiler import CompileOptions, compile_str, import_onnx

    model, sets, rtol, atol = case.load()
    try:
        text = import_onnx(model)
    except Exception as err:  # noqa: BLE001 - every refusal is counted, with its reason
        return "import-refused", _reason(err)
    try:
        vmfb = compile_str(text, CompileOptions(target_backends=[backend], **TARGET_OPTIONS))
    except Exception as err:  # noqa: BLE001
        return "compile-refused", _reason(err)
    declared = [_declared_dtype(o.type) for o in model.graph.output]
    facts = {"function": model.graph.name, "rtol": rtol, "atol": atol,
             "declared": [None if d is None else d.name for d in declared],
             "random": sorted({n.op_type for n in model.graph.node} & RANDOM)}
    return vmfb, sets, facts


def execute(vmfb: bytes, sets: list, facts: dict, device: str) -> tuple[str, str]:
    """(class, reason) for a compiled test run on ``device`` (needs only numpy and
    pyree.runtime: the GPU hosts have no torch-mlir)."""
    import numpy as np
    import pyree.runtime as rt

    declared = [None if d is None else _dtype(d) for d in facts["declared"]]
    for inputs, expected in sets:
        try:
            function = rt.load_module(vmfb, device=device)[facts["function"]]
            for value in inputs:
                if not isinstance(value, np.ndarray) or value.dtype == object:
                    raise TypeError(f"an input of type {type(value).__name__} "
                                    f"{getattr(value, 'dtype', '')}: only tensors are passed")
            results = function(*inputs)
            results = [] if results is None else \
                list(results) if isinstance(results, tuple) else [results]
            got = [r.to_host() for r in results]
        except Exception as err:  # noqa: BLE001
            return "run-error", _reason(err)
        problem = compare(got, expected, declared, facts["rtol"], facts["atol"])
        if problem and facts.get("random"):
            if compare(got, expected, declared, facts["rtol"], facts["atol"], values=False) \
                    or ("Bernoulli" in facts["random"]
                        and not all(np.isin(g, (0, 1)).all() for g in got)):
                return "wrong", problem
            return "random", f"draws of {', '.join(facts['random'])}: {problem}"
        if problem:
            return "wrong", problem
    return "pass", ""


def compile_only(case: Case, backend: str, out: Path) -> tuple[str, str]:
    """``prepare``, written to ``out/<name>/``: ``facts.json`` (with the class and reason where
    it is refused), ``module.vmfb`` and ``data.npz`` (set K's inputs ``iK_N``, expectations
    ``eK_N``); ("compiled", "") or the refusal."""
    import numpy as np

    folder = out / case.name
    folder.mkdir(parents=True, exist_ok=True)
    prepared = prepare(case, backend)
    if isinstance(prepared[0], str):
        klass, reason = prepared
        (folder / "facts.json").write_text(json.dumps({"class": klass, "reason": reason}))
        return prepared
    vmfb, sets, facts = prepared
    arrays, dtypes = {}, {}
    for k, (inputs, expected) in enumerate(sets):
        for kind, values in (("i", inputs), ("e", expected)):
            for n, value in enumerate(values):
                if not isinstance(value, np.ndarray) or value.dtype == object:
                    reason = (f"a value of type {type(value).__name__} "
                              f"{getattr(value, 'dtype', '')}: only tensors are carried")
                    (folder / "facts.json").write_text(
                        json.dumps({"class": "run-error", "reason": reason}))
                    return "run-error", reason
                arrays[f"{kind}{k}_{n}"], dtypes[f"{kind}{k}_{n}"] = value, value.dtype.name
    facts["sets"] = [[len(inputs), len(expected)] for inputs, expected in sets]
    facts["dtypes"] = dtypes
    (folder / "module.vmfb").write_bytes(vmfb)
    np.savez(folder / "data.npz", **arrays)
    (folder / "facts.json").write_text(json.dumps(facts))
    return "compiled", ""


def run_compiled(case: Case, device: str) -> tuple[str, str]:
    """A test that ``compile_only`` wrote to ``case.folder``, run on ``device``."""
    import numpy as np

    facts = json.loads((case.folder / "facts.json").read_text())
    if "class" in facts:
        return facts["class"], facts["reason"]
    with np.load(case.folder / "data.npz") as data:
        def array(key):  # bfloat16 is saved as raw 2-byte records
            return data[key].view(_dtype(facts["dtypes"][key]))
        sets = [([array(f"i{k}_{n}") for n in range(ins)], [array(f"e{k}_{n}") for n in range(outs)])
                for k, (ins, outs) in enumerate(facts["sets"])]
    return execute((case.folder / "module.vmfb").read_bytes(), sets, facts, device)


def _dtype(name: str):
    import numpy as np
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _declared_dtype(type_proto):
    import onnx
    if not type_proto.HasField("tensor_type"):
        return None
    return onnx.helper.tensor_dtype_to_np_dtype(type_proto.tensor_type.elem_type)


def compare(got: list, expected: list, declared: list, rtol: float, atol: float,
            values: bool = True) -> str:
    """What ``onnx.backend.test.runner.assert_similar_outputs`` would fail on, or ''; only
    counts, shapes and dtypes where not ``values``."""
    import numpy as np

    if len(got) != len(expected):
        return f"{len(got)} results, expected {len(expected)}"
    for i, (out, ref) in enumerate(zip(got, expected)):
        if not isinstance(ref, np.ndarray):
            return f"result {i}: expected a {type(ref).__name__}, which pyree cannot return"
        if out.shape != ref.shape:
            return f"result {i}: shape {out.shape}, expected {ref.shape}"
        if (out.dtype != ref.dtype and out.dtype.kind in "iu" and ref.dtype.kind in "iu"
                and out.dtype.itemsize == ref.dtype.itemsize and declared[i] == ref.dtype):
            out = out.view(ref.dtype)  # signless: the graph's declared type, same bits
        if out.dtype != ref.dtype:
            return f"result {i}: dtype {out.dtype}, expected {ref.dtype}"
        if not values:
            continue
        if ref.dtype == object:
            if not np.array_equal(out, ref):
                return f"result {i}: strings differ"
            continue
        tolerance = rtol
        if out.dtype.name == "bfloat16":
            tolerance = max(rtol, 2 ** -6)
            out, ref = out.astype(np.float32), ref.astype(np.float32)
        try:
            np.testing.assert_allclose(out, ref, rtol=tolerance, atol=atol)
        except AssertionError as err:
            lines = [line.strip() for line in str(err).splitlines() if line.strip()]
            detail = "; ".join(line for line in lines if line.startswith(("Mismatched", "Max")))
            return f"result {i}: {detail or lines[0]}"
    return ""


def _reason(err: BaseException) -> str:
    lines = (str(err).strip() or type(err).__name__).splitlines()
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:  # "...failed on the ONNX model:" + what failed
        first += " " + lines[1].strip()
    name = type(err).__name__
    return first if name in ("CompileError", "InvocationError") else f"{name}: {first}"


def _child(case: Case, connection, job) -> None:
    try:
        result = job(case)
    except BaseException as err:  # noqa: BLE001 - the runner's own failure, still one result
        result = ("run-error", f"runner: {_reason(err)}")
    connection.send(result)
    connection.close()


def sweep(cases: list[Case], jobs: int, timeout: float, report=None, job=run_case) -> dict[str, dict]:
    """Runs ``job(case)`` for every case in a forked child, ``jobs`` at a time; {name: {class,
    reason, seconds}}. The children initialise the device (a GPU driver is never started in
    this process)."""
    context = multiprocessing.get_context("fork")
    results: dict[str, dict] = {}
    pending = list(reversed(cases))
    running: dict = {}  # connection -> (case, process, start)

    def finish(connection, klass: str, reason: str) -> None:
        case, process, start = running.pop(connection)
        results[case.name] = {"class": klass, "reason": reason,
                              "seconds": round(time.monotonic() - start, 2)}
        connection.close()
        if report is not None:
            report(case.name, results[case.name], len(results), len(cases))

    while pending or running:
        while pending and len(running) < jobs:
            case = pending.pop()
            parent, child = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(case, child, job), daemon=True)
            process.start()
            child.close()
            running[parent] = (case, process, time.monotonic())
        for connection in wait(list(running), timeout=1.0):
            process = running[connection][1]
            try:
                klass, reason = connection.recv()
            except (EOFError, OSError):
                process.join()
                code = process.exitcode
                finish(connection, "crash", f"signal {-code}" if code and code < 0
                       else f"exit status {code}")
                continue
            process.join()
            finish(connection, klass, reason)
        now = time.monotonic()
        for connection, (_, process, start) in list(running.items()):
            if now - start > timeout:
                process.kill()
                process.join()
                finish(connection, "timeout", f"over {timeout:g} s")
    return results


def reason_key(reason: str) -> str:
    """A reason with its numbers, names and locations blurred, to count alike refusals."""
    reason = re.sub(r"loc\([^)]*\)|<string>:\d+:\d+|\btest_\w+|%\w+", "_", reason)
    return re.sub(r"\d+", "N", reason)[:160]


def table(results: dict[str, dict], top: int) -> str:
    counts = Counter(r["class"] for r in results.values())
    shown = CLASSES + ((COMPILED,) if counts[COMPILED] else ())
    lines = [f"{len(results)} tests: " + ", ".join(f"{k} {counts[k]}" for k in shown)]
    wrong = sorted(n for n, r in results.items() if r["class"] == "wrong")
    for name in wrong:
        lines.append(f"  WRONG {name}: {results[name]['reason']}")
    for klass in CLASSES[1:-1]:
        reasons = Counter(reason_key(r["reason"]) for r in results.values()
                          if r["class"] == klass)
        if reasons:
            lines.append(f"{klass} ({counts[klass]}):")
            lines.extend(f"  {n:4d}  {reason}" for reason, n in reasons.most_common(top))
    return "\n".join(lines)


def folder_cases(data: Path) -> list[Case]:
    return [Case(p.name, folder=p) for p in sorted(data.iterdir()) if (p / "model.onnx").exists()]


def generated_cases(modules: list[str]) -> list[Case]:
    """The node cases that ``onnx.backend.test.case.node.<module>`` computes on import."""
    import importlib
    import warnings

    node = importlib.import_module("onnx.backend.test.case.node")
    before = len(node._NodeTestCases)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's divide-by-zero in ONNX's own expectations
        for module in modules:
            importlib.import_module(f"onnx.backend.test.case.node.{module}")
    return [Case(t.name, test_case=t) for t in node._NodeTestCases[before:]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="onnx's backend/test/data/node folder")
    source.add_argument("--generated", metavar="MODULES",
                        help="comma-separated modules of onnx.backend.test.case.node")
    source.add_argument("--run", type=Path, metavar="DIR",
                        help="run the tests --compile-only wrote to DIR (needs no onnx, "
                             "torch-mlir or compiler: for a GPU host)")
    p.add_argument("--compile-only", type=Path, metavar="DIR",
                   help="import and compile (--backend) each test, and write it, its data and "
                        "expectations to DIR for --run")
    p.add_argument("names", nargs="*", help="run only these tests")
    p.add_argument("-k", dest="pattern", help="run only the tests whose name matches REGEX")
    p.add_argument("--sample", type=int, default=1, metavar="N", help="every N-th test")
    p.add_argument("--backend", default="llvm-cpu", help="target backend (default llvm-cpu)")
    p.add_argument("--device", default="local-task", help="device URI (default local-task)")
    p.add_argument("--target", default="", help="the backend's target: --iree-cuda-target "
                   "(cuda) or --iree-vulkan-target (vulkan-spirv: hopper-h100-linux)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=300.0, metavar="S")
    p.add_argument("--json", type=Path, metavar="OUT",
                   help="write per-test results here (as they finish)")
    p.add_argument("--resume", action="store_true",
                   help="keep the results already in --json and run only the other tests")
    p.add_argument("--top", type=int, default=12, help="reasons listed per class")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per finished test")
    args = p.parse_args(argv)

    if args.run is not None and args.compile_only is not None:
        p.error("--compile-only writes what --run reads: give one")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # imported once here; each forked child starts with them loaded
    import numpy  # noqa: F401
    import pyree.runtime.vm  # noqa: F401
    if args.run is None:
        import onnx  # noqa: F401
        import pyree.compiler.importers.onnx  # noqa: F401
        import torch_mlir.extras.onnx_importer  # noqa: F401

    if args.data is not None:
        cases = folder_cases(args.data)
    elif args.run is not None:
        cases = [Case(d.name, folder=d) for d in sorted(args.run.iterdir())
                 if (d / "facts.json").exists()]
    else:
        cases = generated_cases(args.generated.split(","))
    if args.target:
        field = {"cuda": "cuda_target", "vulkan-spirv": "vulkan_target"}.get(args.backend)
        if field is None:
            p.error(f"--target names a cuda or vulkan-spirv target; --backend is {args.backend}")
        TARGET_OPTIONS[field] = args.target
    job = functools.partial(run_case, backend=args.backend, device=args.device)
    if args.compile_only is not None:
        job = functools.partial(compile_only, backend=args.backend, out=args.compile_only)
    elif args.run is not None:
        job = functools.partial(run_compiled, device=args.device)
    if args.names:
        wanted = set(args.names)
        cases = [c for c in cases if c.name in wanted]
        missing = wanted - {c.name for c in cases}
        if missing:
            p.error("no such tests: " + ", ".join(sorted(missing)))
    if args.pattern:
        cases = [c for c in cases if re.search(args.pattern, c.name)]
    cases = cases[::args.sample]

    kept: dict[str, dict] = {}
    if args.resume and args.json is not None and args.json.exists():
        wanted = {c.name for c in cases}
        kept = {n: r for n, r in json.loads(args.json.read_text()).items() if n in wanted}
        cases = [c for c in cases if c.name not in kept]
    done: dict[str, dict] = dict(kept)

    def report(name, result, count, total):
        done[name] = result
        if args.json is not None and (count % 20 == 0 or count == total):
            args.json.write_text(json.dumps(dict(sorted(done.items())), indent=1) + "\n")
        if args.verbose:
            print(f"[{count}/{total}] {result['class']:15s} {name} {result['reason'][:150]}",
                  flush=True)

    start = time.monotonic()
    sweep(cases, max(args.jobs, 1), args.timeout, report, job)
    print(table(done, args.top))
    where = f"{args.backend} on {args.device}"
    if args.compile_only is not None:
        where = f"{args.backend}, written to {args.compile_only}"
    elif args.run is not None:
        where = f"{args.run} on {args.device}"
    print(f"({time.monotonic() - start:.0f} s, {args.jobs} jobs, {where})")
    if args.json is not None:
        args.json.write_text(json.dumps(dict(sorted(done.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
