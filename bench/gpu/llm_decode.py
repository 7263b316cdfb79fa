"""Decoder-only generation on an NVIDIA GPU (issue 30): pyree against PyTorch on the same card.

    python3 bench/gpu/llm_decode.py build OUT_DIR [--target sm_90]        # CPU build machine
    python3 bench/gpu/llm_decode.py run OUT_DIR [--json OUT.json]         # GPU host
    python3 bench/gpu/llm_decode.py compare DIR_A DIR_B ... [--match MODEL]  # GPU host, A/B

``build --set pyree.compiler.MODULE.NAME=VALUE`` (repeatable) builds with a compiler constant
changed, for a sweep of a rule in the decode step itself (a kernel timed alone keeps its
weights in L2 and flatters the rules that make few blocks).

``build`` compiles, with weights outside the modules (``pyree.compiler.llm``):
- tiny GPT-2 and LLaMA (f32) for cuda and vulkan-spirv, the correctness check's;
- the GPT-2-small shape (12 layers, width 768, 12 heads, vocabulary 50257, context 1024) for cuda
  in f32, f16 and bf16, the speed runs'; and a LLaMA of the same size (``LLAMA_SMALL``: grouped
  queries, 12 heads over 4, SwiGLU of 2048, vocabulary 32000) in f16.
``run`` makes each model's weights from its seed (``models.randomize``: the same numbers
wherever torch runs), writes them as safetensors under their state_dict names, and loads each
module with them. Correctness: greedy tokens against PyTorch's loop over the same model on the
GPU (64 tokens, three prompts; f32 must be equal, f16/bf16 report how many agree). Speed, all in
this process, with fresh random prompts: decode time per token at position 512 (pyree's greedy
loop, the argmax fed back on the device; PyTorch eager; PyTorch's step captured in a CUDA
graph over static caches, replayed), against the bandwidth bound (weights + both caches read
once per token, over the card's measured device-to-device copy bandwidth); prefill of 128, 512
and 1024 tokens, against the reference model in eager and against PyTorch's best prefill (its
attention by SDPA, eager and in a CUDA graph).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(vocab=97, width=32, layers=2, heads=4, context=80)
TINY_GQA = dict(vocab=97, width=32, layers=2, heads=4, kv_heads=2, hidden=48, context=80)
SEED = 30
PROMPTS = [[5], [11, 3, 60, 7, 2], list(range(1, 17))]
POSITION = 512
STEPS = 64
KERNELS = True  # profile the decode step's kernels (CUPTI): --no-kernels skips it


def _models():
    from pyree.compiler.llm.models import GPT2, GPT2_SMALL, LLAMA_SMALL, DecoderConfig, Llama
    return {
        "gpt2_tiny": (GPT2, DecoderConfig(**TINY), "f32"),
        "llama_tiny": (Llama, DecoderConfig(**TINY_GQA), "f32"),
        **{f"gpt2_small_{d}": (GPT2, GPT2_SMALL, d) for d in ("f32", "f16", "bf16")},
        "llama_small_f16": (Llama, LLAMA_SMALL, "f16"),
    }


def _model(name: str):
    import torch
    from pyree.compiler.llm.models import randomize
    cls, config, dtype = _models()[name]
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    return randomize(cls(config), SEED).to(dt).eval()


def _override(setting: str) -> None:
    """``pyree.compiler.MODULE.NAME=VALUE``: the module's constant set to the Python literal."""
    import ast
    import importlib
    target, _, value = setting.partition("=")
    module, _, name = target.rpartition(".")
    owner = importlib.import_module(module)
    if not hasattr(owner, name):
        raise SystemExit(f"--set: {module} has no {name}")
    setattr(owner, name, ast.literal_eval(value))


def build(out: Path, target: str, match: str = "", settings: tuple = ()) -> None:
    from pyree.compiler import CompileOptions, compile_str
    from pyree.compiler.llm.decoder import export_decoder
    for setting in settings:
        _override(setting)
    out.mkdir(parents=True, exist_ok=True)
    for name in _models():
        if match not in name:
            continue
        backends = [("cuda", "cuda")] + ([("vulkan", "vulkan-spirv")] if "tiny" in name else [])
        text = export_decoder(_model(name))
        for label, backend in backends:
            start = time.perf_counter()
            options = CompileOptions(target_backends=[backend], cuda_target=target,
                                     vulkan_target="hopper-h100-linux")
            (out / f"{name}.{label}.vmfb").write_bytes(compile_str(text, options))
            print(f"built {name} for {backend} in {time.perf_counter() - start:.0f} s", flush=True)


