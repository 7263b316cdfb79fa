"""pyree.serve on a real Ray Serve instance: one small Ray (2 CPUs, no dashboard) on this machine,
four applications on 127.0.0.1 -- a function served with stacked rows by 2 replicas (module
passed as bytes), an unstackable one and one that mixes rows, served exactly as by default (module
read from a path), and a function with a dynamic batch served stacked (dynamic_batch.py) --
driven over HTTP and through DeploymentHandles. Every loop is bounded and every wait has a timeout; Ray is always shut down."""

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
from dynamic_batch import check_rows, compile_module, rows_inputs
from tooling import require_module

# rows: every argument and result has leading dim 5, so with stack_rows requests of k rows are
# stacked into calls of 5. scale: its rank-0 argument makes it unstackable; its check op refuses
# a zero divisor. guarded (3 rows) checks that every value is >= 0. center (x minus its column
# mean) mixes rows: its types would allow stacking, its answers would not.
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
func.func @center(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.reduce ins(%x : tensor<4x3xf32>) outs(%init : tensor<3xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %0 = arith.addf %in, %acc : f32
      linalg.yield %0 : f32
    }
  %quarter = arith.constant dense<0.25> : tensor<3xf32>
  %mean = arith.mulf %s, %quarter : tensor<3xf32>
  %e2 = tensor.empty() : tensor<4x3xf32>
  %b = linalg.broadcast ins(%mean : tensor<3xf32>) outs(%e2 : tensor<4x3xf32>) dimensions = [0]
  %r = arith.subf %x, %b : tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}
"""
# Ray's own pydantic models warn on import; nothing of ours.
pytestmark = pytest.mark.filterwarnings("ignore:Using extra keyword arguments on `Field`")
TIMEOUT_S = 30  # any one request or handle call
# A test's limit, the module's Ray start included for the first (about 45 s on a 2-core VM, past
# 120 s there while other compiles shared its cores): still a bound on a hang.
TEST_LIMIT_S = 300
ROUNDS = 4      # concurrent rounds at most, until both replicas served and a batch held several


@pytest.fixture(scope="module")
def module() -> bytes:
    import pyree.compiler as pc
    return pc.compile_str(SOURCE, pc.CompileOptions(target_backends=["llvm-cpu"],
                                                    llvmcpu_target_cpu="generic"))


@pytest.fixture(scope="module")
def served(module, tmp_path_factory):
    """(port, rows handle, scale handle) of a running Serve instance (center is served too);
    torn down after the module."""
    require_module("ray.serve")
    import pyree.serve
    import ray
    from ray import serve

    path = tmp_path_factory.mktemp("serve") / "m.vmfb"
    path.write_bytes(module)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 << 20)  # Ray's minimum is 75 MiB; the default is 30% of RAM
    # a free port for the proxy once Ray's own processes hold theirs: picked before, it could be
    # the dashboard agent's fixed 52365 (it was once, and the proxy could not bind it)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        replica = {"ray_actor_options": {"num_cpus": 0.25}}
        rows = serve.run(pyree.serve.deployment(module, "rows", stack_rows=True, num_replicas=2,
                                                max_batch_size=8, batch_wait_timeout_s=0.05,
                                                **replica),
                         name="rows", route_prefix="/rows")
        scale = serve.run(pyree.serve.deployment(path, "scale", **replica),
                          name="scale", route_prefix="/scale")
        serve.run(pyree.serve.deployment(path, "center", max_batch_size=8,
                                         batch_wait_timeout_s=0.05, **replica),
                  name="center", route_prefix="/center")
        serve.run(pyree.serve.deployment(compile_module(), "rows", stack_rows=True,
                                         max_batch_size=8, batch_wait_timeout_s=0.05, **replica),
                  name="dynamic", route_prefix="/dynamic")
        yield port, rows, scale
    finally:
        serve.shutdown()
        ray.shutdown()


def request(port: int, path: str, body: bytes | dict | None, method: str = "POST"):
    """(status, headers, JSON body) of one request."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        connection.close()


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


@pytest.mark.timeout(TEST_LIMIT_S)
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


