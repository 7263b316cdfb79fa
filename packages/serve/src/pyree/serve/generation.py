"""GenerationDeployment: a decoder module (``pyree.compiler.llm``) that streams generated tokens.

Each replica loads the module once, with its parameter files, and one ``pyree.runtime.Generator``
serves every request: a request's generation holds its own KV caches (device arrays), so
requests run concurrently on one loaded module, each in a worker thread, and each token goes out
as soon as it is read. How many run at once is Ray Serve's ``max_ongoing_requests`` (default
4): more wait in Ray's queue, never in a replica.

HTTP: ``POST`` a JSON object ``{"prompt": [ids], "max_new_tokens": n, "temperature": 0.0,
"top_k": 0, "seed": 0, "stop": null}`` (only ``prompt`` is required; 16 new tokens by default)
and read newline-delimited JSON: ``{"token": id}`` per token, then ``{"done": true, "tokens":
count}``. A request the module cannot take (ids outside the vocabulary, a prompt longer than the
context, a field of the wrong type) is a 400 with ``{"error": ...}`` before anything streams.
``GET`` describes the module (context, vocabulary) and the generations running now and at
most at once. The handle interface is
``handle.options(stream=True).generate.remote(prompt, max_new_tokens, ...)``, an async stream
of token ids.
"""

from __future__ import annotations

import asyncio
import json
import os

import pyree.runtime as rt
from pyree.serve.wire import RequestError
from ray import serve
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

_FIELDS = {"max_new_tokens": (int, 16), "temperature": ((int, float), 0.0), "top_k": (int, 0),
           "seed": (int, 0), "stop": ((int, type(None)), None)}
_END = object()


@serve.deployment
class GenerationDeployment:
    def __init__(self, module: str | os.PathLike | bytes, device: str = "local-task",
                 parameters: list | None = None):
        loaded = rt.load_module(module, device, parameters=parameters or [])
        self.generator = rt.Generator(loaded)
        self.vocab = self.generator.vocab
        self.running = self.most_at_once = 0  # generations in progress, and their peak

    def describe(self) -> dict:
        return {"context": self.generator.context, "vocab": self.vocab,
                "running": self.running, "most_at_once": self.most_at_once}

    def check(self, prompt, options: dict) -> tuple[list[int], dict]:
        """The request's prompt and ``Generator.generate`` options, or a RequestError."""
        if not isinstance(prompt, list) or not prompt or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            raise RequestError('"prompt" must be a non-empty list of token ids')
        if not all(0 <= t < self.vocab for t in prompt):
            raise RequestError(f'"prompt" holds ids outside the vocabulary [0, {self.vocab})')
        if len(prompt) > self.generator.context:
            raise RequestError(f'a prompt of {len(prompt)} tokens: the module\'s context holds '
                               f'1 to {self.generator.context}')
        unknown = set(options) - set(_FIELDS)
        if unknown:
            raise RequestError(f"unknown fields {sorted(unknown)}; a request takes \"prompt\" and "
                               f"{sorted(_FIELDS)}")
        out = {}
        for name, (types, default) in _FIELDS.items():
            value = options.get(name, default)
            if not isinstance(value, types) or isinstance(value, bool):
                raise RequestError(f'"{name}" must be {_kind(types)}, not {json.dumps(value)}')
            out[name] = value
        if out["max_new_tokens"] < 0 or out["top_k"] < 0 or out["temperature"] < 0:
            raise RequestError('"max_new_tokens", "top_k" and "temperature" must be >= 0')
        return prompt, out

    async def generate(self, prompt: list[int], max_new_tokens: int = 16, **options):
        """The handle interface: an async stream of the generated token ids."""
        try:
            prompt, checked = self.check(prompt, {"max_new_tokens": max_new_tokens, **options})
        except RequestError as e:
            raise rt.InvocationError(str(e)) from None
        async for token in self._tokens(prompt, checked):
            yield token

    async def _tokens(self, prompt: list[int], options: dict):
        """Tokens as the worker thread reads them; the device work stays off the event loop."""
        tokens = self.generator.generate(prompt, options.pop("max_new_tokens"), **options)
        self.running += 1  # (on the event loop: no lock needed)
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            while (token := await asyncio.to_thread(next, tokens, _END)) is not _END:
                yield token
        finally:
            self.running -= 1

    async def __call__(self, request: Request) -> Response:
        if request.method == "GET":
            return _json(200, self.describe())
        if request.method != "POST":
            return _json(405, {"error": f"use POST to generate (GET describes the module), not "
                                        f"{request.method}"})
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise RequestError("the body must be a JSON object with a \"prompt\"")
            prompt, options = self.check(body.get("prompt"), {k: v for k, v in body.items()
                                                              if k != "prompt"})
        except (RequestError, ValueError) as e:
            return _json(400, {"error": str(e) if isinstance(e, RequestError)
                               else f"the body is not JSON: {e}"})

        async def lines():
            count = 0
            async for token in self._tokens(prompt, options):
                count += 1
                yield json.dumps({"token": token}) + "\n"
            yield json.dumps({"done": True, "tokens": count}) + "\n"
        return StreamingResponse(lines(), media_type="application/x-ndjson")


def _kind(types) -> str:
    names = {int: "an integer", float: "a number", type(None): "null"}
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(dict.fromkeys(names[t] for t in types))


def _json(status: int, payload: dict) -> Response:
    return Response(json.dumps(payload), status_code=status, media_type="application/json")


def generation(module: str | os.PathLike | bytes, device: str = "local-task", *,
               parameters: list | None = None, **options) -> serve.Application:
    """An application to ``serve.run`` that streams tokens from a decoder module (``prefill``
    and ``decode``, pyree.compiler.llm) on ``device``, its weights from ``parameters`` (as
    ``load_module`` takes them: ``["model=/path/weights.safetensors"]``, paths every node can
    read). ``options`` are Ray Serve's deployment options; ``max_ongoing_requests`` (concurrent
    generations per replica) defaults to 4."""
    options.setdefault("max_ongoing_requests", 4)
    module = bytes(module) if isinstance(module, (bytes, bytearray, memoryview)) \
        else os.path.abspath(module)
    return GenerationDeployment.options(**options).bind(module, device, parameters)