def torch_greedy(model, prompt, steps, device):
    import torch
    c = model.config
    dtype = next(model.parameters()).dtype
    k = torch.zeros(c.cache_shape(), dtype=dtype, device=device)
    v = torch.zeros_like(k)
    out = []
    with torch.no_grad():
        logits, k, v = model(torch.tensor([prompt], device=device), torch.tensor(0, device=device), k, v)
        for i in range(steps):
            out.append(int(logits.argmax(-1)))
            logits, k, v = model(torch.tensor([[out[-1]]], device=device),
                                 torch.tensor(len(prompt) + i, device=device), k, v)
    return out


def run(folder: Path, json_out: str, match: str = "") -> None:
    import pyree.runtime as rt
    import torch
    from pyree.compiler.llm.decoder import write_parameters
    sys.path[:0] = [str(ROOT / "bench")]
    rows: dict = {"gpu": torch.cuda.get_device_name()}
    weights = Path("/tmp/llm_weights")
    weights.mkdir(exist_ok=True)
    for path in sorted(folder.glob("*.vmfb")):
        if match not in path.stem:
            continue
        name, label = path.stem.split(".")
        model = _model(name)
        write_parameters(model, weights / f"{name}.safetensors")
        device = "cuda" if label == "cuda" else "vulkan"
        try:
            module = rt.load_module(path.read_bytes(), device=device,
                                    parameters=[f"model={weights / f'{name}.safetensors'}"])
        except Exception as e:  # noqa: BLE001 - reported, the other models still run
            rows[path.stem] = {"error": f"{type(e).__name__}: {e}"}
            print(path.stem, rows[path.stem], flush=True)
            continue
        gen = rt.Generator(module)
        on_gpu = model.to("cuda")
        agree = []
        for prompt in PROMPTS:
            got = list(gen.generate(prompt, STEPS))
            want = torch_greedy(on_gpu, prompt, STEPS, "cuda")
            agree.append(next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), STEPS))
        row = {"greedy_tokens_agreeing": agree, "of": STEPS}
        row["logits_error"] = _guarded(_logits_error, module, on_gpu, PROMPTS[1], STEPS)
        if "small" in name and label == "cuda":
            row.update(_speed(module, on_gpu))
            if KERNELS:
                row["pyree_decode_kernels"] = _guarded(_decode_kernels, module, on_gpu.config)
            row["default_init"] = _guarded(_default_init, path, name, weights)
        rows[path.stem] = row
        print(path.stem, json.dumps(row), flush=True)
        del module, gen, on_gpu
        torch.cuda.empty_cache()
    rows["copy_bandwidth_GBps"] = _copy_bandwidth()
    print(json.dumps(rows, indent=1))
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=1))


def _default_init(path: Path, name: str, weights: Path) -> dict:
    """The correctness check again with PyTorch's own initialization of the model (GPT-2's
    0.02-scaled weights, seeded) instead of ``randomize``'s wide one: the same module, other
    weights."""
    import pyree.runtime as rt
    import torch
    from pyree.compiler.llm.decoder import write_parameters
    cls, config, dtype = _models()[name]
    torch.manual_seed(SEED)
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    model = cls(config).to(dt).eval()
    write_parameters(model, weights / f"{name}_default.safetensors")
    module = rt.load_module(path.read_bytes(), device="cuda",
                            parameters=[f"model={weights / f'{name}_default.safetensors'}"])
    gen, on_gpu = rt.Generator(module), model.to("cuda")
    agree = []
    for prompt in PROMPTS:
        got, want = list(gen.generate(prompt, STEPS)), torch_greedy(on_gpu, prompt, STEPS, "cuda")
        agree.append(next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), STEPS))
    return {"greedy_tokens_agreeing": agree,
            "logits_error": _logits_error(module, on_gpu, PROMPTS[1], STEPS)}


def _guarded(measure, *args):
    """``measure(*args)``, or the error it raised as text: one failed measurement does not
    lose the run's others."""
    try:
        return measure(*args)
    except Exception as e:  # noqa: BLE001 - reported in the results
        return f"{type(e).__name__}: {e}"


