"""pyree.serve on a real Ray Serve instance: one small Ray (2 CPUs, no dashboard) on this machine,
two applications on 127.0.0.1 -- a stacked function with 2 replicas (module passed as bytes) and
an unstackable one with 1 replica (module read from a path) -- driven over HTTP and through
DeploymentHandles. Every loop is bounded and every wait has a timeout; Ray is always shut down."""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from tooling import require_module

# rows: every argument and result has leading dim 5, so requests of k rows are stacked into
# calls of 5. scale: its rank-0 argument makes it unstackable, so each request is one call; its
# check op refuses a zero divisor. guarded (stacked by 3) checks that every value is >= 0.
SOURCE = """
func.func @rows(%x: tensor<5x7xf32>, %y: tensor<5x7xi32>) -> (tensor<5x7xf32>, tensor<5xf32>) {
  %yf = arith.sitofp %y : tensor<5x7xi32> to tensor<5x7xf32>
  %p = arith.mulf %x, %yf : tensor<5x7xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<5xf32>) -> tensor<5xf32>
  %s = linalg.reduce ins(%x : tensor<5x7xf32>) outs(%init : tensor<5xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %0 = arith.addf %in, %acc : f32
      linalg.yield %0 : f32
    }
  return %p, %s : tensor<5x7xf32>, tensor<5xf32>
}
func.func @scale(%x: tensor<3x4xf32>, %s: tensor<f32>) -> tensor<3x4xf32> {
  %zero = arith.constant dense<0.0> : tensor<f32>
  %nonzero = arith.cmpf one, %s, %zero : tensor<f32>
  check.expect_all_true(%nonzero) : tensor<i1>
  %e = tensor.empty() : tensor<3x4xf32>
  %b = linalg.broadcast ins(%s : tensor<f32>) outs(%e : tensor<3x4xf32>) dimensions = [0, 1]
  %r = arith.divf %x, %b : tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}
func.func @guarded(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %zero = arith.constant dense<0.0> : tensor<3x2xf32>
  %ok = arith.cmpf oge, %x, %zero : tensor<3x2xf32>
  check.expect_all_true(%ok) : tensor<3x2xi1>
  %r = math.sqrt %x : tensor<3x2xf32>
  return %r : tensor<3x2xf32>
}
"""
# Ray's own pydantic models warn on import; nothing of ours.
pytestmark = pytest.mark.filterwarnings("ignore:Using extra keyword arguments on `Field`")
TIMEOUT_S = 30  # any one request or handle call
ROUNDS = 4      # concurrent rounds at most, until both replicas served and a batch held several


@pytest.fixture(scope="module")
def module() -> bytes:
    import pyree.compiler as pc
    return pc.compile_str(SOURCE, pc.CompileOptions(target_backends=["llvm-cpu"],
                                                    llvmcpu_target_cpu="generic"))


@pytest.fixture(scope="module")
def served(module, tmp_path_factory):
    """(port, rows handle, scale handle) of a running Serve instance; torn down after the module."""
    require_module("ray.serve")
    import pyree.serve
    import ray
    from ray import serve

    path = tmp_path_factory.mktemp("serve") / "m.vmfb"
    path.write_bytes(module)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 << 20)  # Ray's minimum is 75 MiB; the default is 30% of RAM
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        replica = {"ray_actor_options": {"num_cpus": 0.25}}
        rows = serve.run(pyree.serve.deployment(module, "rows", num_replicas=2, max_batch_size=8,
                                                batch_wait_timeout_s=0.05, **replica),
                         name="rows", route_prefix="/rows")
        scale = serve.run(pyree.serve.deployment(path, "scale", **replica),
                          name="scale", route_prefix="/scale")
        yield port, rows, scale
    finally:
        serve.shutdown()
        ray.shutdown()


