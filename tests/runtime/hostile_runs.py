"""Runs hostile mutants of real modules on a device in child processes and judges each one: the
harness of the module fuzz tests (tests/runtime for the CPU drivers, tests/drivers/cuda and
tests/drivers/vulkan for the GPUs).

A child (run_mutants.py) loads and runs mutants in order; this side watches it. A mutant passes
when it is refused with a PyreeError or each function returns a result or a PyreeError, and no
result holds the poison pattern the child seeded the buffer pool with. It fails when the child
dies of a signal (a crash), reports another exception (a bug) or a leak, or stops answering for
DEADLINE_S (a hang). The one hang allowed is a host-program loop that runs forever in a
function the mutation rewrote (the child interrupts it after a few seconds): the module asked for
it, as IREE allows.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from .module_mutations import mutant

WORKER = Path(__file__).with_name("run_mutants.py")
DEADLINE_S = 30
# CI runs a fixed few hundred; a GPU host may run a longer sweep with other seeds
MUTANTS = int(os.environ.get("PYREE_HOSTILE_MUTANTS", "240"))
SEED = int(os.environ.get("PYREE_HOSTILE_SEED", "26"))

# The modules mutated: matmuls with constants and a transient arena (tests/data/mlp.mlir),
# elementwise and reduction kernels with results written by copies, and host control flow.
ARITH = """
func.func @arith(%a: tensor<37x53xf32>, %b: tensor<53xf32>) -> (tensor<37x53xf32>, tensor<37xf32>, tensor<53xf32>) {
  %w = arith.constant dense<0.5> : tensor<37x53xf32>
  %e = tensor.empty() : tensor<37x53xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b, %w : tensor<37x53xf32>, tensor<53xf32>, tensor<37x53xf32>) outs(%e : tensor<37x53xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32, %o: f32):
    %t = arith.addf %x, %y : f32
    %u = arith.mulf %t, %z : f32
    linalg.yield %u : f32
  } -> tensor<37x53xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<37xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<37xf32>) -> tensor<37xf32>
  %r = linalg.reduce ins(%s : tensor<37x53xf32>) outs(%f1 : tensor<37xf32>) dimensions = [1]
    (%x: f32, %y: f32) { %t = arith.maximumf %x, %y : f32
      linalg.yield %t : f32 }
  return %s, %r, %b : tensor<37x53xf32>, tensor<37xf32>, tensor<53xf32>
}
"""


def base_sources() -> dict[str, str]:
    from control_flow_cases import MLIR as CONTROL_FLOW

    mlp = (Path(__file__).parents[1] / "data" / "mlp.mlir").read_text()
    return {"mlp": mlp, "arith": ARITH, "control_flow": CONTROL_FLOW}


def compile_bases(options) -> dict[str, bytes]:
    """The base modules compiled with ``options`` (a CompileOptions)."""
    from pyree.compiler import compile_str

    return {name: compile_str(text, options) for name, text in base_sources().items()}


def fuzz(device: str, bases: dict[str, bytes], folder: Path) -> tuple[list[str], dict]:
    """Runs MUTANTS mutants of ``bases`` on ``device``: (the failures, counts of first
    outcomes: refused, ok, error, loop)."""
    records = make_mutants(bases, MUTANTS, SEED, folder)
    results = run_all(device, folder, MUTANTS)
    counts: dict[str, int] = {}
    for outcomes in results.values():
        kind = outcomes[0].split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
    return failures(records, folder, results), counts


def loops(data: bytes, functions: set[str]) -> bool:
    """Whether one of ``functions`` of the (verifiable) module has a backward branch."""
    import pyree.runtime as rt

    tree = rt.read_module(data).tree
    return any(c.kind == 5 and c.branch.target <= i
               for f in tree.functions if f.name in functions
               for i, c in enumerate(f.commands))


def make_mutants(bases: dict[str, bytes], count: int, seed: int, folder: Path) -> list:
    """``count`` mutants of the base modules, written as folder/N.vmfb; returns their records
    (base name, description, functions rewritten)."""
    rng, records = random.Random(seed), []
    names = sorted(bases)
    for n in range(count):
        name = names[n % len(names)]
        m = mutant(bases[name], rng)
        (folder / f"{n}.vmfb").write_bytes(m.data)
        records.append((name, m.what, m.functions))
    return records


def _watch(device: str, folder: Path, first: int, env: dict) -> tuple[dict, int | None, str]:
    """Runs the child from mutant ``first``; returns (outcomes by mutant, the mutant it died or
    hung in, and how)."""
    child = subprocess.Popen([sys.executable, str(WORKER), device, str(folder), str(first)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
    outcomes, current, lines = {}, None, b""
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            if not selector.select(timeout=max(deadline - time.monotonic(), 0)):
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return outcomes, current, f"hang: no answer within {DEADLINE_S} s"
            chunk = os.read(child.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            lines += chunk
            *complete, lines = lines.split(b"\n")
            for line in complete:
                record = json.loads(line)
                current = record["mutant"]
                if "outcomes" in record:
                    outcomes[current] = record["outcomes"]
                    current = None
                deadline = time.monotonic() + DEADLINE_S
        code = child.wait()
        stderr = child.stderr.read().decode(errors="replace")
        if code < 0:
            return outcomes, current, f"crash: signal {-code}; {stderr[-2000:]}"
        if code != 0:
            return outcomes, current, f"bug: the child exited {code}; {stderr[-2000:]}"
        return outcomes, None, ""
    finally:
        selector.close()
        child.stdout.close()
        child.stderr.close()


def run_all(device: str, folder: Path, count: int, env: dict | None = None) -> dict[int, list[str]]:
    """Every mutant's outcomes; a crash or hang is that mutant's one outcome, and the run goes on
    at the next one in a new child."""
    env = {**os.environ, **(env or {})}
    results, first = {}, 0
    while first < count:
        outcomes, stopped, how = _watch(device, folder, first, env)
        results.update(outcomes)
        if stopped is not None:
            results[stopped] = [how]
        done = [n for n in results if n >= first]
        if not done:
            results[first] = [how or "bug: the child reported nothing"]
            done = [first]
        elif stopped is None and how:   # died between mutants: blame the last one it ran
            results[max(done)].append(how)
        first = max(done) + 1
    return results


def failures(records: list, folder: Path, results: dict[int, list[str]]) -> list[str]:
    """What went wrong, one line per mutant that failed."""
    out = []
    for n, (base, what, functions) in enumerate(records):
        outcomes = results.get(n, ["bug: no outcome"])
        bad = [o for o in outcomes if o.split(":")[0] in ("crash", "hang", "bug", "leak")]
        if any(o.startswith("loop") for o in outcomes) \
                and not loops((folder / f"{n}.vmfb").read_bytes(), functions):
            bad += [o for o in outcomes if o.startswith("loop")]
        if bad:
            out.append(f"mutant {n} of {base} ({what}): {'; '.join(bad)}")
    return out
