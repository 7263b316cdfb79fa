"""The HTTP interface's JSON: arrays in and out as nested lists or as base64 bytes (no Ray here).

A request body is ``{"inputs": [a0, a1, ...], "output_encoding": "list" | "base64"}``, one entry per
function argument, each either

* a nested list (or a number, for a rank-0 argument), converted to the argument's element type
  when numpy's ``same_kind`` casting allows it (ints to floats, not floats to ints) and, for
  integers, when every value is in range (pyree.runtime.vm.conversion, as for a Python value
  passed to a function); non-finite floats are the JSON extensions ``NaN``, ``Infinity`` and
  ``-Infinity`` that Python's json module reads and writes;
* or ``{"dtype": "float32", "shape": [2, 3], "data": "<base64>"}``: the array's bytes, C order,
  little-endian, with the numpy dtype name of the argument's element type (bit-exact, and plain
  JSON for clients whose parser refuses NaN).

Whatever a body holds, a malformed one is a RequestError (HTTP 400), never a server error.

The response is ``{"outputs": [...]}`` in the encoding asked for (``list`` by default).
"""

from __future__ import annotations

import base64
import binascii
import json
import math

import numpy as np
from pyree.runtime import TensorType
from pyree.runtime.vm.conversion import convert

ENCODINGS = ("list", "base64")


class RequestError(ValueError):
    """A request body that cannot be read as the function's arguments (an HTTP 400)."""


def decode_request(body: bytes, argument_types: list[TensorType]) -> tuple[list, str]:
    """The request's arrays (list inputs already in their argument's element type; None for an
    input past the function's arguments, whose count the batch plan refuses with the types it
    expects) and the encoding its outputs are wanted in."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"the request body is not JSON ({e}); send "
                           f'{{"inputs": [...]}} with one entry per function argument') from None
    except RecursionError:
        raise RequestError("the request body nests JSON arrays or objects too deeply to be "
                           "read") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise RequestError('the request body must be a JSON object with an "inputs" list, one '
                           "entry per function argument (a nested list, or an object with "
                           '"dtype", "shape" and base64 "data")')
    encoding = request.get("output_encoding", "list")
    if encoding not in ENCODINGS:
        raise RequestError(f'"output_encoding" must be one of {", ".join(ENCODINGS)}, '
                           f"got {encoding!r}")
    inputs = request["inputs"]
    types = argument_types + [None] * (len(inputs) - len(argument_types))
    return [decode_array(value, t, index) for index, (value, t) in enumerate(zip(inputs, types))], \
        encoding


def decode_array(value, t: TensorType | None, index: int) -> np.ndarray | None:
    """One input: base64 bytes as sent, or a nested list converted to ``t``'s element type
    (pyree.runtime's rule for Python values: no value may change). None past the arguments."""
    if t is None:
        return None
    if isinstance(value, dict):
        return _from_base64(value, t, index)
    try:
        return convert(value, t)
    except ValueError as e:
        raise RequestError(f"input {index}: {e}") from None


def _from_base64(value: dict, t: TensorType, index: int) -> np.ndarray:
    dtype, shape, data = value.get("dtype"), value.get("shape"), value.get("data")
    # By name, never through np.dtype(): a client's string must not pick what numpy builds
    # (dtype "O" would make an array of object pointers out of its bytes).
    if dtype != t.dtype.name:
        raise RequestError(f'input {index}: a base64 input needs "dtype" {t.dtype.name!r}, the '
                           f"element type of the argument's {t}; got {dtype!r}")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise RequestError(f'input {index}: a base64 input needs "shape", a list of sizes; got '
                           f"{shape!r}")
    try:
        data = base64.b64decode(data, validate=True)
    except (TypeError, ValueError, binascii.Error) as e:
        raise RequestError(f'input {index}: a base64 input needs "data", base64 of the C-order '
                           f"little-endian bytes: {type(e).__name__}: {e}") from None
    expected = math.prod(shape) * t.dtype.itemsize  # Python ints: no overflow
    if len(data) != expected:
        raise RequestError(f"input {index}: {len(data)} bytes of data for shape {shape} of "
                           f"{dtype}, which needs {expected}")
    return np.frombuffer(data, t.dtype.newbyteorder("<")).astype(t.dtype).reshape(shape)


def encode_array(array: np.ndarray, encoding: str):
    if encoding == "list":
        return array.tolist()
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return {"dtype": array.dtype.name, "shape": list(array.shape),
            "data": base64.b64encode(np.ascontiguousarray(little).tobytes()).decode("ascii")}


def encode_response(arrays: list[np.ndarray], encoding: str) -> dict:
    return {"outputs": [encode_array(a, encoding) for a in arrays]}
