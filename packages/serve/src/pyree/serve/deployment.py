"""PyreeDeployment: one function of a pyree module served by Ray Serve replicas.

Each replica loads the module once, in ``__init__``, on its device (``deployment`` has already
checked the module and the function's name, so what can fail there is the node's driver or
device, which ``run`` reports), and every request then goes
through one ``@serve.batch`` queue: the batch runs as BatchPlan says (batching.py) on a worker
thread, so the replica's event loop keeps taking requests into the next batch meanwhile. Two
front doors share that queue: HTTP (``__call__``, JSON as wire.py describes) and the Python
``DeploymentHandle`` (``infer``, numpy in and out). Placement and scaling are Ray's: replicas go
wherever the cluster has the resources their ``ray_actor_options`` ask for.
"""

from __future__ import annotations

import asyncio
import json
import os
import re

import numpy as np
import pyree.runtime as rt
from pyree.serve.batching import BatchPlan
from pyree.serve.wire import RequestError, decode_array, decode_request, encode_response
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

# Response headers that say which replica served a request and how many requests its batch had.
REPLICA_HEADER = "x-pyree-replica"
BATCH_HEADER = "x-pyree-batch-size"


class ReplicaError(RuntimeError):
    """A replica could not load its function (a driver or device missing on its node, a CPU
    feature the node lacks); ``run`` raises it in the caller with the replica's message."""


@serve.deployment
class PyreeDeployment:
    def __init__(self, module: str | os.PathLike | bytes, function: str, device: str = "local-task",
                 stack_rows: bool = False, max_batch_size: int = 8,
                 batch_wait_timeout_s: float = 0.01):
        try:
            self.plan = BatchPlan.of(rt.load_module(module, device)[function], stack_rows)
        except (rt.PyreeError, ValueError) as e:  # one line: run() finds it in Ray's report
            what = "the module's bytes" if isinstance(module, bytes) else module
            raise ReplicaError(f"function '{function}' of {what} on device '{device}': "
                               f"{' '.join(str(e).split())}") from None
        self.replica = serve.get_replica_context().replica_id.unique_id
        self._batch.set_max_batch_size(max_batch_size)
        self._batch.set_batch_wait_timeout_s(batch_wait_timeout_s)

    async def __call__(self, request: Request) -> Response:
        """POST: run the function on the body's inputs. GET: the function's signature and plan."""
        if request.method == "GET":
            return _json(200, self.plan.describe())
        if request.method != "POST":
            return _json(405, {"error": f"use POST to run the function (GET describes it), not "
                                        f"{request.method}"})
        try:
            arrays, encoding = decode_request(await request.body(), self.plan.function.argument_types)
            results, size = await self._submit(arrays)
        except (RequestError, rt.InvocationError) as e:
            return _json(400, {"error": str(e)})
        except rt.CheckError as e:  # the values broke one of the module's own check ops
            return _json(422, {"error": str(e)})
        except rt.PyreeError as e:
            return _json(500, {"error": str(e)})
        return _json(200, encode_response(results, encoding),
                     {REPLICA_HEADER: self.replica, BATCH_HEADER: str(size)})

    async def infer(self, *arrays) -> np.ndarray | tuple[np.ndarray, ...] | None:
        """The handle interface: ``handle.infer.remote(x, y).result()`` is what the function
        returns (one array, or a tuple of them) for numpy arguments, as a direct call would; a
        bad argument raises pyree's InvocationError in the caller."""
        f = self.plan.function
        types = f.argument_types + [None] * len(arrays)
        try:
            inputs = [a if isinstance(a, np.ndarray) else decode_array(a, t, i)
                      for i, (a, t) in enumerate(zip(arrays, types))]
        except RequestError as e:
            raise rt.InvocationError(f"function '{f.name}': {e}") from None
        results, _ = await self._submit(inputs)
        return None if not results else results[0] if len(results) == 1 else tuple(results)

    async def _submit(self, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], int]:
        """The request's results and the size of the batch it ran in. A request is checked before
        it joins a batch, so a bad one fails alone."""
        self.plan.check(arrays)
        outcome, size = await self._batch(arrays)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome, size

    @serve.batch
    async def _batch(self, requests: list[list[np.ndarray]]) -> list[tuple[list | Exception, int]]:
        outcomes = await asyncio.to_thread(self.plan.run, requests)
        return [(outcome, len(requests)) for outcome in outcomes]


