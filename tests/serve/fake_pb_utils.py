"""A stand-in for Triton's ``triton_python_backend_utils``: the few names the recipe's model.py
uses, with the real ones' calling conventions, so that its logic runs without a Triton server.

Tensors cross only through DLPack, as the real ``pb_utils.Tensor`` allows: it has
``__dlpack__``/``__dlpack_device__`` and ``from_dlpack``, and nothing else that numpy or pyree
could read (no ``__array__``), so a model that worked here by another route would be caught.
"""

from __future__ import annotations

import numpy as np


class Tensor:
    def __init__(self, name: str, array: np.ndarray):
        self._name, self._array = name, array
        self.dlpack_exports = 0

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def to_dlpack(self):
        return self._array.__dlpack__()

    def __dlpack__(self, stream=None, **kwargs):
        self.dlpack_exports += 1
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    @staticmethod
    def from_dlpack(name: str, tensor) -> Tensor:
        """Like Triton's: an object with ``__dlpack__`` (or a capsule) becomes a Tensor."""
        if not hasattr(tensor, "__dlpack__"):
            raise TypeError(f"from_dlpack: {type(tensor).__name__} has no __dlpack__")
        return Tensor(name, np.from_dlpack(tensor))


class InferenceRequest:
    def __init__(self, inputs: list[Tensor]):
        self._inputs = inputs

    def inputs(self) -> list[Tensor]:
        return self._inputs


class TritonError:
    def __init__(self, message: str):
        self._message = message

    def message(self) -> str:
        return self._message


class InferenceResponse:
    def __init__(self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None):
        self._outputs, self._error = output_tensors or [], error

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    return next((t for t in response.output_tensors() if t.name() == name), None)
