"""The ONNX import runs in a worker process, so that torch-mlir dying takes only the worker.

torch-mlir aborts its process on some models (an ``LLVM ERROR`` on 4-bit unsigned types) and
segfaults on others; in-process, that ended the user's Python session or ``pyree-import-onnx``
without a word. In a worker (``parallel.run_apart``, which also keeps Ctrl-C prompt while the
pass pipelines hold the GIL), the caller sees it die and says what died where:

    the ONNX importer crashed on node 2 of 3 (CastLike 'cast_1') in torch-mlir's
    torch-onnx-to-torch-backend-pipeline (signal 6, SIGABRT: LLVM ERROR: ...)

The worker writes its current step and the model's node list to a private folder before each
stage, and its stderr (where LLVM writes its last words) to a file there. A native crash happens
deep inside a pass pipeline, where no Python code runs per node, so the node is found afterwards:
the graph's first k nodes (with every value they leave unused as an output) are imported again in
fresh workers, bisecting k until the shortest prefix that still crashes; its last node is the one.
"""

from __future__ import annotations

import functools
import os
import signal
import tempfile
from pathlib import Path

from pyree.compiler.codegen.common.parallel import WorkerDied, run_apart
from pyree.compiler.errors import CompileError

# The most prefixes imported while searching for the crashing node (a 65536-node graph).
_MAX_PROBES = 17


class Journal:
    """The worker's record, in files of ``folder`` that the caller reads if the worker dies;
    without a folder (an import run in-process), it records nothing."""

    def __init__(self, folder: str | None):
        self.folder = folder

    def step(self, what: str) -> None:
        if self.folder is not None:
            Path(self.folder, "step").write_text(what)

    def loaded(self, proto) -> None:
        """The top-level nodes of the model as imported, one ``op_type<TAB>name`` a line."""
        if self.folder is not None:
            Path(self.folder, "nodes").write_text(
                "".join(f"{n.op_type}\t{n.name}\n" for n in proto.graph.node))


def run(job, model) -> str:
    """``job(model, journal=...)`` in a worker; a CompileError saying where it crashed if the
    worker dies."""
    with tempfile.TemporaryDirectory(prefix="pyree-import-onnx-") as folder:
        try:
            return run_apart(functools.partial(_journaled, job, folder=folder), model)
        except WorkerDied as died:
            raise CompileError(_crash_report(job, model, folder, died.status)) from None


def _journaled(job, model, *, folder: str):
    """The worker's side: the job, its stderr (native writes included) kept in ``folder``, and
    no Python traceback dumped on a crash (a forked worker inherits the caller's faulthandler,
    which pytest enables, and its traceback would name only this function)."""
    import faulthandler
    import sys

    faulthandler.disable()
    sys.stderr.flush()
    saved = os.dup(2)
    log = os.open(os.path.join(folder, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 2)
    os.close(log)
    try:
        return job(model, journal=Journal(folder))
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _crash_report(job, model, folder: str, status: int) -> str:
    step = _read(folder, "step") or "starting"
    nodes = _read(folder, "nodes").splitlines()
    where = f"while {step}" if not step.startswith("torch-mlir's") else f"in {step}"
    culprit = _crashing_node(job, model, len(nodes)) if nodes else None
    if culprit is not None:
        op_type, _, name = nodes[culprit].partition("\t")
        named = f" '{name}'" if name else ""
        where = f"on node {culprit + 1} of {len(nodes)} ({op_type}{named}) {where}"
    return (f"the ONNX importer crashed {where} ({_death(status, _last_words(folder))}). "
            "torch-mlir cannot import this model as it is: replace that node, or try "
            "--opset-version or another torch-mlir release.")


def _crashing_node(job, model, count: int) -> int | None:
    """The index of the node whose import crashes: the last of the shortest prefix of the graph
    that still crashes, or None if the whole graph cut this way does not crash."""
    if not _crashes(job, model, count):
        return None
    good, bad = 0, count
    for _ in range(_MAX_PROBES):
        if bad - good <= 1:
            return bad - 1
        middle = (good + bad) // 2
        if _crashes(job, model, middle):
            bad = middle
        else:
            good = middle
    return None


def _crashes(job, model, nodes: int) -> bool:
    with tempfile.TemporaryDirectory(prefix="pyree-import-onnx-") as folder:
        try:
            run_apart(functools.partial(_journaled, functools.partial(job, first=nodes),
                                        folder=folder), model)
        except WorkerDied:
            return True
        except CompileError:
            pass
    return False


def first_nodes(proto, count: int):
    """A copy of ``proto`` with only the graph's first ``count`` nodes, returning every value
    they compute and do not use (the graph's own outputs may not be computed yet)."""
    model = type(proto)()
    model.CopyFrom(proto)
    graph = model.graph
    kept = list(graph.node)[:count]
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for node in kept for name in node.input}
    typed = {v.name: v for v in (*proto.graph.value_info, *proto.graph.output)}
    del graph.output[:]
    graph.output.extend(typed[name] for node in kept for name in node.output
                        if name and name not in used and name in typed)
    return model


def _read(folder: str, name: str) -> str:
    try:
        return Path(folder, name).read_text()
    except OSError:
        return ""


def _last_words(folder: str) -> str:
    """What LLVM printed as it aborted, if it did."""
    lines = [line.strip() for line in _read(folder, "stderr").splitlines()]
    return next((line for line in lines if line.startswith("LLVM ERROR")), "")


def _death(status: int, words: str) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "unknown signal"
        death = f"signal {-status}, {name}"
    else:
        death = f"exit status {status}"
    return f"{death}: {words}" if words else death
