"""Token generation with a decoder module (``pyree.compiler.llm``: ``prefill`` and ``decode``).

    gen = rt.Generator(rt.load_module("gpt2.vmfb", device="cuda",
                                      parameters=["model=gpt2.safetensors"]))
    for token in gen.generate([464, 3290], max_new_tokens=64):           # greedy
        ...
    gen.generate(prompt, 64, temperature=0.8, top_k=40, seed=1)           # sampled

Greedy decoding never reads the logits: each step's argmax (computed on the device, shaped as
the next step's token) goes straight into the next step as a device array, with the next
position and the caches, so every argument of a step is a result of the last (and the runtime
replays the graphs it captured for the few buffers those rotate through); the host reads a
token only to hand it out, after the step that consumes it is submitted, so the device does not
wait for the host between steps. Each step donates the caches it is given (``donate``): the
module's cache results are tied to its cache arguments, so a step writes its new rows into the
same buffers instead of copying both caches (the buffers stay the same from step to step, and
so does every binding table). Sampling reads each step's logits (one row
of the vocabulary) and draws on the host with numpy's generator seeded by ``seed``: the same
seed gives the same tokens on every device.

Each call of ``generate`` holds its own caches, so several threads may generate with one
Generator at once (``pyree.serve`` does).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pyree.runtime.errors import InvocationError


class Generator:
    """Generation over one loaded decoder module."""

    def __init__(self, module):
        names = set(module.function_names)
        if not {"prefill", "decode"} <= names:
            raise InvocationError("a decoder module has functions 'prefill' and 'decode' "
                                  f"(pyree.compiler.llm); this one has {sorted(names)}")
        self.prefill, self.decode = module["prefill"], module["decode"]
        # decode(token, position, k_cache[layers, b, heads, context, head_dim], v_cache)
        self.context = int(self.decode.argument_types[2].shape[3])
        self.vocab = int(self.prefill.result_types[0].shape[-1])  # logits[b, vocab]

    def generate(self, prompt: Sequence[int], max_new_tokens: int, *, temperature: float = 0.0,
                 top_k: int = 0, seed: int = 0, stop: int | None = None) -> Iterator[int]:
        """The next ``max_new_tokens`` tokens after ``prompt`` (fewer after ``stop``, or where
        the context is full): greedy with ``temperature`` 0, else sampled at that temperature
        from the ``top_k`` most likely (from all with 0)."""
        import numpy as np

        raw = np.asarray(prompt)
        if raw.size and raw.dtype.kind not in "iu":
            raise InvocationError(f"a prompt is token ids (integers), not {raw.dtype} values")
        if temperature < 0 or top_k < 0:
            raise InvocationError(f"temperature and top_k must be >= 0, not {temperature} and "
                                  f"{top_k}")
        tokens = raw.astype(np.int64).reshape(1, -1)
        if not 1 <= tokens.shape[1] <= self.context:
            raise InvocationError(f"a prompt of {tokens.shape[1]} tokens: the module's context "
                                  f"holds 1 to {self.context}")
        outside = tokens[(tokens < 0) | (tokens >= self.vocab)]
        if outside.size:  # the embedding's gather would clamp them: a wrong answer, not an error
            raise InvocationError(f"prompt token {int(outside[0])} is outside the vocabulary "
                                  f"[0, {self.vocab})")
        rng = np.random.default_rng(seed)
        logits, best, at, k, v = self.prefill(tokens)
        position = tokens.shape[1]
        for step in range(max_new_tokens):
            if temperature > 0:
                chosen = np.array([[_sample(np.asarray(logits.to_host(), np.float64)[0],
                                            temperature, top_k, rng)]], np.int64)
            else:
                chosen = best  # on the device
            if step + 1 < max_new_tokens and position < self.context:
                # the caches are this generation's alone: given up, so that a step writes its
                # new rows into them in place (their results are tied to them)
                logits, best, at, k, v = self.decode(chosen, at, k, v, donate=(2, 3))
            else:
                position = self.context  # nothing follows this token
            token = int(np.asarray(chosen).reshape(-1)[0])
            yield token
            position += 1
            if token == stop or position > self.context:
                return


def _sample(logits, temperature: float, top_k: int, rng) -> int:
    """A token drawn from softmax(logits / temperature) over the ``top_k`` largest (all: 0)."""
    import numpy as np

    scaled = logits / temperature
    if 0 < top_k < scaled.size:
        cut = np.partition(scaled, -top_k)[-top_k]
        scaled = np.where(scaled >= cut, scaled, -np.inf)
    p = np.exp(scaled - scaled.max())
    return int(rng.choice(p.size, p=p / p.sum()))
