"""The HTTP interface's JSON: arrays in and out as nested lists or as base64 bytes (no Ray here).

A request body is ``{"inputs": [a0, a1, ...], "output_encoding": "list" | "base64"}``, one entry per
function argument, each either

* a nested list (or a number, for a rank-0 argument), converted to the argument's element type
  when numpy's ``same_kind`` casting allows it (ints to floats, not floats to ints) and, for
  integers, when every value is in range; non-finite floats are the JSON extensions ``NaN``,
  ``Infinity`` and ``-Infinity`` that Python's json module reads and writes;
* or ``{"dtype": "float32", "shape": [2, 3], "data": "<base64>"}``: the array's bytes, C order,
  little-endian, with a numpy dtype name that must equal the argument's (bit-exact, and plain
  JSON for clients whose parser refuses NaN).

The response is ``{"outputs": [...]}`` in the encoding asked for (``list`` by default).
"""

from __future__ import annotations

import base64
import binascii
import json

import numpy as np
from pyree.runtime import TensorType

ENCODINGS = ("list", "base64")


class RequestError(ValueError):
    """A request body that cannot be read as the function's arguments (an HTTP 400)."""


def decode_request(body: bytes, argument_types: list[TensorType]) -> tuple[list[np.ndarray], str]:
    """The request's arrays (list inputs already in their argument's element type) and the
    encoding its outputs are wanted in."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RequestError(f"the request body is not JSON ({e}); send "
                           f'{{"inputs": [...]}} with one entry per function argument') from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise RequestError('the request body must be a JSON object with an "inputs" list, one '
                           "entry per function argument (a nested list, or an object with "
                           '"dtype", "shape" and base64 "data")')
    encoding = request.get("output_encoding", "list")
    if encoding not in ENCODINGS:
        raise RequestError(f'"output_encoding" must be one of {", ".join(ENCODINGS)}, '
                           f"got {encoding!r}")
    inputs = request["inputs"]
    # An argument count mismatch is left to the batch plan, which names the expected types.
    types = argument_types + [None] * (len(inputs) - len(argument_types))
    return [decode_array(value, t, index) for index, (value, t) in enumerate(zip(inputs, types))], \
        encoding


def decode_array(value, t: TensorType | None, index: int) -> np.ndarray:
    """One input: base64 bytes as sent, or a nested list converted to ``t``'s element type."""
    if isinstance(value, dict):
        return _from_base64(value, t, index)
    try:
        array = np.asarray(value)
    except ValueError as e:  # ragged lists
        raise RequestError(f"input {index} is not a rectangular nested list: {e}") from None
    if array.dtype.kind not in "biuf":
        raise RequestError(f"input {index} must hold numbers or booleans, got "
                           f"{type(value).__name__} with {array.dtype.name} values")
    if t is None or array.dtype == t.dtype:
        return array
    target = t.dtype
    # An empty list reads as float64; it has no values to convert.
    if array.size and not np.can_cast(array.dtype, target, "same_kind"):
        wanted = {"i": "integers", "u": "integers", "b": "booleans"}.get(target.kind, "numbers")
        raise RequestError(f"input {index}: {array.dtype.name} values cannot be converted to the "
                           f"argument's element type {t.element_name} (send {wanted})")
    converted = array.astype(target)
    if target.kind in "iu" and not np.array_equal(converted, array):
        raise RequestError(f"input {index}: a value is out of the range of the argument's element "
                           f"type {t.element_name}")
    return converted


def _from_base64(value: dict, t: TensorType | None, index: int) -> np.ndarray:
    try:
        # The argument's own dtype by name: bfloat16 is no numpy name until ml_dtypes registers it.
        dtype = t.dtype if t is not None and value["dtype"] == t.dtype.name else np.dtype(value["dtype"])
        shape = tuple(int(d) for d in value["shape"])
        data = base64.b64decode(value["data"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        raise RequestError(f'input {index}: a base64 input needs "dtype" (a numpy dtype name), '
                           f'"shape" (a list of ints) and "data" (base64 of the C-order '
                           f"little-endian bytes): {type(e).__name__}: {e}") from None
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected or any(d < 0 for d in shape):
        raise RequestError(f"input {index}: {len(data)} bytes of data for shape {list(shape)} of "
                           f"{dtype.name}, which needs {expected}")
    return np.frombuffer(data, dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def encode_array(array: np.ndarray, encoding: str):
    if encoding == "list":
        return array.tolist()
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return {"dtype": array.dtype.name, "shape": list(array.shape),
            "data": base64.b64encode(np.ascontiguousarray(little).tobytes()).decode("ascii")}


def encode_response(arrays: list[np.ndarray], encoding: str) -> dict:
    return {"outputs": [encode_array(a, encoding) for a in arrays]}
