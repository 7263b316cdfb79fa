"""Tiny random Hugging Face ``transformers`` models (the architectures users bring: LLaMA, Mistral,
Qwen2, Gemma, Phi, GPT-NeoX, GPT-2, OPT, BLOOM, Falcon, BERT, DistilBERT, T5's encoder, ViT)
through pyree, against the same model in float64.

    python3 bench/models/hf_tiny.py check [NAME ...] [--target llvm-cpu|vulkan-spirv] [--device D]
    python3 bench/models/hf_tiny.py build OUT [--target cuda --cuda-target sm_90a]
    python3 bench/models/hf_tiny.py run OUT --device cuda        # on the GPU host: no transformers

``check`` imports, compiles and runs each here; ``build`` writes OUT/<name>.vmfb with its input
and float64 reference (.npy), so that ``run`` checks them where transformers is not installed.
One line per model: ok / WRONG (relative error over 1e-4) / FAIL with the error's first line.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import types
import warnings
from pathlib import Path

import numpy as np

VOCAB = 211


def models() -> dict:
    """name -> factory of a seeded random model in eval mode."""
    # torchvision's CUDA wheel beside a CPU torch: transformers imports it; skip its C++ ops
    sys.modules.setdefault("torchvision._meta_registrations",
                           types.ModuleType("torchvision._meta_registrations"))
    import transformers as T

    def lm(config, model, **kw):
        base = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
                    num_attention_heads=4, max_position_embeddings=128)
        return lambda: model(config(**{**base, **kw}))

    return {
        "llama_gqa": lm(T.LlamaConfig, T.LlamaForCausalLM, num_key_value_heads=2),
        "mistral": lm(T.MistralConfig, T.MistralForCausalLM, num_key_value_heads=2, sliding_window=16),
        "qwen2": lm(T.Qwen2Config, T.Qwen2ForCausalLM, num_key_value_heads=2),
        "gemma": lm(T.GemmaConfig, T.GemmaForCausalLM, num_key_value_heads=1, head_dim=16),
        "phi": lm(T.PhiConfig, T.PhiForCausalLM, partial_rotary_factor=0.5),
        "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
            num_attention_heads=4, rotary_pct=0.25, max_position_embeddings=128)),
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2,
                                                       n_head=4, n_positions=128)),
        "opt": lambda: T.OPTForCausalLM(T.OPTConfig(
            vocab_size=VOCAB, hidden_size=64, ffn_dim=112, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=128, word_embed_proj_dim=64)),
        "bloom": lambda: T.BloomForCausalLM(T.BloomConfig(vocab_size=VOCAB, hidden_size=64,
                                                          n_layer=2, n_head=4)),
        "falcon": lambda: T.FalconForCausalLM(T.FalconConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            new_decoder_architecture=False, multi_query=True)),
        "bert": lambda: T.BertModel(T.BertConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=112, max_position_embeddings=128)),
        "distilbert": lambda: T.DistilBertModel(T.DistilBertConfig(
            vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=112,
            max_position_embeddings=128)),
        "t5_encoder": lambda: T.T5EncoderModel(T.T5Config(
            vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=112, num_layers=2, num_heads=4)),
        "vit": lambda: T.ViTModel(T.ViTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=112,
            image_size=32, patch_size=8)),
    }


def wrapped(name: str, dtype: str = "f32"):
    """(module returning the model's first output, example input) with seed 0, its weights
    (and a ViT's pixels) in ``dtype``."""
    import torch

    class First(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            if name == "vit":
                return self.model(pixel_values=x, return_dict=False)[0]
            return self.model(x, return_dict=False)[0]

    torch.manual_seed(0)
    model = models()[name]()
    model.config.use_cache = False
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    model = model.to(torch_dtype)
    x = torch.randn(1, 3, 32, 32, dtype=torch_dtype) if name == "vit" else \
        torch.randint(0, VOCAB, (1, 13))
    return First(model.eval()), x


def reference(module, x) -> np.ndarray:
    import torch
    with torch.no_grad():
        return module.double()(x.double() if x.is_floating_point() else x).numpy()


def compiled(name: str, target: str, cuda_target: str,
             dtype: str = "f32") -> tuple[bytes, np.ndarray, np.ndarray]:
    from pyree.compiler import CompileOptions, compile_str, import_torch
    module, x = wrapped(name, dtype)
    vmfb = compile_str(import_torch(module, x),
                       CompileOptions(target_backends=[target], cuda_target=cuda_target))
    return vmfb, x.numpy(), reference(module, x)


def verdict(name: str, got, want, extra: str = "", limit: float = 1e-4) -> bool:
    err = float(np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want))
    ok = err <= limit
    print(f"{'ok' if ok else 'WRONG':6s} {name:12s} rel err {err:.1e}{extra}", flush=True)
    return ok


def run_module(vmfb, x, device: str):
    import pyree.runtime as rt
    fn = rt.load_module(vmfb, device=device)["main"]
    got = fn(x).to_host()
    t0 = time.perf_counter()
    for _ in range(20):
        fn(x).to_host()
    return got, (time.perf_counter() - t0) / 20 * 1e3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("verb", choices=["check", "build", "run"])
    p.add_argument("args", nargs="*", help="check: model names (default all); build/run: OUT")
    p.add_argument("--target", default=None)
    p.add_argument("--cuda-target", default="sm_90a")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"],
                   help="weights' type; the float64 reference is of the rounded weights, the "
                        "limit a few roundings of the type (f16 1e-2, bf16 5e-2)")
    a = p.parse_args()
    limit = {"f32": 1e-4, "f16": 1e-2, "bf16": 5e-2}[a.dtype]
    warnings.filterwarnings("ignore")
    failed = 0
    if a.verb == "run":
        out = Path(a.args[0])
        for path in sorted(out.glob("*.vmfb")):
            name = path.stem
            x, want = np.load(out / f"{name}.in.npy"), np.load(out / f"{name}.want.npy")
            try:
                got, ms = run_module(path.read_bytes(), x, a.device or "cuda")
                folder = path.parent.name  # built with --dtype: a folder per type (hf_f16, ...)
                limit = 5e-2 if "bf16" in folder else 1e-2 if "f16" in folder else 1e-4
                failed += not verdict(name, got, want, f"  {ms:.3f} ms per call (with readback)",
                                      limit)
            except Exception as e:  # noqa: BLE001 -- one model's failure must not stop the rest
                failed += 1
                print(f"FAIL   {name:12s} {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return int(failed > 0)
    names = (a.args if a.verb == "check" else []) or list(models())
    target = a.target or ("cuda" if a.verb == "build" else "llvm-cpu")
    device = a.device or {"llvm-cpu": "local-task", "vulkan-spirv": "vulkan"}.get(target, "cuda")
    if a.verb == "build":
        out = Path(a.args[0])
        out.mkdir(parents=True, exist_ok=True)
    for name in names:
        try:
            t0 = time.perf_counter()
            vmfb, x, want = compiled(name, target, a.cuda_target, a.dtype)
            seconds = time.perf_counter() - t0
            if a.verb == "build":
                (out / f"{name}.vmfb").write_bytes(vmfb)
                np.save(out / f"{name}.in.npy", x)
                np.save(out / f"{name}.want.npy", want)
                print(f"built  {name:12s} {target} in {seconds:.1f} s", flush=True)
            else:
                got, _ = run_module(vmfb, x, device)
                failed += not verdict(name, got, want, f"  (import+compile {seconds:.1f} s)",
                                      limit)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL   {name:12s} {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")
            traceback.print_exc(limit=2, file=sys.stderr)
    return int(failed > 0)


if __name__ == "__main__":
    sys.exit(main())
