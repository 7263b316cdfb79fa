"""A few decode steps of one model built by llm_decode.py, for a profiler to watch (Nsight
Compute: `ncu -k regex:NAME --launch-skip N --launch-count 1 python3 bench/gpu/decode_steps.py
DIR MODEL`): the prompt of llm_decode.py's timing (POSITION tokens), then STEPS greedy tokens.
    python3 bench/gpu/decode_steps.py .gpubuild/llm gpt2_small_f16 [--steps 4]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llm_decode  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("model")
    parser.add_argument("--steps", type=int, default=4)
    ns = parser.parse_args()
    import pyree.runtime as rt
    from pyree.compiler.llm.decoder import write_parameters
    weights = Path("/tmp/llm_weights") / f"{ns.model}.safetensors"
    weights.parent.mkdir(exist_ok=True)
    model = llm_decode._model(ns.model)
    write_parameters(model, weights)
    module = rt.load_module((ns.folder / f"{ns.model}.cuda.vmfb").read_bytes(), device="cuda",
                            parameters=[f"model={weights}"])
    prompt = np.random.default_rng(0).integers(0, model.config.vocab, llm_decode.POSITION).tolist()
    tokens = list(rt.Generator(module).generate(prompt, ns.steps))
    print(f"{ns.model}: {len(tokens)} tokens after a prompt of {len(prompt)}")


if __name__ == "__main__":
    main()
