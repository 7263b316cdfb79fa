"""Decoder-only language models end to end (issue 30): a GPT-2 and a LLaMA (RMSNorm, rotary,
SwiGLU, grouped-query attention) from ``pyree.compiler.llm.models`` with random seeded weights,
exported as one module with ``prefill`` and ``decode``, their weights in a safetensors file
keyed by the state_dict names, generating through ``pyree.runtime.Generator`` on local-task
(and lavapipe under the ``vulkan`` marker) against PyTorch's own greedy loop over the same
model."""

from __future__ import annotations

import json
import os
import struct
import threading

import numpy as np
import pyree.runtime as rt
import pytest
import torch  # CI installs it: a missing torch fails there, never skips
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.llm.decoder import export_decoder, write_parameters
from pyree.compiler.llm.models import GPT2, DecoderConfig, Llama, randomize

TINY = DecoderConfig(vocab=97, width=32, layers=2, heads=4, context=80)
TINY_GQA = DecoderConfig(vocab=97, width=32, layers=2, heads=4, kv_heads=2, hidden=48, context=80)
NEW_TOKENS = 64
PROMPTS = [[5], [11, 3, 60, 7, 2], list(range(1, 17))]
BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]


def random_decoder(cls, config: DecoderConfig, seed: int, dtype=torch.float32):
    return randomize(cls(config), seed).to(dtype).eval()