@pytest.mark.timeout(TEST_LIMIT_S)
def test_a_dynamic_batch_is_served_in_shared_calls(served):
    """rows(?x7xf32, ?x7xi32): concurrent requests of 1-40 rows share batches (each batch one
    call of exactly its rows: test_dynamic_batch.py counts them), every answer its own."""
    port = served[0]
    status, _, body = request(port, "/dynamic", None, method="GET")
    assert status == 200 and body == {"function": "rows", "arguments": ["?x7xf32", "?x7xi32"],
                                      "results": ["?x7xf32", "?xf32"], "batch_rows": "?"}
    rng = np.random.default_rng(6)

    def one(x, y):
        status, headers, body = request(port, "/dynamic", {"inputs": [x.tolist(), y.tolist()]})
        assert status == 200, body
        check_rows(x, y, *(np.array(o, np.float32) for o in body["outputs"]))
        return int(headers["x-pyree-batch-size"])

    sizes = []
    with ThreadPoolExecutor(12) as pool:
        for _ in range(ROUNDS):
            sizes += pool.map(one, *zip(*(rows_inputs(rng, int(k))
                                          for k in rng.integers(1, 41, 12))))
            if max(sizes) > 1:
                break
    assert max(sizes) > 1, f"no batch held more than one request: {sizes}"


@pytest.mark.timeout(TEST_LIMIT_S)
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


@pytest.mark.timeout(TEST_LIMIT_S)
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


@pytest.mark.timeout(TEST_LIMIT_S)
@pytest.mark.parametrize("body, message", [
    (b"{not json", "the request body is not JSON"),
    ({"input": []}, 'must be a JSON object with an "inputs" list'),
    ({"inputs": [[[0.5] * 7]]}, r"function 'rows' takes 2 arguments \(kx7xf32, kx7xi32; k >= 1 "
                                r"rows each, which the server stacks into calls of 5 rows\), got 1"),
    ({"inputs": [[[0.5] * 6], [[1] * 6]]}, "function 'rows' argument 0: expected kx7xf32 .*got 1x6xf32"),
    ({"inputs": [[[0.5] * 7], [[1.5] * 7]]}, "input 1: expected 5x7xi32, got float64 values, "
                                             r"which i32 cannot hold exactly \(give integers\)"),
    ({"inputs": [[[0.5] * 7], [[2 ** 40] * 7]]}, "input 1: expected 5x7xi32, got a value outside "
                                                 r"i32's range \[-2147483648, 2147483647\]"),
    ({"inputs": [[[0.5] * 7], [[2 ** 70] * 7]]}, "input 1: expected 5x7xi32, got a value outside "),
    ({"inputs": [[[0.5] * 7, [1.0]], [[1] * 7]]},
     "input 0: expected 5x7xf32, got a list that is not a rectangular nested list"),
    ({"inputs": [[["a"] * 7], [[1] * 7]]}, "input 0: expected 5x7xf32, got a list holding str"),
    ({"inputs": [[[0.5] * 7] * 2, [[1] * 7] * 3]}, r"different row counts \(2, 3\)"),
    ({"inputs": [encode(np.zeros((1, 7)), "base64"), [[1] * 7]]},
     """input 0: a base64 input needs "dtype" 'float32', .* got 'float64'"""),
    ({"inputs": [{"dtype": "float32", "shape": [1, 7], "data": "AAAA"}, [[1] * 7]]},
     r"input 0: 3 bytes of data for shape \[1, 7\] of float32, which needs 28"),
    # malformed bodies: never a server error
    (b"[" * 100_000 + b"]" * 100_000, "nests JSON arrays or objects too deeply"),
    ({"inputs": {"x": 1}}, 'must be a JSON object with an "inputs" list'),
    ([1, 2], 'must be a JSON object with an "inputs" list'),
    ({"inputs": [{"dtype": "O", "shape": [1], "data": "AAAAAAAAAAA="}, [[1] * 7]]},
     """input 0: a base64 input needs "dtype" 'float32', .* got 'O'"""),
    ({"inputs": [{"dtype": ["float32"], "shape": [1, 7], "data": ""}, [[1] * 7]]},
     """needs "dtype" 'float32', .* got \\['float32'\\]"""),
    ({"inputs": [{"dtype": "float32", "shape": [2 ** 62, 2 ** 62, 16], "data": ""}, [[1] * 7]]},
     r"input 0: 0 bytes of data for shape \[4611686018427387904, 4611686018427387904, 16\]"),
    ({"inputs": [{"dtype": "float32", "shape": [1.5, 7], "data": ""}, [[1] * 7]]},
     r'input 0: a base64 input needs "shape", a list of sizes; got \[1.5, 7\]'),
    ({"inputs": [{"dtype": "float32", "shape": [1, 7]}, [[1] * 7]]},
     'input 0: a base64 input needs "data", base64'),
    ({"inputs": [{"dtype": "float32", "shape": [1, 7], "data": 5}, [[1] * 7]]},
     'input 0: a base64 input needs "data", base64'),
    ({"inputs": [None, [[1] * 7]]}, "input 0: expected 5x7xf32, got a NoneType holding object"),
    ({"inputs": [[[0.5] * 7], [[1] * 7]], "output_encoding": "npy"}, '"output_encoding" must be one of'),
])
def test_bad_requests_are_400_with_the_reason(served, body, message):
    port, _, _ = served
    status, _, reply = request(port, "/rows", body)
    assert status == 400
    assert set(reply) == {"error"} and "\n" not in reply["error"]
    assert re.search(message, reply["error"]), reply["error"]


