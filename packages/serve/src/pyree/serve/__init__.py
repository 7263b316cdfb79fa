"""pyree.serve: a function of a pyree module (.vmfb) behind Ray Serve, one loaded module per replica.

    import pyree.serve
    pyree.serve.run(pyree.serve.deployment("mlp.vmfb", "mlp", num_replicas=2), route_prefix="/mlp")

(``pyree.serve.run`` is Ray's ``serve.run``, raising the replicas' own error when they cannot
start.)

docs/SERVING.md is the guide (HTTP and handle interfaces, batching, GPUs, clusters, Triton).
"""

__version__ = "0.1.0"

from pyree.serve.batching import BatchPlan, CallRows, call_rows
from pyree.serve.deployment import (
    BATCH_HEADER,
    REPLICA_HEADER,
    PyreeDeployment,
    ReplicaError,
    deployment,
    run,
)
from pyree.serve.generation import GenerationDeployment, generation
from pyree.serve.wire import RequestError

__all__ = ["BATCH_HEADER", "REPLICA_HEADER", "BatchPlan", "CallRows", "GenerationDeployment",
           "PyreeDeployment", "ReplicaError", "RequestError", "call_rows", "deployment",
           "generation", "run"]