def _json(status: int, payload: dict, headers: dict | None = None) -> Response:
    """A JSON response; NaN and infinities as Python's json writes them (see wire.py)."""
    return Response(json.dumps(payload), status_code=status, media_type="application/json",
                    headers=headers)


def deployment(module: str | os.PathLike | bytes, function: str, device: str = "local-task", *,
               stack_rows: bool = False, max_batch_size: int = 8,
               batch_wait_timeout_s: float = 0.01, check_module: bool = True,
               **options) -> serve.Application:
    """An application to ``serve.run``: ``function`` of ``module`` (a path every node can read, or
    the module's bytes, which travel with the deployment) on ``device`` in each replica.

    Each request is one call of the function, exactly as sent. ``stack_rows=True`` stacks the
    rows of a batch's requests into shared calls instead (batching.py): faster, and right only
    for a function whose every result row depends on the same argument rows alone.

    The module is read and verified here, and the function looked up, so that a wrong path or
    name raises pyree's ModuleError or InvocationError now, not Ray's "Failed to update the
    deployments" later; ``check_module=False`` skips that where only the cluster's nodes can
    read the path (a Ray client). What only a replica can find out (its node's driver and
    device) fails its start: ``run`` then raises the replica's error.

    ``options`` are Ray Serve's deployment options (``num_replicas``, ``autoscaling_config``,
    ``ray_actor_options``, ``max_ongoing_requests``, ``name``, ...). ``max_ongoing_requests``
    defaults to two batches, so that one can fill while the other runs."""
    options.setdefault("max_ongoing_requests", 2 * max_batch_size)
    # A relative path would be read from each replica's own working directory.
    module = bytes(module) if isinstance(module, (bytes, bytearray, memoryview)) \
        else os.path.abspath(module)
    if check_module:
        _check(module, function)
    return PyreeDeployment.options(**options).bind(module, function, device, stack_rows,
                                                   max_batch_size, batch_wait_timeout_s)


def _check(module: str | bytes, function: str) -> None:
    """What a replica's start would find wrong with the module or the function name, on any node."""
    if isinstance(module, str):
        try:
            with open(module, "rb") as f:
                data = f.read()
        except OSError as e:
            raise rt.ModuleError(f"cannot read module file '{module}': {e.strerror or e}") from None
    else:
        data = module
    tree = rt.read_module(data).tree
    names = [f.name for f in tree.functions]
    if function not in names:
        raise rt.InvocationError(f"module '{tree.name}' has no function '{function}'; it exports: "
                                 f"{', '.join(names) or 'nothing'}")


# serve.run's application name when it is given none
_DEFAULT_APP = "default"
# The replica's error, the last line of the traceback Ray keeps as the deployment's message.
_REPLICA_ERROR = re.compile(rf"{ReplicaError.__name__}: (.*)$")


def run(app: serve.Application, **options):
    """``serve.run(app, **options)``, except that a deployment whose replicas could not start
    raises ReplicaError with the replicas' own error (Ray's says only "Failed to update the
    deployments [...]"), chained to Ray's."""
    try:
        return serve.run(app, **options)
    except RuntimeError as e:
        status = serve.status().applications.get(options.get("name", _DEFAULT_APP))
        reasons = [match.group(1) for d in (status.deployments.values() if status else ())
                   if (match := _REPLICA_ERROR.search(d.message or ""))]
        if not reasons:
            raise
        raise ReplicaError(f"{e} The replicas could not start: {'; '.join(reasons)}") from e
