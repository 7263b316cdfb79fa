"""Generate tokens with a decoder compiled by pyree (docs/LLM.md).

    python docs/examples/llm/generate.py                          # tiny GPT-2, local-task
    python docs/examples/llm/generate.py --model llama            # tiny LLaMA
    python docs/examples/llm/generate.py --shape small --device cuda --dtype f16   # GPT-2 small

The weights are random (seeded): this shows the mechanism, not a language. To run a real
checkpoint, load its state_dict into the model (the names are Hugging Face's) before exporting,
or point ``--parameters`` of pyree-run-module / ``load_module(parameters=)`` at its safetensors.
Each run checks the greedy tokens against PyTorch's own loop over the same model.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

TARGETS = {"local-task": "llvm-cpu", "local-sync": "llvm-cpu", "cuda": "cuda", "vulkan": "vulkan-spirv"}


def main() -> None:
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    from pyree.compiler.llm.decoder import export_decoder, write_parameters
    from pyree.compiler.llm.models import GPT2, GPT2_SMALL, LLAMA_SMALL, DecoderConfig, Llama, randomize

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    p.add_argument("--shape", choices=("tiny", "small"), default="tiny")
    p.add_argument("--device", default="local-task")
    p.add_argument("--dtype", choices=("f32", "f16", "bf16"), default="f32")
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    tiny = DecoderConfig(vocab=512, width=64, layers=2, heads=4, context=128,
                         kv_heads=2 if args.model == "llama" else None,
                         hidden=128 if args.model == "llama" else None)
    config = tiny if args.shape == "tiny" else (GPT2_SMALL if args.model == "gpt2" else LLAMA_SMALL)
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    model = randomize((GPT2 if args.model == "gpt2" else Llama)(config), args.seed).to(dtype).eval()

    start = time.perf_counter()
    backend = TARGETS[args.device.split(":")[0].split("://")[0]]
    vmfb = compile_str(export_decoder(model), CompileOptions(target_backends=[backend]))
    folder = Path(tempfile.mkdtemp())
    write_parameters(model, folder / "weights.safetensors")
    print(f"compiled for {backend} in {time.perf_counter() - start:.1f} s: module "
          f"{len(vmfb) / 1e6:.2f} MB, weights {(folder / 'weights.safetensors').stat().st_size / 1e6:.1f} MB")

    module = rt.load_module(vmfb, device=args.device,
                            parameters=[f"model={folder / 'weights.safetensors'}"])
    generator = rt.Generator(module)
    prompt = [int(t) for t in np.random.default_rng(args.seed).integers(0, config.vocab, 8)]
    start = time.perf_counter()
    tokens = list(generator.generate(prompt, args.tokens, temperature=args.temperature,
                                     top_k=args.top_k, seed=args.seed))
    seconds = time.perf_counter() - start
    print("prompt:", prompt)
    print("tokens:", tokens)
    print(f"{len(tokens)} tokens in {seconds * 1e3:.1f} ms ({len(tokens) / seconds:.1f} tokens/s, "
          "prefill included)")
    if args.temperature == 0:
        same = tokens == _torch_greedy(model, prompt, len(tokens))
        print("PyTorch's greedy loop gives the same tokens:", same)


def _torch_greedy(model, prompt, steps):
    c = model.config
    dtype = next(model.parameters()).dtype
    k = torch.zeros(c.cache_shape(), dtype=dtype)
    v = torch.zeros_like(k)
    out = []
    with torch.no_grad():
        logits, k, v = model(torch.tensor([prompt]), torch.tensor(0), k, v)
        for i in range(steps):
            out.append(int(logits.argmax(-1)))
            logits, k, v = model(torch.tensor([[out[-1]]]), torch.tensor(len(prompt) + i), k, v)
    return out


if __name__ == "__main__":
    main()
