"""The 8-bit and special-value import cases of tests/importers (test_torch_unsigned.py's U8_OPS
and I8_OPS, test_torch_semantics.py's CASES) on the GPU drivers, where torch-mlir is not
installed.

    python3 bench/gpu/import_semantics.py build DIR     # here: modules for cuda (sm_90) and
                                                       # vulkan (hopper), inputs, PyTorch's outputs
    python3 bench/gpu/import_semantics.py run DIR      # on the GPU host: one line per case
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def build(out: Path) -> None:
    import torch
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests/importers")]
    from importers.test_torch_less_common_forms import Fn
    from pyree.compiler import CompileOptions, compile_str, import_torch
    from test_torch_semantics import CASES
    from test_torch_unsigned import I8_OPS, U8_OPS

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    a, b = (torch.from_numpy(rng.integers(0, 256, (3, 9), dtype=np.uint8)) for _ in range(2))
    a[0, :4] = torch.tensor([0, 127, 128, 255], dtype=torch.uint8)
    c = torch.tensor([[-128, 127, -1, 5, 0, 64], [100, -100, 64, -64, 1, -7]], dtype=torch.int8)
    entries = {**{f"u8_{k}": (f, (a, b)) for k, f in U8_OPS.items()},
               **{f"i8_{k}": (f, (c,)) for k, f in I8_OPS.items()},
               **{f"sem_{k}": case for k, case in CASES.items()}}
    targets = {"cuda": CompileOptions(target_backends=["cuda"], cuda_target="sm_90"),
               "vulkan": CompileOptions(target_backends=["vulkan-spirv"],
                                        vulkan_target="hopper-h100-linux")}
    manifest = {}
    for name, (fn, args) in entries.items():
        text = import_torch(Fn(fn), *args)
        for device, options in targets.items():
            (out / f"{name}.{device}.vmfb").write_bytes(compile_str(text, options))
        with torch.no_grad():
            want = fn(*args)
        manifest[name] = ([x.numpy() for x in args],
                          [w.numpy() for w in want] if isinstance(want, tuple) else want.numpy())
    (out / "manifest.pkl").write_bytes(pickle.dumps(manifest))
    print(f"built {len(manifest)} cases")


def run(folder: Path) -> int:
    import pyree.runtime as rt
    manifest = pickle.loads((folder / "manifest.pkl").read_bytes())
    wrong = 0
    for device in ("cuda", "vulkan"):
        for name, (args, want) in manifest.items():
            try:
                module = rt.load_module((folder / f"{name}.{device}.vmfb").read_bytes(),
                                        device=device)
                got = module["main"](*args)
                got = [g.to_host() for g in got] if isinstance(want, list) else got.to_host()
                ok = all(_same(g, w) for g, w in zip(got, want, strict=True)) \
                    if isinstance(want, list) else _same(got, want)
            except Exception as e:  # noqa: BLE001 - a case's failure is its line
                ok, got = False, repr(e)[:200]
            wrong += not ok
            print(f"{'ok' if ok else 'WRONG'} {device} {name}" + ("" if ok else f" {got} vs {want}"),
                  flush=True)
    print(f"{wrong} wrong")
    return 1 if wrong else 0


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal dtype and values (floats within 1e-5, NaN where PyTorch has NaN)."""
    if got.dtype != want.dtype:
        return False
    if want.dtype.kind != "f":
        return np.array_equal(got, want)
    return np.array_equal(np.isnan(got), np.isnan(want)) and np.allclose(got, want, rtol=1e-5,
                                                                          equal_nan=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("verb", choices=("build", "run"))
    p.add_argument("folder", type=Path)
    a = p.parse_args()
    sys.exit(build(a.folder) if a.verb == "build" else run(a.folder))
