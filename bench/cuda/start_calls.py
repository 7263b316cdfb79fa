"""Where a fresh process's CUDA start goes (issue 13): every libcuda entry point the driver
calls while loading a module and running it once, with its count and total time, next to the
whole phases and IREE's device creation and load in another fresh process.

    python3 bench/cuda/start_calls.py MODULE.vmfb FUNCTION IREE_MODULE.vmfb

MODULE's FUNCTION takes one f32 argument (tests/data/mlp.mlir's ``mlp``: 37x53). Run on the GPU
host; IREE's runtime must be importable for the last line.
"""

from __future__ import annotations

import subprocess
import sys
import time

PYREE = """
import sys, time
t0 = time.perf_counter()
import numpy as np
import pyree.runtime as rt
from pyree.hal.cuda import symbols
t1 = time.perf_counter()
cu = symbols.load()
spent = {}
for name in symbols.SYMBOLS:
    fn = getattr(cu, name, None)
    if fn is None:
        continue
    def timed(*args, _fn=fn, _name=name):
        s = time.perf_counter()
        try:
            return _fn(*args)
        finally:
            n, t = spent.get(_name, (0, 0.0))
            spent[_name] = (n + 1, t + time.perf_counter() - s)
    setattr(cu, name, timed)
t2 = time.perf_counter()
m = rt.load_module(sys.argv[1], device="cuda")
t3 = time.perf_counter()
x = np.full((37, 53), 0.5, np.float32)
m[sys.argv[2]](x).to_host()
t4 = time.perf_counter()
print(f"pyree: import {1e3*(t1-t0):.1f} ms, libcuda table {1e3*(t2-t1):.1f} ms, "
      f"load_module {1e3*(t3-t2):.1f} ms, first call {1e3*(t4-t3):.1f} ms")
for name, (n, t) in sorted(spent.items(), key=lambda kv: -kv[1][1]):
    print(f"  {name:32s} {n:5d} calls {1e3*t:9.2f} ms")
print(f"  (libcuda calls in all: {1e3*sum(t for _, t in spent.values()):.1f} ms)")
"""

IREE = """
import sys, time
t0 = time.perf_counter()
import numpy as np
import iree.runtime as ireert
t1 = time.perf_counter()
device = ireert.get_device("cuda")
t2 = time.perf_counter()
config = ireert.Config(device=device)
ctx = ireert.SystemContext(config=config)
with open(sys.argv[1], "rb") as f:
    vm = ireert.VmModule.copy_buffer(ctx.instance, f.read())
ctx.add_vm_module(vm)
t3 = time.perf_counter()
print(f"iree: import {1e3*(t1-t0):.1f} ms, get_device {1e3*(t2-t1):.1f} ms, "
      f"module load {1e3*(t3-t2):.1f} ms")
"""


def main(module: str, function: str, iree_module: str) -> None:
    for label, code, args in (("pyree", PYREE, [module, function]), ("iree", IREE, [iree_module])):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
        print(proc.stdout.rstrip() or proc.stderr[-1500:])
        print(f"  ({label} process: {1e3 * (time.perf_counter() - t):.0f} ms)")


if __name__ == "__main__":
    main(*sys.argv[1:4])
