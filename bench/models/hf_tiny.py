"""Tiny random Hugging Face ``transformers`` models (the architectures users bring: 40 of them,
decoders from LLaMA to StarCoder2, encoders from BERT to DeBERTa-v2, vision from ViT to Swin and
SegFormer, wav2vec2 and Whisper's encoder) through pyree, against the same model in float64.

    python3 bench/models/hf_tiny.py check [NAME ...] [--target llvm-cpu|vulkan-spirv] [--device D]
    python3 bench/models/hf_tiny.py build OUT [NAME ...] [--target cuda --cuda-target sm_90a]
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
        # probed in the twenty-ninth session (BENCHMARKS.md), none in the tests before
        "qwen3": lm(T.Qwen3Config, T.Qwen3ForCausalLM, num_key_value_heads=2, head_dim=16),
        "phi3": lm(T.Phi3Config, T.Phi3ForCausalLM, num_key_value_heads=2, pad_token_id=0),
        "stablelm": lm(T.StableLmConfig, T.StableLmForCausalLM, num_key_value_heads=2),
        "starcoder2": lm(T.Starcoder2Config, T.Starcoder2ForCausalLM, num_key_value_heads=2),
        "gemma2": lm(T.Gemma2Config, T.Gemma2ForCausalLM, num_key_value_heads=2, head_dim=16),
        "olmo": lm(T.OlmoConfig, T.OlmoForCausalLM, num_key_value_heads=2),
        "gptj": lambda: T.GPTJForCausalLM(T.GPTJConfig(
            vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=128)),
        "gpt_bigcode": lambda: T.GPTBigCodeForCausalLM(T.GPTBigCodeConfig(
            vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128, multi_query=True)),
        **{name: lambda c=config, m=model, e=extra: m(c(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=112, max_position_embeddings=130, **e))
           for name, config, model, extra in [
               ("roberta", T.RobertaConfig, T.RobertaModel, {}),
               ("xlm_roberta", T.XLMRobertaConfig, T.XLMRobertaModel, {}),
               ("mpnet", T.MPNetConfig, T.MPNetModel, {}),
               ("albert", T.AlbertConfig, T.AlbertModel, {"embedding_size": 32}),
               ("electra", T.ElectraConfig, T.ElectraModel, {"embedding_size": 32}),
               ("deberta_v2", T.DebertaV2Config, T.DebertaV2Model, {
                   "relative_attention": True, "position_buckets": 16,
                   "pos_att_type": ["p2c", "c2p"]})]},
        "deit": lambda: T.DeiTModel(T.DeiTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=112,
            image_size=32, patch_size=8)),
        "beit": lambda: T.BeitModel(T.BeitConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=112,
            image_size=32, patch_size=8, use_relative_position_bias=True)),
        "dinov2": lambda: T.Dinov2Model(T.Dinov2Config(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
            image_size=32, patch_size=8)),
        "clip_vision": lambda: T.CLIPVisionModel(T.CLIPVisionConfig(
            hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
            image_size=32, patch_size=8)),
        "swin": lambda: T.SwinModel(T.SwinConfig(
            image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
            window_size=4)),
        "convnext": lambda: T.ConvNextModel(T.ConvNextConfig(
            hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
        "resnet_hf": lambda: T.ResNetModel(T.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
        "poolformer": lambda: T.PoolFormerModel(T.PoolFormerConfig(
            hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
        "segformer": lambda: T.SegformerModel(T.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
            num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])),
        "wav2vec2": lambda: T.Wav2Vec2Model(T.Wav2Vec2Config(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=112,
            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
        "whisper_encoder": lambda: T.WhisperModel(T.WhisperConfig(
            vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=1,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=112,
            decoder_ffn_dim=112, num_mel_bins=16, max_source_positions=32,
            max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            decoder_start_token_id=1)).get_encoder(),
    }


# image models: the side of their square input (pixels in [1, 3, side, side]); audio models:
# their input's shape
IMAGES = {"vit": 32, "deit": 32, "beit": 32, "dinov2": 32, "clip_vision": 32, "swin": 32,
          "convnext": 64, "resnet_hf": 64, "poolformer": 64, "segformer": 64}
AUDIO = {"wav2vec2": (1, 400), "whisper_encoder": (1, 16, 64)}


def wrapped(name: str, dtype: str = "f32"):
    """(module returning the model's first output, example input) with seed 0, its weights
    (and a ViT's pixels) in ``dtype``."""
    import torch

    class First(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            if name in IMAGES:
                return self.model(pixel_values=x, return_dict=False)[0]
            return self.model(x, return_dict=False)[0]

    torch.manual_seed(0)
    model = models()[name]()
    model.config.use_cache = False
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    model = model.to(torch_dtype)
    if name in IMAGES:
        x = torch.randn(1, 3, IMAGES[name], IMAGES[name], dtype=torch_dtype)
    elif name in AUDIO:
        x = torch.randn(*AUDIO[name], dtype=torch_dtype)
    else:
        x = torch.randint(0, VOCAB, (1, 13))
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
    return vmfb, host_array(x), reference(module, x)


def host_array(x) -> np.ndarray:
    """``x`` as numpy; a bf16 tensor (numpy has no bfloat16) as ml_dtypes' bfloat16."""
    import torch
    if x.dtype == torch.bfloat16:
        import ml_dtypes
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


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
    p.add_argument("args", nargs="*", help="check: model names (default all); build: OUT, then "
                                           "model names; run: OUT")
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
            want = np.load(out / f"{name}.want.npy")
            if (out / f"{name}.in.bf16.npy").exists():  # bfloat16 bits, saved as uint16
                import ml_dtypes
                x = np.load(out / f"{name}.in.bf16.npy").view(ml_dtypes.bfloat16)
            else:
                x = np.load(out / f"{name}.in.npy")
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
    names = (a.args if a.verb == "check" else a.args[1:]) or list(models())
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
                if x.dtype.name == "bfloat16":
                    np.save(out / f"{name}.in.bf16.npy", x.view(np.uint16))
                else:
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