@pytest.mark.timeout(TEST_LIMIT_S)
def test_only_post_runs_the_function(served):
    port, _, _ = served
    status, _, body = request(port, "/rows", None, method="PUT")
    assert status == 405 and body["error"].startswith("use POST to run the function")


@pytest.mark.timeout(TEST_LIMIT_S)
def test_a_function_that_mixes_rows_answers_each_client_exactly(served):
    """Served as by default, center's batches of concurrent requests are calls of their own:
    each client's answer is its own x minus its own column means."""
    port = served[0]
    rng = np.random.default_rng(4)

    def one(x):
        status, headers, body = request(port, "/center", {"inputs": [x.tolist()]})
        assert status == 200, body
        expected = x - x.astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(np.array(body["outputs"][0], np.float32), expected,
                                   rtol=1e-5, atol=1e-6)
        return int(headers["x-pyree-batch-size"])

    sizes = []
    with ThreadPoolExecutor(12) as pool:
        for _ in range(ROUNDS):
            sizes += pool.map(one, [rng.standard_normal((4, 3)).astype(np.float32) * 10.0 ** k
                                    for k in rng.integers(-3, 4, 12)])
            if max(sizes) > 1:
                break
    assert max(sizes) > 1, f"no batch held more than one request: {sizes}"
    status, _, body = request(port, "/center", {"inputs": [[[1.0, 2.0, 3.0]] * 2]})
    assert status == 400 and body["error"] == ("function 'center' argument 0: expected 4x3xf32, "
                                               "got 2x3xf32")


@pytest.mark.timeout(TEST_LIMIT_S)
def test_a_replica_that_cannot_start_says_why(served, module):
    """Only a replica can find its node's driver missing; pyree.serve.run raises its error."""
    import pyree.serve
    from ray import serve

    app = pyree.serve.deployment(module, "scale", device="nosuchdevice",
                                 ray_actor_options={"num_cpus": 0.25})
    try:
        with pytest.raises(pyree.serve.ReplicaError) as err:
            pyree.serve.run(app, name="broken", route_prefix="/broken")
    finally:
        serve.delete("broken")
    message = str(err.value)
    assert "Failed to update the deployments ['PyreeDeployment']" in message
    assert re.search(r"The replicas could not start: function 'scale' of the module's bytes on "
                     r"device 'nosuchdevice': no HAL driver named 'nosuchdevice' is installed; "
                     r"installed drivers: [\w, -]*local-task[\w, -]*$", message), message
    assert "\n" not in message and "Traceback" not in message


