"""Triton Inference Server Python-backend model: one function of a pyree module (.vmfb).

Model repository layout (docs/SERVING.md walks through it):

    models/pyree_mlp/config.pbtxt      inputs/outputs in the function's order; parameters
    models/pyree_mlp/1/model.py        this file
    models/pyree_mlp/1/mlp.vmfb        the module (parameter "module"), compiled for the device

Each model instance loads the module once, on the instance's device: ``cuda://<id>`` for a
KIND_GPU instance (Triton's device id is a CUDA ordinal, as pyree's), ``local-task`` for KIND_CPU,
or the config's "device" parameter when set. Tensors cross in both directions through DLPack:
an input ``pb_utils.Tensor`` is passed to the function as it is (it implements ``__dlpack__``),
so a GPU input on the instance's GPU is read in place and a CPU one is copied up; each result
goes back with ``pb_utils.Tensor.from_dlpack``, handed over in place where the driver can share
its buffer. pyree functions have static shapes, so the config's dims are the function's whole
shapes (max_batch_size 0): a batch is part of the shape, filled by the client.
"""

import json
import os

import pyree.runtime as rt
import triton_python_backend_utils as pb_utils

# Triton's data types in pyree's (IREE's) element type spelling.
ELEMENT_TYPES = {
    "TYPE_BOOL": "i1", "TYPE_INT8": "i8", "TYPE_INT16": "i16", "TYPE_INT32": "i32",
    "TYPE_INT64": "i64", "TYPE_UINT8": "ui8", "TYPE_UINT16": "ui16", "TYPE_UINT32": "ui32",
    "TYPE_UINT64": "ui64", "TYPE_FP16": "f16", "TYPE_BF16": "bf16", "TYPE_FP32": "f32",
    "TYPE_FP64": "f64",
}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        default = f"cuda://{args['model_instance_device_id']}" \
            if args["model_instance_kind"] == "GPU" else "local-task"
        path = os.path.join(args["model_repository"], args["model_version"], parameters["module"])
        self.function = rt.load_module(path, parameters.get("device", default))[parameters["function"]]
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [o["name"] for o in config["output"]]
        _check_config(config, self.function)

    def execute(self, requests):
        # Every request's call is submitted before any result is handed over, so the device
        # works on one while the host prepares the next.
        calls = []
        for request in requests:
            try:
                results = self.function(*(pb_utils.get_input_tensor_by_name(request, name)
                                          for name in self.inputs))
                calls.append(results if isinstance(results, tuple) else (results,))
            except rt.PyreeError as e:
                calls.append(e)
        return [self._response(call) for call in calls]

    def _response(self, call):
        try:
            if isinstance(call, rt.PyreeError):
                raise call
            tensors = [pb_utils.Tensor.from_dlpack(name, result)
                       for name, result in zip(self.outputs, call)]
        except rt.PyreeError as e:  # a bad input, or a failure while the device computed it
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
        return pb_utils.InferenceResponse(output_tensors=tensors)


def _check_config(config: dict, function) -> None:
    """Refuses, at load time, a config whose tensors are not the function's."""
    problems = []
    if config.get("max_batch_size", 0):
        problems.append(f"max_batch_size is {config['max_batch_size']}, but pyree functions have "
                        f"static shapes: set it to 0 and give the whole shape in dims")
    for kind, entries, types in (("input", config["input"], function.argument_types),
                                 ("output", config["output"], function.result_types)):
        if len(entries) != len(types):
            problems.append(f"{len(entries)} {kind}s, but the function has {len(types)}")
        for entry, t in zip(entries, types):
            spelled = "x".join([*(str(d) for d in entry["dims"]),
                                ELEMENT_TYPES.get(entry["data_type"], entry["data_type"])])
            if spelled != str(t):
                problems.append(f"{kind} '{entry['name']}' is {spelled}, but the function's is {t}")
    if problems:
        signature = f"{', '.join(map(str, function.argument_types))} -> " \
                    f"{', '.join(map(str, function.result_types))}"
        raise ValueError(f"config.pbtxt does not match pyree function '{function.name}' "
                         f"({signature}): {'; '.join(problems)}")