def request(port: int, path: str, body: bytes | dict | None, method: str = "POST"):
    """(status, headers, JSON body) of one request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        connection.request(method, path, body=data, headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        connection.close()


def rows_inputs(rng, k: int):
    """k rows of each argument, with NaN, ±inf and -0 where the values pass through."""
    x = rng.standard_normal((k, 7)).astype(np.float32)
    x.flat[rng.choice(x.size, 4, replace=False)] = [np.nan, np.inf, -np.inf, -0.0]
    y = rng.integers(1, 6, (k, 7)).astype(np.int32)  # positive: -0 * y stays -0
    return x, y


def check_rows(x, y, product, sums):
    np.testing.assert_array_equal(product, x * y.astype(np.float32))
    assert np.array_equal(np.signbit(product), np.signbit(x * y.astype(np.float32)))
    with np.errstate(invalid="ignore"):  # inf + -inf in a row: NaN, as pyree computes it
        expected = x.sum(axis=1, dtype=np.float64).astype(np.float32)
    np.testing.assert_allclose(sums, expected, rtol=2e-6, atol=4e-6)  # float32 sums of 7 values


def encode(array: np.ndarray, form: str):
    if form == "list":
        return array.tolist()
    return {"dtype": array.dtype.name, "shape": list(array.shape),
            "data": base64.b64encode(array.astype(array.dtype.newbyteorder("<")).tobytes()).decode()}


def decode(value, form: str, dtype) -> np.ndarray:
    if form == "list":
        return np.array(value, dtype)
    assert value["dtype"] == np.dtype(dtype).name
    return np.frombuffer(base64.b64decode(value["data"]), np.dtype(dtype).newbyteorder("<")) \
        .reshape(value["shape"])


@pytest.mark.timeout(120)
def test_http_requests_are_batched_across_two_replicas(served):
    port, _, _ = served
    rng = np.random.default_rng(0)

    def one(i: int, x, y):
        form = ("list", "base64")[i % 2]
        status, headers, body = request(port, "/rows", {"inputs": [encode(x, form), encode(y, form)],
                                                        "output_encoding": form})
        assert status == 200, body
        product, sums = body["outputs"]
        check_rows(x, y, decode(product, form, np.float32), decode(sums, form, np.float32))
        return headers["x-pyree-replica"], int(headers["x-pyree-batch-size"])

    replicas, sizes = set(), []
    with ThreadPoolExecutor(12) as pool:
        for _ in range(ROUNDS):
            # 1..11 rows: partial calls, whole ones, requests spanning several
            inputs = [rows_inputs(rng, int(k)) for k in rng.integers(1, 12, 12)]
            for replica, size in pool.map(one, range(12), *zip(*inputs)):
                replicas.add(replica)
                sizes.append(size)
            if len(replicas) == 2 and max(sizes) > 1:
                break
    assert len(replicas) == 2, f"one replica served every request: {replicas}"
    assert max(sizes) > 1, f"no batch held more than one request: {sizes}"


@pytest.mark.timeout(120)
def test_handle_calls_take_and_return_numpy(served):
    import pyree.runtime as rt

    _, rows, scale = served
    rng = np.random.default_rng(1)
    inputs = [rows_inputs(rng, k) for k in (1, 4, 5, 6, 13)]
    responses = [rows.infer.remote(x, y) for x, y in inputs]
    for (x, y), response in zip(inputs, responses):
        product, sums = response.result(timeout_s=TIMEOUT_S)
        assert product.dtype == np.float32 and product.shape == x.shape
        check_rows(x, y, product, sums)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(scale.infer.remote(x, 2.5).result(timeout_s=TIMEOUT_S),
                                  x / np.float32(2.5))
    with pytest.raises(rt.InvocationError, match=r"function 'rows' argument 1: expected kx7xi32 "
                                                 r"\(k >= 1 rows of the function's 5x7xi32.*got 2x7xf32"):
        rows.infer.remote(x[:2, :1].repeat(7, 1), x[:2, :1].repeat(7, 1)).result(timeout_s=TIMEOUT_S)


@pytest.mark.timeout(120)
def test_exact_function_served_from_a_path(served):
    port, _, _ = served
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -0.0]
    status, headers, body = request(port, "/scale", {"inputs": [x.tolist(), -3]})
    assert status == 200, body
    result = np.array(body["outputs"][0], np.float32)
    np.testing.assert_array_equal(result, x / np.float32(-3))
    assert not np.signbit(result[0, 2])  # -0 / -3 = +0
    assert headers["x-pyree-batch-size"] == "1"
    status, _, body = request(port, "/scale", {"inputs": [x[:2].tolist(), 1.0]})
    assert status == 400 and body["error"] == ("function 'scale' argument 0: expected 3x4xf32, "
                                               "got 2x4xf32")
    status, _, body = request(port, "/scale", {"inputs": [x.tolist(), 0]})
    assert status == 422 and body["error"] == ("<string>:18:3: Expected all elements to be nonzero. "
                                               "Contents: i1=0")
    status, _, body = request(port, "/scale", None, method="GET")
    assert status == 200 and body == {"function": "scale", "arguments": ["3x4xf32", "f32"],
                                      "results": ["3x4xf32"], "batch_rows": None}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("body, message", [
    (b"{not json", "the request body is not JSON"),
    ({"input": []}, 'must be a JSON object with an "inputs" list'),
    ({"inputs": [[[0.5] * 7]]}, r"function 'rows' takes 2 arguments \(kx7xf32, kx7xi32; k >= 1 "
                                r"rows each, which the server stacks into calls of 5 rows\), got 1"),
    ({"inputs": [[[0.5] * 6], [[1] * 6]]}, "function 'rows' argument 0: expected kx7xf32 .*got 1x6xf32"),
    ({"inputs": [[[0.5] * 7], [[1.5] * 7]]}, "input 1: float64 values cannot be converted to the "
                                             r"argument's element type i32 \(send integers\)"),
    ({"inputs": [[[0.5] * 7], [[2 ** 40] * 7]]}, "input 1: a value is out of the range of the "
                                                 "argument's element type i32"),
    ({"inputs": [[[0.5] * 7, [1.0]], [[1] * 7]]}, "input 0 is not a rectangular nested list"),
    ({"inputs": [[[0.5] * 7] * 2, [[1] * 7] * 3]}, r"different row counts \(2, 3\)"),
    ({"inputs": [encode(np.zeros((1, 7)), "base64"), [[1] * 7]]},
     "function 'rows' argument 0: expected kx7xf32 .*got 1x7xf64"),
    ({"inputs": [{"dtype": "float32", "shape": [1, 7], "data": "AAAA"}, [[1] * 7]]},
     r"input 0: 3 bytes of data for shape \[1, 7\] of float32, which needs 28"),
    ({"inputs": [[[0.5] * 7], [[1] * 7]], "output_encoding": "npy"}, '"output_encoding" must be one of'),
])
def test_bad_requests_are_400_with_the_reason(served, body, message):
    port, _, _ = served
    status, _, reply = request(port, "/rows", body)
    assert status == 400
    assert set(reply) == {"error"} and "\n" not in reply["error"]
    assert re.search(message, reply["error"]), reply["error"]


@pytest.mark.timeout(120)
def test_only_post_runs_the_function(served):
    port, _, _ = served
    status, _, body = request(port, "/rows", None, method="PUT")
    assert status == 405 and body["error"].startswith("use POST to run the function")


def test_stacking_follows_the_argument_types(module):
    require_module("ray.serve")
    import pyree.runtime as rt
    from pyree.serve import BatchPlan

    loaded = rt.load_module(module)
    assert BatchPlan.of(loaded["rows"]).rows == 5
    assert BatchPlan.of(loaded["rows"], stack=False).rows is None
    assert BatchPlan.of(loaded["scale"]).rows is None
    with pytest.raises(ValueError, match=r"function 'scale' \(3x4xf32, f32\) -> \(3x4xf32\) cannot "
                                         r"be served with stack=True: stacking needs every argument "
                                         r"and result to have the same leading \(batch\) dimension"):
        BatchPlan.of(loaded["scale"], stack=True)


@pytest.mark.parametrize("stack", [None, False])
def test_a_request_that_fails_a_check_fails_alone(module, stack):
    """Rows 0-1 | 2-3 (one negative) | 4-6 share calls of 3 when stacked; only the middle request
    may fail, in both plans."""
    require_module("ray.serve")
    import pyree.runtime as rt
    from pyree.serve import BatchPlan

    plan = BatchPlan.of(rt.load_module(module)["guarded"], stack)
    rng = np.random.default_rng(3)
    sizes = (2, 2, 3) if stack is None else (3, 3, 3)
    requests = [[rng.uniform(0, 4, (k, 2)).astype(np.float32)] for k in sizes]
    requests[1][0][-1, 0] = -1.0
    good, bad, also_good = plan.run(requests)
    assert isinstance(bad, rt.CheckError) and "Expected all elements to be nonzero" in str(bad)
    for (x,), (result,) in ((requests[0], good), (requests[2], also_good)):
        np.testing.assert_allclose(result, np.sqrt(x), rtol=1e-6)


def test_the_runtime_does_not_import_ray():
    code = "import sys, pyree.runtime; assert 'ray' not in sys.modules, 'pyree.runtime imported ray'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