def test_deployment_checks_the_module_and_the_function_first(module, tmp_path):
    """A wrong path, a file that is no module or a wrong function name raises pyree's error from
    deployment() itself, before Ray is asked for anything."""
    require_module("ray.serve")
    import pyree.runtime as rt
    import pyree.serve

    missing, garbage = tmp_path / "none.vmfb", tmp_path / "garbage.vmfb"
    garbage.write_bytes(b"not a module" * 100)
    with pytest.raises(rt.ModuleError, match=f"cannot read module file '{missing}': No such file"):
        pyree.serve.deployment(missing, "scale")
    for source in (garbage, garbage.read_bytes()):
        with pytest.raises(rt.ModuleError, match="no pyree trailer .* not a pyree module"):
            pyree.serve.deployment(source, "scale")
    for source in (module, _saved(module, tmp_path)):
        with pytest.raises(rt.InvocationError, match=r"has no function 'sclae'; it exports: rows, "
                                                     r"scale, guarded, center$"):
            pyree.serve.deployment(source, "sclae")
        assert pyree.serve.deployment(source, "scale") is not None
    # only the cluster's nodes can read the path: checked by the replicas alone
    assert pyree.serve.deployment(missing, "scale", check_module=False) is not None


def _saved(module: bytes, folder) -> str:
    path = folder / "m.vmfb"
    path.write_bytes(module)
    return str(path)


def test_stacking_a_function_that_mixes_rows_mixes_clients(module):
    """Why stacking is opt-in: two requests of 2 rows stacked into one call of center's 4 get
    answers computed with each other's rows."""
    require_module("ray.serve")
    import pyree.runtime as rt
    from pyree.serve import BatchPlan

    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    (got_a,), (got_b,) = BatchPlan.of(rt.load_module(module)["center"], stack_rows=True) \
        .run([[a], [b]])
    both = np.concatenate([a, b]).astype(np.float64)
    np.testing.assert_allclose(got_a, a - both.mean(axis=0), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got_a, a - a.astype(np.float64).mean(axis=0), rtol=1e-3)


def test_stacking_is_asked_for_and_needs_a_batch_dimension(module):
    require_module("ray.serve")
    import pyree.runtime as rt
    from pyree.serve import BatchPlan, CallRows

    loaded = rt.load_module(module)
    assert BatchPlan.of(loaded["rows"]).rows is None
    assert BatchPlan.of(loaded["center"]).rows is None
    assert BatchPlan.of(loaded["rows"], stack_rows=True).rows == CallRows(5, 5)
    with pytest.raises(ValueError, match=r"function 'scale' \(3x4xf32, f32\) -> \(3x4xf32\) cannot "
                                         r"be served with stack_rows=True: stacking needs every "
                                         r"argument and result to have the same leading \(batch\) "
                                         r"dimension"):
        BatchPlan.of(loaded["scale"], stack_rows=True)


@pytest.mark.parametrize("stack_rows", [True, False])
def test_a_request_that_fails_a_check_fails_alone(module, stack_rows):
    """Rows 0-1 | 2-3 (one negative) | 4-6 share calls of 3 when stacked; only the middle request
    may fail, in both plans."""
    require_module("ray.serve")
    import pyree.runtime as rt
    from pyree.serve import BatchPlan

    plan = BatchPlan.of(rt.load_module(module)["guarded"], stack_rows)
    rng = np.random.default_rng(3)
    sizes = (2, 2, 3) if stack_rows else (3, 3, 3)
    requests = [[rng.uniform(0, 4, (k, 2)).astype(np.float32)] for k in sizes]
    requests[1][0][-1, 0] = -1.0
    good, bad, also_good = plan.run(requests)
    assert isinstance(bad, rt.CheckError) and "Expected all elements to be nonzero" in str(bad)
    for (x,), (result,) in ((requests[0], good), (requests[2], also_good)):
        np.testing.assert_allclose(result, np.sqrt(x), rtol=1e-6)


def test_the_runtime_does_not_import_ray():
    code = "import sys, pyree.runtime; assert 'ray' not in sys.modules, 'pyree.runtime imported ray'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
