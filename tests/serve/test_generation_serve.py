"""pyree.serve.generation on a real Ray Serve instance on 127.0.0.1: a tiny GPT-2 (tests/llm's
random seeded weights, in a safetensors file) streaming tokens over HTTP and through a
streaming handle. Five concurrent requests against ``max_ongoing_requests=2``: each gets exactly
the tokens a local Generator gives for its prompt (each its own cache), the replica never runs
more than two at once, and bad requests are 400s naming the field. Every wait has a timeout;
Ray is always shut down."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.llm.decoder import export_decoder, write_parameters
from pyree.compiler.llm.models import GPT2, DecoderConfig, randomize
from tooling import require_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
pytestmark = pytest.mark.filterwarnings("ignore:Using extra keyword arguments on `Field`")
TIMEOUT_S = 60
CONFIG = DecoderConfig(vocab=97, width=32, layers=2, heads=4, context=80)
PROMPTS = [[5], [11, 3, 60], list(range(1, 17)), [42] * 7, [96, 0, 1]]


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    model = randomize(GPT2(CONFIG), 30).eval()
    folder = tmp_path_factory.mktemp("generation")
    (folder / "gpt2.vmfb").write_bytes(compile_str(export_decoder(model),
                                                   CompileOptions(target_backends=["llvm-cpu"])))
    write_parameters(model, folder / "weights.safetensors")
    return folder / "gpt2.vmfb", [f"model={folder / 'weights.safetensors'}"]


@pytest.fixture(scope="module")
def served(decoder):
    require_module("ray.serve")
    import pyree.serve
    import ray
    from ray import serve

    module, parameters = decoder
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 << 20)
    # a free port for the proxy once Ray's own processes hold theirs: picked before, it could be
    # the dashboard agent's fixed 52365 (it was once, and the proxy could not bind it)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        handle = serve.run(pyree.serve.generation(module, parameters=parameters,
                                                  max_ongoing_requests=2,
                                                  ray_actor_options={"num_cpus": 0.5}),
                           name="gpt2", route_prefix="/gpt2")
        yield port, handle
    finally:
        serve.shutdown()
        ray.shutdown()


def stream(port: int, body) -> tuple[int, list[dict], float]:
    """(status, the JSON lines, seconds to the first line) of one request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        start = time.monotonic()
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        connection.request("POST", "/gpt2", body=data, headers={"content-type": "application/json"})
        response = connection.getresponse()
        first, lines = None, []
        for line in response:
            first = first or time.monotonic() - start
            lines.append(json.loads(line))
        return response.status, lines, first
    finally:
        connection.close()


def local(decoder, prompt, n, **options) -> list[int]:
    module, parameters = decoder
    gen = rt.Generator(rt.load_module(str(module), "local-task", parameters=parameters))
    return list(gen.generate(prompt, n, **options))


@pytest.mark.timeout(300)
def test_concurrent_requests_each_stream_their_own_tokens(served, decoder):
    port, _ = served
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        results = list(pool.map(lambda p: stream(port, {"prompt": p, "max_new_tokens": 24}),
                                PROMPTS))
    for prompt, (status, lines, _) in zip(PROMPTS, results):
        assert status == 200, lines
        assert lines[-1] == {"done": True, "tokens": 24}
        assert [line["token"] for line in lines[:-1]] == local(decoder, prompt, 24)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    connection.request("GET", "/gpt2")
    described = json.loads(connection.getresponse().read())
    connection.close()
    assert described["context"] == CONFIG.context and described["vocab"] == CONFIG.vocab
    assert described["running"] == 0 and described["most_at_once"] == 2  # ran together, bounded


@pytest.mark.timeout(120)
def test_sampling_options_and_the_stop_token(served, decoder):
    port, _ = served
    status, lines, _ = stream(port, {"prompt": PROMPTS[1], "max_new_tokens": 12,
                                     "temperature": 0.8, "top_k": 10, "seed": 3})
    assert status == 200
    assert [x["token"] for x in lines[:-1]] == local(decoder, PROMPTS[1], 12, temperature=0.8,
                                                     top_k=10, seed=3)
    greedy = local(decoder, PROMPTS[2], 12)
    status, lines, _ = stream(port, {"prompt": PROMPTS[2], "max_new_tokens": 12,
                                     "stop": greedy[3]})
    assert [x["token"] for x in lines[:-1]] == greedy[:greedy.index(greedy[3]) + 1]


@pytest.mark.timeout(120)
def test_the_streaming_handle(served, decoder):
    _, handle = served
    tokens = list(handle.options(stream=True).generate.remote(PROMPTS[0], 10))
    assert tokens == local(decoder, PROMPTS[0], 10)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("body, message", [
    (b"{not json", "the body is not JSON"),
    ({"prompt": []}, '"prompt" must be a non-empty list of token ids'),
    ({"prompt": [1, 97]}, r'ids outside the vocabulary \[0, 97\)'),
    ({"prompt": [1] * 81}, "a prompt of 81 tokens: the module's context holds 1 to 80"),
    ({"prompt": [1], "max_new_tokens": "5"}, '"max_new_tokens" must be an integer, not "5"'),
    ({"prompt": [1], "temprature": 1}, r"unknown fields \['temprature'\]"),
])
def test_bad_requests_are_400_with_the_reason(served, body, message):
    import re
    port, _ = served
    status, lines, _ = stream(port, body)
    assert status == 400 and re.search(message, lines[0]["error"]), lines
