"""Hugging Face ``transformers`` models through ``import_torch``: tiny random configurations of
the architectures users bring (LLaMA with grouped-query attention and rotary positions, GPT-2,
BERT), run on local-task against the same model in float64. Their non-persistent buffers
(rotary ``inv_freq``, GPT-2's causal ``bias``, BERT's ``position_ids``) once stopped torch-mlir's
importer ("Could not find state mapping for buffer"); with ``parameter_scope`` they stay
constants of the module while the ``state_dict`` becomes parameters."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import tooling
from pyree.compiler import CompileOptions, compile_str, import_torch

torch = tooling.require_module("torch")
tooling.require_module("torch_mlir")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import definitions  # noqa: E402

definitions._torchvision()  # transformers imports torchvision where present: its CPU-only stand-in
transformers = tooling.require_module("transformers")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore::UserWarning")
VOCAB = 211


def llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128))


def mistral():
    return transformers.MistralForCausalLM(transformers.MistralConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        sliding_window=16))


def gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128))


def bert():
    return transformers.BertModel(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=112, max_position_embeddings=128))


MODELS = {"llama": llama, "gpt2": gpt2, "bert": bert}
RUN_TIME_LENGTH = {"llama": llama, "mistral": mistral}  # mistral: slices from a ``?`` dim's end


class FirstOutput(torch.nn.Module):
    """The model called on token ids, without a cache: its logits (or last hidden states)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False, return_dict=False)[0] if hasattr(
            self.model.config, "use_cache") else self.model(ids, return_dict=False)[0]


def built(name: str) -> FirstOutput:
    torch.manual_seed(0)
    return FirstOutput(MODELS[name]().eval())


def tokens(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, n), generator=torch.Generator().manual_seed(seed))


def relative_error(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape and np.all(np.isfinite(got))
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("name", MODELS)
def test_matches_the_model_in_float64(name):
    import pyree.runtime as rt
    model = built(name)
    ids = tokens(13, 1)
    vmfb = compile_str(import_torch(model, tokens(13, 0)), CompileOptions(target_backends=["llvm-cpu"]))
    got = rt.load_module(vmfb, device="local-task")["main"](ids.numpy()).to_host()
    with torch.no_grad():
        want = model.double()(ids).numpy()
    assert relative_error(got, want) <= 1e-5


def test_non_persistent_buffers_stay_constants_beside_parameters(tmp_path):
    """Weights as parameters (``parameter_scope``), filled from the model's state_dict written by
    its own names; the rotary ``inv_freq`` (no state_dict entry) is compiled in."""
    import pyree.runtime as rt
    from pyree.compiler.llm.decoder import write_parameters
    model = built("llama")
    assert not any("inv_freq" in k for k in model.state_dict())
    mlir = import_torch(model, tokens(9, 0), parameter_scope="model")
    named = re.findall(r'#stream\.parameter\.named<"model"::"([^"]+)">', mlir)
    assert sorted(named) == sorted(model.state_dict())  # every weight, and no inv_freq
    write_parameters(model, tmp_path / "w.safetensors")
    vmfb = compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"]))
    module = rt.load_module(vmfb, device="local-task",
                            parameters=[f"model={tmp_path / 'w.safetensors'}"])
    ids = tokens(9, 3)
    with torch.no_grad():
        want = model.double()(ids).numpy()
    assert relative_error(module["main"](ids.numpy()).to_host(), want) <= 1e-5


@pytest.mark.parametrize("name", RUN_TIME_LENGTH)
def test_a_run_time_sequence_length_serves_every_prompt(name):
    """One module exported with a run-time sequence length (torch.export ``Dim``): its position
    ids come from a scan over the sequence (``tm_tensor.scan`` of a ``?`` dim), its masks read
    the length inside a body (``tensor.dim``), and Mistral's reads views at offsets counted
    from the sequence's end; prompts of 3, 13 and 29 tokens."""
    import pyree.runtime as rt
    torch.manual_seed(0)
    model = FirstOutput(RUN_TIME_LENGTH[name]().eval())
    seq = torch.export.Dim("seq", min=2, max=64)
    mlir = import_torch(model, tokens(13, 0), dynamic_shapes={"ids": {1: seq}})
    main = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                          device="local-task")["main"]
    for n in (3, 13, 29):
        ids = tokens(n, n)
        with torch.no_grad():
            want = model.double()(ids).numpy()
        model.float()
        assert relative_error(main(ids.numpy()).to_host(), want) <= 1e-5
    for target in ("cuda", "vulkan-spirv"):  # the same program compiles for the GPU targets
        assert compile_str(mlir, CompileOptions(target_backends=[target]))