def _logits_error(module, model, prompt, steps) -> float:
    """The largest difference between pyree's and PyTorch's logits over ``steps`` decode steps
    fed PyTorch's own greedy tokens (teacher-forced: one flipped argmax does not compound), as
    a fraction of the largest logit PyTorch gave."""
    import torch
    want, want_logits = [], []
    c = model.config
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        k = torch.zeros(c.cache_shape(), dtype=dtype, device="cuda")
        logits, k, v = model(torch.tensor([prompt], device="cuda"), torch.tensor(0, device="cuda"), k, k)
        for i in range(steps):
            want_logits.append(logits[0].float().cpu().numpy())
            want.append(int(logits.argmax(-1)))
            logits, k, v = model(torch.tensor([[want[-1]]], device="cuda"),
                                 torch.tensor(len(prompt) + i, device="cuda"), k, v)
    logits, _, _, k, v = module["prefill"](np.array([prompt]))
    worst, scale = 0.0, max(float(np.abs(w).max()) for w in want_logits)
    for i, token in enumerate(want):
        got = np.asarray(logits.to_host(), np.float32)[0]
        worst = max(worst, float(np.abs(got - want_logits[i]).max()))
        logits, _, _, k, v = module["decode"](np.array([[token]]), np.array(len(prompt) + i), k, v)
    return worst / scale


def _decode_kernels(module, config) -> dict:
    """GPU time of each of pyree's kernels in one decode step (CUPTI, 10 steps averaged): the
    20 largest, their count and the total."""
    sys.path[:0] = [str(ROOT / "bench" / "models")]
    from profile_kernels import kernel_times
    rng = np.random.default_rng(1)
    state = dict(zip(("logits", "best", "at", "k", "v"),
                     module["prefill"](rng.integers(0, config.vocab, (1, POSITION)))))

    def step():
        state.update(zip(("logits", "best", "at", "k", "v"), module["decode"](
            state["best"], state["at"], state["k"], state["v"])))
        state["best"].to_host()
    times = {name: float(np.mean(t)) for name, t in kernel_times(step, 10).items()}
    top = dict(sorted(times.items(), key=lambda kv: -kv[1])[:20])
    return {"kernels": len(times), "total_us": sum(times.values()), "top_us": top}


def _copy_bandwidth() -> float:
    """Device-to-device copy bandwidth (read + write bytes per second) of a 1 GiB buffer."""
    import torch
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(10):
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * a.numel() / float(np.median(times)) / 1e9


