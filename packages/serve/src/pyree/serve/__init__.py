"""pyree.serve: a function of a pyree module (.vmfb) behind Ray Serve, one loaded module per replica.

    from ray import serve
    import pyree.serve
    serve.run(pyree.serve.deployment("mlp.vmfb", "mlp", num_replicas=2), route_prefix="/mlp")

docs/SERVING.md is the guide (HTTP and handle interfaces, batching, GPUs, clusters, Triton).
"""

__version__ = "0.1.0"

from pyree.serve.batching import BatchPlan, batch_rows
from pyree.serve.deployment import BATCH_HEADER, REPLICA_HEADER, PyreeDeployment, deployment
from pyree.serve.wire import RequestError

__all__ = ["BATCH_HEADER", "REPLICA_HEADER", "BatchPlan", "PyreeDeployment", "RequestError",
           "batch_rows", "deployment"]
