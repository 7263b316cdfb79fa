"""Which sequence makes ``llm_decode.py run --match small_`` die in cuGraphLaunch under CUPTI
(BENCHMARKS.md, issue 30): each variant runs in its own process, its exit status printed.

    python3 bench/gpu/cupti_two_sessions.py BUILD      (BUILD: llm_decode.py build's folder)

- two_modules: bf16 module generates and is profiled, is released, then the f16 module
  generates and is profiled (the crashing run's order);
- two_modules_kept: the same with the bf16 module still loaded;
- one_module_twice: the f16 module profiled in two CUPTI sessions;
- no_cupti: two_modules without the profiler (graph launches only).
"""

from __future__ import annotations

import faulthandler
import gc
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = ("one_module_twice", "two_modules_kept", "two_modules", "no_cupti")


def _variant(build: Path, name: str) -> None:
    faulthandler.enable()
    sys.path[:0] = [str(HERE)]
    import llm_decode
    import pyree.runtime as rt
    from pyree.compiler.llm.decoder import write_parameters
    weights = Path("/tmp/llm_weights")
    weights.mkdir(exist_ok=True)

    def load(model_name):
        model = llm_decode._model(model_name)
        write_parameters(model, weights / f"{model_name}.safetensors")
        module = rt.load_module((build / f"{model_name}.cuda.vmfb").read_bytes(), device="cuda",
                                parameters=[f"model={weights / f'{model_name}.safetensors'}"])
        print(name, model_name, "tokens", list(rt.Generator(module).generate([5, 6, 7], 8)),
              flush=True)
        return module, model.config

    def profile(module, config):
        if name != "no_cupti":
            print(name, "kernels", llm_decode._decode_kernels(module, config)["kernels"], flush=True)

    first, config = load("gpt2_small_f16" if name == "one_module_twice" else "gpt2_small_bf16")
    profile(first, config)
    if name == "one_module_twice":
        profile(first, config)
        return
    if name != "two_modules_kept":
        del first
        gc.collect()
    second, config = load("gpt2_small_f16")
    profile(second, config)
    print(name, "done", flush=True)


def main() -> int:
    build = Path(sys.argv[1])
    if len(sys.argv) > 2:
        _variant(build, sys.argv[2])
        return 0
    for name in VARIANTS:
        rc = subprocess.run([sys.executable, __file__, str(build), name], timeout=240).returncode
        print(f"== {name}: exit status {rc}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