def _speed(module, model) -> dict:
    import torch
    c = model.config
    dtype = next(model.parameters()).dtype
    rng = np.random.default_rng(0)
    out: dict = {}
    # pyree: prefill a prompt of POSITION tokens, then time STEPS greedy decode steps
    prompt = rng.integers(0, c.vocab, (1, POSITION))
    _, best, at, k, v = module["prefill"](prompt)
    decode = module["decode"]
    for _ in range(3):  # warm up
        _, best, at, k, v = decode(best, at, k, v)
    best.to_host()
    start = time.perf_counter()
    for _ in range(STEPS):  # every argument a result of the step before: all on the device
        _, best, at, k, v = decode(best, at, k, v)
    best.to_host()
    out["pyree_device_loop_ms"] = (time.perf_counter() - start) / STEPS * 1e3
    out["pyree_decode_ms"] = _generator_ms(module, prompt)
    # PyTorch eager, same loop
    tokens = torch.tensor(prompt, device="cuda")
    with torch.no_grad():
        kc = torch.zeros(c.cache_shape(), dtype=dtype, device="cuda")
        logits, kc, vc = model(tokens, torch.tensor(0, device="cuda"), kc, kc.clone())
        tok = logits.argmax(-1, keepdim=True)
        for i in range(3):
            logits, kc, vc = model(tok, torch.tensor(POSITION + i, device="cuda"), kc, vc)
            tok = logits.argmax(-1, keepdim=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(STEPS):
            logits, kc, vc = model(tok, torch.tensor(POSITION + 3 + i, device="cuda"), kc, vc)
            tok = logits.argmax(-1, keepdim=True)
        tok.item()
        out["torch_eager_decode_ms"] = (time.perf_counter() - start) / STEPS * 1e3
        # PyTorch's step in a CUDA graph over static caches (gpt-fast's shape)
        s_tok, s_pos = tok.clone(), torch.tensor(POSITION, device="cuda")
        s_k, s_v = kc.clone(), vc.clone()

        def graph_step():
            g_logits, g_k, g_v = model(s_tok, s_pos, s_k, s_v)
            s_k.copy_(g_k)
            s_v.copy_(g_v)
            s_tok.copy_(g_logits.argmax(-1, keepdim=True))
        out["torch_graph_decode_ms"] = _graph_ms(graph_step, s_tok, s_pos)
    if hasattr(model, "wte"):
        out["torch_fast"] = _guarded(_torch_fast_decode, model, prompt)
    weight_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    cache_bytes = 2 * kc.numel() * kc.element_size()
    out["bytes_per_token_MB"] = (weight_bytes + cache_bytes) / 1e6
    # prefill
    for n in (128, 512, 1024):
        prompt = rng.integers(0, c.vocab, (1, n))
        module["prefill"](prompt)[1].to_host()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            module["prefill"](rng.integers(0, c.vocab, (1, n)))[1].to_host()
            times.append(time.perf_counter() - start)
        out[f"pyree_prefill_{n}_ms"] = float(np.median(times)) * 1e3
        with torch.no_grad():
            empty = torch.zeros(c.cache_shape(), dtype=dtype, device="cuda")
            t = torch.tensor(prompt, device="cuda")
            model(t, torch.tensor(0, device="cuda"), empty, empty)[0].argmax().item()
            times = []
            for _ in range(5):
                t = torch.tensor(rng.integers(0, c.vocab, (1, n)), device="cuda")
                start = time.perf_counter()
                model(t, torch.tensor(0, device="cuda"), empty, empty)[0].argmax().item()
                times.append(time.perf_counter() - start)
            out[f"torch_eager_prefill_{n}_ms"] = float(np.median(times)) * 1e3
        best = _guarded(_torch_sdpa_prefill, model, n, rng)
        out.update(best if isinstance(best, dict) else {f"torch_sdpa_prefill_{n}": best})
    return out


def _generator_ms(module, prompt, repeats: int = 3) -> float:
    """ms per token of the user's path: rt.Generator's greedy loop, which reads each token (one
    step behind), with the prefill (timed alone) taken out; median of ``repeats``."""
    import pyree.runtime as rt
    gen = rt.Generator(module)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        module["prefill"](prompt)[1].to_host()
        prefilled = time.perf_counter() - start
        start = time.perf_counter()
        tokens = list(gen.generate(prompt[0], STEPS + 1))
        times.append((time.perf_counter() - start - prefilled) / (len(tokens) - 1))
    return float(np.median(times)) * 1e3


def compare(folders: list[Path], name: str, json_out: str, turns: int = 5) -> None:
    """One model's builds (``name``.cuda.vmfb in each folder) in one process: greedy tokens
    against PyTorch per build, then the Generator's ms per token in ``turns`` rounds, the
    builds in turn within each (so that a drift of the card's clocks falls on all alike), and
    gpt-fast's graph once for scale."""
    import pyree.runtime as rt
    import torch
    from pyree.compiler.llm.decoder import write_parameters
    model = _model(name)
    weights = Path("/tmp/llm_weights") / f"{name}.safetensors"
    weights.parent.mkdir(exist_ok=True)
    write_parameters(model, weights)
    on_gpu = model.to("cuda")
    modules, rows = {}, {"gpu": torch.cuda.get_device_name(), "model": name}
    for folder in folders:
        module = rt.load_module((folder / f"{name}.cuda.vmfb").read_bytes(), device="cuda",
                                parameters=[f"model={weights}"])
        gen = rt.Generator(module)
        agree = []
        for prompt in PROMPTS:
            got, want = list(gen.generate(prompt, STEPS)), torch_greedy(on_gpu, prompt, STEPS, "cuda")
            agree.append(next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), STEPS))
        modules[str(folder)] = module
        rows[str(folder)] = {"greedy_tokens_agreeing": agree, "decode_ms": []}
    prompt = np.random.default_rng(0).integers(0, on_gpu.config.vocab, (1, POSITION))
    for module in modules.values():  # the first call at the prompt's length is not timed
        _generator_ms(module, prompt, repeats=1)
    for _ in range(turns):
        for folder, module in modules.items():
            rows[folder]["decode_ms"].append(_generator_ms(module, prompt, repeats=1))
    if hasattr(on_gpu, "wte"):
        rows["torch_fast"] = _guarded(_torch_fast_decode, on_gpu, prompt)
    print(json.dumps(rows, indent=1))
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=1))


