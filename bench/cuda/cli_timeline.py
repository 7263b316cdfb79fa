"""Where a ``pyree-run-module --device=cuda`` process spends its wall time (issue 13): one line
per phase, as offsets from the parent's spawn, medians over fresh processes, beside IREE's CLI
(its pip script, and its native binary run directly) and a bare ``python3 -c pass``.

    python3 bench/cuda/cli_timeline.py MODULE.vmfb IREE_MODULE.vmfb [--runs 9] [--device cuda]
        [--api] [--release] [--switch-interval SECONDS] [--preimport MODULE,...]

``--api`` traces the Python API's process instead (cold_start_gpu.py's: numpy, ``load_module``,
one call, ``to_host``); ``--switch-interval`` traces it once more with ``sys.setswitchinterval``
set first, ``--preimport`` with those modules imported first.

MODULE's ``mlp`` takes one 37x53 f32 argument (``cold_start_gpu.py build`` makes both modules).
The pyree child runs the real CLI (``runpy`` of pyree.runtime.tools.run_module) under a wrapper
that records, on CLOCK_MONOTONIC (one clock for every process of the host): the wrapper's first
line, the first import of each of the runtime's modules named in MARKS, every libcuda call the
driver makes (begin, end, thread), each line written to stdout and the final ``os._exit``. The
parent adds the spawn and the moment ``wait`` returns; the gap after ``os._exit`` is the kernel's
teardown of the process (its GPU context included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WRAPPER = r"""
import time, os, sys, json, threading
EVENTS = [("wrapper start", time.monotonic_ns(), "main", 0)]
def mark(what, t0=None, dur=0):
    EVENTS.append((what, t0 if t0 is not None else time.monotonic_ns(),
                   threading.current_thread().name[:14], dur))
MARKS = {marks!r}
FUNCTIONS = {functions!r}
if os.environ.get("TIMELINE_SWITCH"):
    sys.setswitchinterval(float(os.environ["TIMELINE_SWITCH"]))

import importlib.abc, importlib.machinery
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in MARKS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        def exec_module(module, _run=run, _name=name):
            t0 = time.monotonic_ns()
            _run(module)
            mark("import " + _name, t0, time.monotonic_ns() - t0)
            for qualified in FUNCTIONS.get(_name, ()):
                owner, attr = module, qualified
                if "." in qualified:
                    klass, attr = qualified.split(".")
                    owner = getattr(module, klass)
                if hasattr(owner, attr):  # (an older tree may lack it)
                    wrap(owner, attr, qualified)
            if _name == "pyree.hal.cuda.symbols":
                wrap_load(module)
            if _name == "pyree.hal.cuda.device":
                init = module.CudaDevice.__init__
                def keep(self, *args, _init=init):
                    _init(self, *args)
                    DEVICES.append(self)
                module.CudaDevice.__init__ = keep
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Watch())
DEVICES = []

def wrap(owner, attr, label):
    fn = getattr(owner, attr)
    def timed(*args, **kwargs):
        t = time.monotonic_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            mark(label, t, time.monotonic_ns() - t)
    setattr(owner, attr, timed)

def wrap_load(symbols):
    load = symbols.load
    def timed_load():
        fresh = symbols._lib is None
        t0 = time.monotonic_ns()
        lib = load()
        if fresh:
            mark("libcuda dlopen + table", t0, time.monotonic_ns() - t0)
            for name in symbols.SYMBOLS:
                fn = getattr(lib, name, None)
                if fn is None:
                    continue
                def timed(*args, _fn=fn, _name=name):
                    t = time.monotonic_ns()
                    try:
                        return _fn(*args)
                    finally:
                        mark(_name, t, time.monotonic_ns() - t)
                setattr(lib, name, timed)
        return lib
    symbols.load = timed_load

class Out:
    def __init__(self, stream):
        self.stream = stream
    def write(self, text):
        if text.strip():
            mark("stdout " + text.strip().splitlines()[0][:24])
        return self.stream.write(text)
    def __getattr__(self, name):
        return getattr(self.stream, name)
