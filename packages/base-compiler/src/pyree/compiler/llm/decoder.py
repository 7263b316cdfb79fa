"""A decoder-only language model as one module with two functions, its weights outside it.

The model follows the decoder convention (``models.py``): ``forward(tokens, start, k_cache,
v_cache) -> (logits, k_cache, v_cache)``. ``export_decoder`` traces it twice through
torch.export and torch-mlir, and joins the two functions into one MLIR module:

- ``prefill(tokens[b, n]) -> (logits[b, vocab], next[b, 1], position, k_cache, v_cache)``: a
  prompt of any length ``n`` from 1 to the context (a run-time size), from empty caches;
- ``decode(token[b, 1], position, k_cache, v_cache) -> (logits, next, position, k_cache,
  v_cache)``: one step, the token at ``position`` (a 0-d i64); static shapes throughout.

``next`` is the logits' argmax, computed on the device and shaped as ``decode``'s token, and
``position`` the next step's (``n``, then ``position + 1``): a greedy loop feeds every argument
of the next step from the results of the last, device arrays all. That keeps the step's binding
table to the few buffers its results rotate through, so the runtime replays the CUDA graphs it
captured for them; a host array would be uploaded into a new buffer each step, and each new
table is a new capture (2 ms of host time a step on the H200, more than the step's
kernels).

Every ``state_dict`` tensor is a parameter ``scope::name`` (``import_torch(parameter_scope=)``),
so the module holds code only and any safetensors file with the model's names fills it;
``write_parameters`` writes one from the model.

**The KV cache is arguments and results, not module state.** A mutable global would keep it
on the device too, but a module's globals are one state shared by every caller (docs/DESIGN.md):
two concurrent requests would need two loaded modules. As values, each request holds its own
caches (device arrays: ``pyree.runtime.generate`` passes them from one step to the next with no
host round trip) and one module serves them all. The cost is that a step writes the whole cache
it returns; docs/LLM.md measures it.
"""

from __future__ import annotations

import re
from pathlib import Path

from pyree.compiler.errors import CompileError
from pyree.compiler.extras import require

FUNCTIONS = ("prefill", "decode")


def export_decoder(model, *, batch: int = 1, scope: str = "model") -> str:
    """MLIR text of ``model`` (an ``nn.Module`` with a ``config`` that has ``cache_shape`` and
    ``context``, following the decoder convention) as ``prefill`` and ``decode``, its weights
    parameters in ``scope``."""
    require("torch", "torch", "exporting a decoder")
    import torch
    from pyree.compiler.importers.torch import import_torch

    config = getattr(model, "config", None)
    if not (hasattr(config, "cache_shape") and hasattr(config, "context")):
        raise CompileError(f"export_decoder takes a model that follows the decoder convention "
                           f"(pyree.compiler.llm.models): its 'config' has cache_shape(batch) and "
                           f"context; {type(model).__name__} has config {config!r}")
    cache = config.cache_shape(batch)
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    model = model.eval()

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def state_dict(self, *args, **kwargs):  # the model's names, which import_torch uses
            return model.state_dict(*args, **kwargs)

    class Prefill(Step):
        def forward(self, tokens):
            empty = torch.zeros(cache, dtype=dtype)
            logits, k, v = self.model(tokens, 0, empty, empty)  # int 0: nothing cached (attend)
            after = torch.zeros((), dtype=torch.long) + tokens.shape[1]
            return logits, logits.argmax(-1, keepdim=True), after, k, v

    class Decode(Step):
        def forward(self, token, position, k_cache, v_cache):
            logits, k, v = self.model(token, position, k_cache, v_cache)
            return logits, logits.argmax(-1, keepdim=True), position + 1, k, v

    n = min(8, config.context)
    prompt = torch.zeros(batch, n, dtype=torch.long)
    length = torch.export.Dim("prompt", min=1, max=config.context)
    with torch.no_grad():
        prefill = import_torch(Prefill(), prompt, function_name="prefill", parameter_scope=scope,
                               dynamic_shapes={"tokens": {1: length}})
        decode = import_torch(Decode(), prompt[:, :1], torch.tensor(n), torch.zeros(cache, dtype=dtype),
                              torch.zeros(cache, dtype=dtype), function_name="decode",
                              parameter_scope=scope)
    return join_modules({"prefill": prefill, "decode": decode}, type(model).__name__.lower())


def write_parameters(model, path: str | Path) -> None:
    """The model's ``state_dict`` as a safetensors (or ``.irpa``) file, under its own names."""
    import torch
    from pyree.compiler.parameters import write_file
    from pyree.compiler.parameters.irpa import write_irpa
    from pyree.compiler.parameters.safetensors import write_safetensors

    names = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
             torch.int64: "i64", torch.int32: "i32", torch.bool: "i1"}
    entries = []
    for key, t in model.state_dict().items():
        if t.dtype not in names:
            raise CompileError(f"parameter '{key}' is {t.dtype}, which pyree does not store")
        data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        entries.append((key, names[t.dtype], tuple(t.shape), data))
    path = Path(path)
    if path.suffix == ".irpa":
        write_file(path, lambda f: write_irpa(f, [(k, d) for k, _, _, d in entries]))
    else:
        write_file(path, lambda f: write_safetensors(f, entries))


_ALIAS = re.compile(r"^#([\w$.-]+) = ", re.M)


def join_modules(parts: dict[str, str], name: str = "decoder") -> str:
    """One MLIR module ``name`` of several torch-mlir modules (part name -> text), each with one
    function: their attribute aliases (``#map3``) and resource blobs renamed apart by the part's
    name (two imports number theirs alike), the parameter globals they share declared once."""
    globals_: dict[str, str] = {}
    aliases, bodies, blobs = [], [], []
    for part, text in parts.items():
        for alias in sorted(set(_ALIAS.findall(text)), key=len, reverse=True):
            text = re.sub(rf"#{re.escape(alias)}\b", f"#{part}_{alias}", text)
        module, _, resources = text.partition("\n{-#")
        for blob in re.findall(r"^\s*([\w.$-]+): \"0x", resources, re.M):
            module = module.replace(f"dense_resource<{blob}>", f"dense_resource<{part}_{blob}>")
            resources = re.sub(rf"^(\s*){re.escape(blob)}:", rf"\g<1>{part}_{blob}:", resources,
                               flags=re.M)
        blobs += re.findall(r"^\s*([\w.$-]+: \"0x[0-9A-Fa-f]*\")", resources, re.M)
        head = re.search(r"^module( attributes \{.*\})? \{\n", module, re.M)
        if head is None:
            raise CompileError(f"the import of '{part}' is not one MLIR module")
        aliases.append(module[:head.start()])
        lines = module[head.end():].rstrip().removesuffix("}").splitlines()
        for line in lines:
            if line.lstrip().startswith("util.global "):
                globals_[line.split("=")[0]] = line
        bodies += [line for line in lines if not line.lstrip().startswith("util.global ")]
    text = ("".join(aliases) + f"module @{name} {{\n" + "\n".join([*globals_.values(), *bodies])
            + "\n}\n")
    if blobs:
        text += ("{-#\n  dialect_resources: {\n    builtin: {\n      "
                 + ",\n      ".join(blobs) + "\n    }\n  }\n#-}\n")
    return text
