"""Decode speed on the CPU (local-task) against PyTorch on the same CPU (issue 30 item 5).

    python bench/cpu/llm_decode.py [--shape small|tiny] [--tokens 32] [--target-cpu host]

GPT-2 (random seeded weights, f32), a prompt of 128 tokens, then ``--tokens`` greedy steps:
pyree's ``rt.Generator`` and PyTorch's loop over the same model (eager, its own threads), each
timed per token after its prefill; the tokens are compared.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    from pyree.compiler.llm.decoder import export_decoder, write_parameters
    from pyree.compiler.llm.models import GPT2, GPT2_SMALL

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=("small", "tiny"), default="small")
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--target-cpu", default="host")
    args = p.parse_args()
    config = GPT2_SMALL if args.shape == "small" else replace(GPT2_SMALL, layers=2, width=128,
                                                              heads=4, vocab=1000)
    torch.manual_seed(0)
    model = GPT2(config).eval()  # PyTorch's own initialization
    start = time.perf_counter()
    vmfb = compile_str(export_decoder(model), CompileOptions(target_backends=["llvm-cpu"],
                                                             llvmcpu_target_cpu=args.target_cpu))
    folder = Path(tempfile.mkdtemp())
    write_parameters(model, folder / "w.safetensors")
    print(f"compiled in {time.perf_counter() - start:.0f} s", flush=True)
    gen = rt.Generator(rt.load_module(vmfb, "local-task", parameters=[f"model={folder / 'w.safetensors'}"]))
    prompt = [int(t) for t in np.random.default_rng(0).integers(0, config.vocab, 128)]

    def pyree_run():
        t0 = time.perf_counter()
        gen.prefill(np.array([prompt]))[1].to_host()
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        tokens = list(gen.generate(prompt, args.tokens + 1))
        return tokens, (time.perf_counter() - t0 - prefill) / args.tokens

    def torch_run():
        k = torch.zeros(config.cache_shape())
        with torch.no_grad():
            t0 = time.perf_counter()
            logits, k, v = model(torch.tensor([prompt]), torch.tensor(0), k, k)
            tokens = [int(logits.argmax())]
            t1 = time.perf_counter()
            for i in range(args.tokens):
                logits, k, v = model(torch.tensor([[tokens[-1]]]), torch.tensor(len(prompt) + i), k, v)
                tokens.append(int(logits.argmax()))
            return tokens, (time.perf_counter() - t1) / args.tokens, t1 - t0

    pyree_run()  # warm up both
    torch_run()
    ours, want = [], []
    for _ in range(3):  # interleaved: the machine's speed drifts
        tokens, per = pyree_run()
        ours.append(per)
        t_tokens, t_per, _ = torch_run()
        want.append(t_per)
    print(f"tokens equal: {tokens == t_tokens}")
    print(f"pyree {np.median(ours) * 1e3:.1f} ms/token ({1 / np.median(ours):.1f} tokens/s), "
          f"PyTorch {np.median(want) * 1e3:.1f} ms/token ({1 / np.median(want):.1f} tokens/s), "
          f"{torch.get_num_threads()} PyTorch threads")


if __name__ == "__main__":
    main()