sys.stdout = Out(sys.stdout)

real_exit = os._exit
def traced_exit(code):
    mark("os._exit")
    if os.environ.get("TIMELINE_RELEASE"):
        for device in DEVICES:
            device.release()
        mark("devices released")
    with open(os.environ["TIMELINE_OUT"], "w") as f:
        json.dump(EVENTS, f)
    real_exit(code)
os._exit = traced_exit
for name in filter(None, os.environ.get("TIMELINE_PREIMPORT", "").split(",")):
    __import__(name)
mark("preimported")
{body}
"""
CLI = """
sys.argv = ["pyree-run-module", *sys.argv[1:]]
import runpy
runpy.run_module("pyree.runtime.tools.run_module", run_name="__main__")
"""
API = """
import numpy as np
import pyree.runtime as rt
mark("imported")
m = rt.load_module(sys.argv[1].split("=", 1)[1], device=sys.argv[2].split("=", 1)[1])
mark("loaded")
r = m["mlp"](np.full((37, 53), 0.5, np.float32)).to_host()
mark("stdout result")
os._exit(0)
"""

MARKS = ["pyree.runtime", "pyree.runtime.tools.cli", "pyree.runtime.vm.loaded_module",
         "pyree.runtime.hal.registry", "pyree.runtime.hal.device", "pyree.runtime.hal.python_driver",
         "pyree.runtime._fb", "pyree.runtime.module.reader", "re", "pyree.hal.cuda",
         "pyree.hal.cuda.instance", "pyree.hal.cuda.symbols", "pyree.hal.cuda.executable",
         "pyree.hal.cuda.device", "pyree.hal.cuda.startup", "pyree.runtime.vm.invoke",
         "pyree.runtime.hal.device_start"]
FUNCTIONS = {"pyree.runtime.hal.registry": ["_entry_points", "_load", "get_device"],
             "pyree.runtime.vm.loaded_module": ["open_module"],
             "pyree.runtime.hal.device_start": ["DeviceStart.wait_imported"]}
# libcuda calls left out of the table: many, each a few microseconds
QUIET = ("cuEvent", "cuMemcpy", "cuDeviceGet", "cuMemHostGetDevicePointer", "cuCtxSetCurrent")


def spawn(command: list[str], env: dict | None = None) -> tuple[int, int, str]:
    start = time.monotonic_ns()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    end = time.monotonic_ns()
    if done.returncode:
        sys.exit(f"{command[0]} {command[-4:]} failed ({done.returncode}): {done.stderr[-800:]}")
    return start, end, done.stdout


def pyree_sample(module: str, device: str, release: bool = False, api: bool = False,
                 switch: str = "", preimport: str = "") -> list[tuple[str, float, str, float]]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "TIMELINE_OUT": out.name, "TIMELINE_RELEASE": "1" if release else "",
               "TIMELINE_SWITCH": switch, "TIMELINE_PREIMPORT": preimport}
        code = WRAPPER.format(marks=MARKS, functions=FUNCTIONS, body=API if api else CLI)
        start, end, _ = spawn([sys.executable, "-c", code,
                               f"--module={module}", f"--device={device}", "--function=mlp",
                               "--input=37x53xf32=0.5"], env)
        with open(out.name) as f:
            events = json.load(f)
    rows = [(what, (t - start) / 1e6, thread, dur / 1e6) for what, t, thread, dur in events]
    return [("spawn", 0.0, "parent", 0.0), *rows, ("wait returned", (end - start) / 1e6,
                                                     "parent", 0.0)]


def iree_cli(module: str, device: str) -> tuple[list[str], list[str]]:
    args = [f"--module={module}", f"--device={device}", "--function=mlp", "--input=37x53xf32=0.5"]
    script = [sys.executable, "-c", "import sys; from iree._runtime.scripts.iree_run_module."
              "__main__ import main; sys.exit(main())", *args]
    from iree._runtime import libs
    return script, [os.path.join(libs.library_path, "iree-run-module"), *args]


def result_at(rows: list[tuple[str, float, str, float]]) -> float:
    """When the first result was written: the API's mark, or the CLI's line after
    ``result[0]: hal.buffer_view``."""
    labels = [label for label, _, _, _ in rows]
    if "stdout result" in labels:
        return rows[labels.index("stdout result")][1]
    header = next(i for i, label in enumerate(labels) if label.startswith("stdout result[0]"))
    return next(t for label, t, _, _ in rows[header + 1:] if label.startswith("stdout "))


def table(title: str, timelines: list[list[tuple[str, float, str, float]]]) -> None:
    """Each event's median offset and length, by label, occurrence within a run and thread."""
    keyed: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
    for rows in timelines:
        seen: dict[str, int] = {}
        for what, at, thread, dur in rows:
            n = seen[what] = seen.get(what, 0) + 1
            keyed.setdefault((what, n, thread), []).append((at, dur))
    print(f"\n{title:52s} {'at ms':>8s} {'took ms':>8s} {'runs':>5s}")
    for key in sorted(keyed, key=lambda k: statistics.median(a for a, _ in keyed[k])):
        what, n, thread = key
        values = keyed[key]
        if len(values) < len(timelines) // 2 + 1 or what.startswith(QUIET):
            continue
        at = statistics.median(a for a, _ in values)
        dur = statistics.median(d for _, d in values)
        label = f"{what}{' #' + str(n) if n > 1 else ''} ({thread})"
        print(f"{label[:52]:52s} {at:8.1f} {dur:8.2f} {len(values):5d}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("module")
    parser.add_argument("iree_module")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--api", action="store_true", help="trace the Python API, not the CLI")
    parser.add_argument("--release", action="store_true",
                        help="also run the CLI releasing its device itself before os._exit")
    parser.add_argument("--switch-interval", default="",
                        help="also trace each side with sys.setswitchinterval(SECONDS)")
    parser.add_argument("--preimport", default="",
                        help="MODULE,...: also trace each side with these imported first")
    args = parser.parse_args()
    script, native = iree_cli(args.iree_module, args.device)
    what = "api" if args.api else "cli"
    traced = {f"pyree {what}": {}}
    if args.switch_interval:
        traced[f"pyree {what}, switch {args.switch_interval}"] = {"switch": args.switch_interval}
    if args.release:
        traced[f"pyree {what} + release"] = {"release": True}
    if args.preimport:
        traced[f"pyree {what}, {args.preimport} first"] = {"preimport": args.preimport}
    walls: dict[str, list[float]] = {}
    timelines: dict[str, list] = {name: [] for name in traced}
    for run in range(args.runs + 1):  # the first round warms caches and is dropped
        for name, command in (("python3 -c pass", [sys.executable, "-c", "pass"]),
                              ("iree script", script), ("iree native", native)):
            start, end, _ = spawn(command)
            if run:
                walls.setdefault(name, []).append((end - start) / 1e6)
        for name, options in traced.items():
            rows = pyree_sample(args.module, args.device, api=args.api, **options)
            if not run:
                continue
            timelines[name].append(rows)
            at = {label: t for label, t, _, _ in rows}
            walls.setdefault(f"{name}: result", []).append(result_at(rows))
            walls.setdefault(f"{name}: exit", []).append(at["wait returned"])
            if "devices released" in at:
                walls.setdefault(f"{name}: its release", []).append(at["devices released"]
                                                                    - at["os._exit"])
    for name, values in walls.items():
        print(f"{name:34s} median {statistics.median(values):7.1f} ms "
              f"(min {min(values):.1f}, max {max(values):.1f})")
    for name, rows in timelines.items():
        table(f"{name}: event (thread)", rows)


if __name__ == "__main__":
    main()