def torch_greedy(model, prompt: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
    """PyTorch's greedy loop over the decoder convention: tokens and each step's logits."""
    c = model.config
    dtype = next(model.parameters()).dtype
    k = torch.zeros(c.cache_shape(), dtype=dtype)
    v = torch.zeros_like(k)
    tokens, logits_seen = [], []
    with torch.no_grad():
        logits, k, v = model(torch.tensor([prompt]), torch.tensor(0), k, v)
        for i in range(steps):
            logits_seen.append(logits[0].float().numpy())
            tokens.append(int(logits.argmax(-1)))
            logits, k, v = model(torch.tensor([[tokens[-1]]]), torch.tensor(len(prompt) + i), k, v)
    return tokens, logits_seen


def compile_decoder(model, backend, tmp_path_factory, name: str):
    target, device = backend
    options = CompileOptions(target_backends=[target], vulkan_target=os.environ.get(
        "PYREE_VULKAN_TARGET", "cpu-lavapipe-linux"))
    vmfb = compile_str(export_decoder(model), options)
    weights = tmp_path_factory.mktemp(name) / "weights.safetensors"
    write_parameters(model, weights)
    module = rt.load_module(vmfb, device=device, parameters=[f"model={weights}"])
    return vmfb, weights, module


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(scope="module", params=[(GPT2, TINY), (Llama, TINY_GQA)], ids=["gpt2", "llama"])
def decoder(request, backend, tmp_path_factory):
    cls, config = request.param
    model = random_decoder(cls, config, seed=30)
    return (model, *compile_decoder(model, backend, tmp_path_factory, cls.__name__))


@pytest.mark.parametrize("prompt", PROMPTS, ids=lambda p: f"prompt{len(p)}")
def test_greedy_tokens_equal_pytorchs(decoder, prompt):
    model, _, _, module = decoder
    want, _ = torch_greedy(model, prompt, NEW_TOKENS)
    got = list(rt.Generator(module).generate(prompt, NEW_TOKENS))
    assert got == want
    assert len(set(want)) > 8  # the sequence wanders: a repeated token would prove little


def test_prefill_and_decode_results_equal_pytorchs(decoder):
    """Every result of both functions, caches included, against the model's own forward."""
    model, _, _, module = decoder
    c = model.config
    prompt = np.array([[4, 8, 15, 16, 23, 42, 7]])
    k0 = torch.zeros(c.cache_shape())
    with torch.no_grad():
        logits, k, v = model(torch.from_numpy(prompt), torch.tensor(0), k0, k0)
        step, k2, v2 = model(torch.tensor([[9]]), torch.tensor(7), k, v)
    got = module["prefill"](prompt)
    for g, w in zip(got, (logits, logits.argmax(-1, keepdim=True), torch.tensor(7), k, v)):
        np.testing.assert_allclose(g.to_host(), w.numpy(), rtol=1e-4, atol=1e-4)
    got = module["decode"](np.array([[9]]), got[2], got[3], got[4])
    for g, w in zip(got, (step, step.argmax(-1, keepdim=True), torch.tensor(8), k2, v2)):
        np.testing.assert_allclose(g.to_host(), w.numpy(), rtol=1e-4, atol=1e-4)


def test_decode_writes_donated_caches_in_place(decoder):
    """``decode``'s caches are tied to its cache arguments (flow/argument_windows.py): donated
    (as Generator does), each step writes its row into the same two buffers, and the caches
    equal those of steps that copy them, and PyTorch's."""
    model, _, _, module = decoder
    decode = module["decode"]
    assert decode.tied_results == [None, None, None, 2, 3]
    prompt = np.array([[3, 1, 4, 1, 5]])
    _, best, at, k, v = module["prefill"](prompt)
    _, best_c, at_c, k_c, v_c = module["prefill"](prompt)
    buffers = None
    tokens = prompt[0].tolist() + [int(best_c.to_host()[0, 0])]  # each fed at its position
    for _ in range(12):
        _, best, at, k, v = decode(best, at, k, v, donate=(2, 3))
        _, best_c, at_c, k_c, v_c = decode(best_c, at_c, k_c, v_c)
        tokens.append(int(best_c.to_host()[0, 0]))
        buffers = buffers or (k.buffer, v.buffer)
        assert (k.buffer, v.buffer) == buffers
    np.testing.assert_array_equal(k.to_host(), k_c.to_host())
    np.testing.assert_array_equal(v.to_host(), v_c.to_host())
    c = model.config
    with torch.no_grad():  # the same tokens through the model's own forward, one at a time
        k0 = torch.zeros(c.cache_shape())
        _, kt, vt = model(torch.tensor([tokens[:5]]), torch.tensor(0), k0, k0)
        for position in range(5, len(tokens) - 1):
            _, kt, vt = model(torch.tensor([[tokens[position]]]), torch.tensor(position), kt, vt)
    np.testing.assert_allclose(k.to_host(), kt.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(v.to_host(), vt.numpy(), rtol=1e-4, atol=1e-4)
    # one cache donated, the other copied: the copied one stays the caller's
    _, _, _, k2, v2 = decode(best, at, k, v, donate=3)
    assert v2.buffer is buffers[1] and k2.buffer is not buffers[0]
    np.testing.assert_array_equal(k.to_host(), k_c.to_host())
    with pytest.raises(rt.InvocationError, match="donated"):
        v.to_host()


def test_weights_live_in_the_parameter_file_under_state_dict_names(decoder):
    model, vmfb, weights, module = decoder
    raw = weights.read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    assert set(header) == set(model.state_dict())
    weight_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert weight_bytes > 50_000
    for key in ("wte.weight", "h.1.mlp.c_fc.weight", "model.layers.1.self_attn.k_proj.weight"):
        if key in header:
            assert key.encode() in vmfb  # the module names the parameter it reads
    name = type(model).__name__.lower()
    with pytest.raises(rt.ParameterError, match=rf"module '{name}' constant \d+ is parameter "
                                                r"'model::[\w.]+', but no parameter file was given"):
        rt.load_module(vmfb, device=module.device)
    largest = max(model.state_dict().values(), key=lambda t: t.numel())
    assert largest.contiguous().numpy().tobytes()[:4096] not in vmfb  # no weight bytes inside


def test_sampling_is_seeded_and_top_k_1_is_greedy(decoder):
    model, _, _, module = decoder
    gen = rt.Generator(module)
    prompt = PROMPTS[1]
    one = list(gen.generate(prompt, 24, temperature=0.9, top_k=20, seed=7))
    assert one == list(gen.generate(prompt, 24, temperature=0.9, top_k=20, seed=7))
    assert one != list(gen.generate(prompt, 24, temperature=0.9, top_k=20, seed=8))
    assert all(0 <= t < model.config.vocab for t in one)
    assert list(gen.generate(prompt, 24, temperature=0.7, top_k=1, seed=3)) == \
        list(gen.generate(prompt, 24))


def test_generation_stops_at_the_stop_token_and_the_context(decoder):
    model, _, _, module = decoder
    gen = rt.Generator(module)
    full = list(gen.generate(PROMPTS[1], 20))
    assert list(gen.generate(PROMPTS[1], 20, stop=full[5])) == full[:full.index(full[5]) + 1]
    context = model.config.context
    assert len(list(gen.generate([1] * (context - 3), 20))) == 4  # positions context-3 .. context
    with pytest.raises(rt.InvocationError, match=f"context holds 1 to {context}"):
        list(gen.generate([1] * (context + 1), 5))
    with pytest.raises(rt.InvocationError, match="token ids \\(integers\\), not float64"):
        list(gen.generate([1.5, 2.0], 5))
    with pytest.raises(rt.InvocationError, match="must be >= 0, not -1.0 and 0"):
        list(gen.generate([1, 2], 5, temperature=-1.0))
    for bad in (-1, model.config.vocab):
        with pytest.raises(rt.InvocationError, match=rf"prompt token {bad} is outside the "
                                                     rf"vocabulary \[0, {model.config.vocab}\)"):
            list(gen.generate([3, bad], 5))


def test_threads_generate_at_once_each_with_its_own_cache(decoder):
    _, _, _, module = decoder
    gen = rt.Generator(module)
    alone = {i: list(gen.generate(p, 32)) for i, p in enumerate(PROMPTS)}
    got: dict = {}

    def run(i):
        got[i] = list(gen.generate(PROMPTS[i], 32))
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == alone


def test_a_module_without_prefill_and_decode_is_refused():
    mlir = "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> { return %x : tensor<2xf32> }"
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    with pytest.raises(rt.InvocationError, match="functions 'prefill' and 'decode'"):
        rt.Generator(module)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_half_precision_logits_stay_near_pytorchs(dtype, tmp_path_factory):
    """f16 and bf16 weights and caches: each step's logits, fed PyTorch's own tokens, stay
    within a tolerance of PyTorch's in the same precision; the greedy sequences are compared
    and how many tokens agree is reported."""
    model = random_decoder(GPT2, TINY, seed=31, dtype=dtype)
    _, _, module = compile_decoder(model, ("llvm-cpu", "local-task"), tmp_path_factory, "half")
    prompt = PROMPTS[1]
    want, want_logits = torch_greedy(model, prompt, 16)
    logits, _, _, k, v = module["prefill"](np.array([prompt]))
    scale = max(np.abs(w).max() for w in want_logits)
    tolerance = 0.05 if dtype == torch.float16 else 0.2
    for i, token in enumerate(want):
        got = np.asarray(logits.to_host(), np.float32)[0]
        assert np.abs(got - want_logits[i]).max() <= tolerance * scale, f"step {i}"
        logits, _, _, k, v = module["decode"](np.array([[token]]), np.array(len(prompt) + i), k, v)
    got_tokens = list(rt.Generator(module).generate(prompt, 16))
    agree = next((i for i, (a, b) in enumerate(zip(got_tokens, want)) if a != b), len(want))
    print(f"{dtype}: greedy tokens agree with PyTorch's for the first {agree} of {len(want)}")
    assert agree >= 4


@pytest.mark.parametrize("cls, config", [(GPT2, TINY), (Llama, TINY_GQA)], ids=["gpt2", "llama"])
def test_the_reference_decoders_steps_equal_a_fresh_prefill(cls, config):
    """The models themselves (what pyree is checked against): logits after prefilling k tokens
    and decoding the rest one by one through the cache equal those of prefilling the whole
    sequence from an empty cache, and the caches agree; so the cache write and the attention
    over old and new rows are a causal decoder's."""
    model = random_decoder(cls, config, seed=5)
    tokens = torch.tensor([[3, 14, 15, 92, 65, 35, 89, 79, 32, 38]])
    empty = torch.zeros(config.cache_shape())
    with torch.no_grad():
        whole, k_all, v_all = model(tokens, torch.tensor(0), empty, empty)
        logits, k, v = model(tokens[:, :4], torch.tensor(0), empty, empty)
        for i in range(4, tokens.shape[1]):
            logits, k, v = model(tokens[:, i:i + 1], torch.tensor(i), k, v)
    torch.testing.assert_close(logits, whole, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(k, k_all, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(v, v_all, rtol=1e-4, atol=1e-4)
    assert torch.count_nonzero(k[:, :, :, tokens.shape[1]:]) == 0  # rows past the sequence


def test_a_model_without_the_decoder_convention_is_refused_by_name():
    from pyree.compiler import CompileError
    with pytest.raises(CompileError, match=r"decoder convention .* Linear has config None"):
        export_decoder(torch.nn.Linear(3, 3))