def _torch_sdpa_prefill(model, n: int, rng) -> dict:
    """PyTorch's best prefill of ``n`` tokens: the same model with its attention by SDPA (causal;
    flash attention in f16 and bf16, grouped heads as SDPA's own) and no cache read (start as int
    0, as pyree's prefill), eager and replayed from a CUDA graph; ms from the prompt on the host
    to the argmax on the host, as pyree's is timed; median of 5, fresh random prompts."""
    import torch
    from pyree.compiler.llm import models
    from torch.nn import functional as F

    def sdpa(q, k_old, v_old, k_new, v_new, start):
        return F.scaled_dot_product_attention(q, k_new, v_new, is_causal=True,
                                              enable_gqa=k_new.shape[1] != q.shape[1])
    c = model.config
    empty = torch.zeros(c.cache_shape(), dtype=next(model.parameters()).dtype, device="cuda")
    tokens = torch.zeros((1, n), dtype=torch.int64, device="cuda")

    def forward():
        return model(tokens, 0, empty, empty)[0].argmax()

    def timed(run) -> float:
        times = []
        for _ in range(5):
            prompt = torch.from_numpy(rng.integers(0, c.vocab, (1, n)))
            start = time.perf_counter()
            tokens.copy_(prompt)
            run().item()
            times.append(time.perf_counter() - start)
        return float(np.median(times)) * 1e3

    saved, models.attend = models.attend, sdpa
    try:
        with torch.no_grad():
            forward().item()
            out = {f"torch_sdpa_eager_prefill_{n}_ms": timed(forward)}
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                forward()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                best = forward()

            def replay():
                graph.replay()
                return best
            replay().item()
            out[f"torch_sdpa_graph_prefill_{n}_ms"] = timed(replay)
    finally:
        models.attend = saved
    return out


def _torch_fast_decode(model, prompt) -> dict:
    """PyTorch's best decode loop for the GPT-2 (gpt-fast's shape): the same weights, caches
    written in place (``index_copy_``) into static tensors, attention by SDPA over the cache
    with a mask, the step in a CUDA graph, greedy argmax inside it; eager too."""
    import torch
    from torch.nn import functional as F
    c = model.config
    dtype = next(model.parameters()).dtype
    kc = torch.zeros(c.cache_shape(), dtype=dtype, device="cuda")
    vc = torch.zeros_like(kc)
    rows = torch.arange(c.context, device="cuda")

    def step(tok, pos):
        x = model.wte(tok) + model.wpe(pos.view(1, 1))
        mask = (rows <= pos).view(1, 1, 1, -1)
        for i, block in enumerate(model.h):
            h = block.ln_1(x)
            q, k, v = (t.view(1, 1, c.heads, c.head_dim).transpose(1, 2)
                       for t in block.attn.c_attn(h).split(c.width, dim=-1))
            kc[i].index_copy_(2, pos.view(1), k)
            vc[i].index_copy_(2, pos.view(1), v)
            y = F.scaled_dot_product_attention(q, kc[i], vc[i], attn_mask=mask)
            x = x + block.attn.c_proj(y.transpose(1, 2).reshape(1, 1, c.width))
            x = x + block.mlp(block.ln_2(x))
        logits = model.ln_f(x[:, -1]) @ model.wte.weight.t()
        return logits.argmax(-1, keepdim=True)

    out = {}
    with torch.no_grad():
        tok = torch.tensor([[int(prompt[0, -1])]], device="cuda")
        pos = torch.tensor(POSITION, device="cuda")
        for i in range(3):
            tok = step(tok, pos + i)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(STEPS):
            tok = step(tok, pos + 3 + i)
        tok.item()
        out["torch_fast_eager_decode_ms"] = (time.perf_counter() - start) / STEPS * 1e3
        s_tok, s_pos = tok.clone(), pos.clone()
        out["torch_fast_graph_decode_ms"] = _graph_ms(lambda: s_tok.copy_(step(s_tok, s_pos)),
                                                      s_tok, s_pos)
    return out


def _graph_ms(step, token, position) -> float:
    """ms per token of ``step`` (one decode step over static tensors, writing its argmax into
    ``token``) captured in a CUDA graph and replayed ``STEPS`` times, ``position`` set before
    each replay; warmed up on a side stream first, as PyTorch's graph capture requires."""
    import torch
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(STEPS):
        position.fill_(POSITION + 3 + i)
        graph.replay()
    token.item()
    return (time.perf_counter() - start) / STEPS * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("build", "run", "compare"))
    p.add_argument("folder", type=Path, nargs="+", help="one folder; for compare, several")
    p.add_argument("--target", default="sm_90")
    p.add_argument("--json", default="")
    p.add_argument("--match", default="", help="build or run only the models whose name has this")
    p.add_argument("--no-kernels", action="store_true", help="skip the CUPTI kernel profile")
    p.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                   help="build with a compiler constant changed (repeatable)")
    args = p.parse_args()
    global KERNELS
    KERNELS = not args.no_kernels
    if args.command == "compare":
        compare(args.folder, args.match or "gpt2_small_f16", args.json)
    elif len(args.folder) > 1:
        p.error(f"{args.command} takes one folder")
    elif args.command == "build":
        build(args.folder[0], args.target, args.match, tuple(args.set))
    else:
        run(args.folder[0], args.json, args.match)


if __name__ == "__main__":
    main()
