"""Weights that travel as a recipe: a model's exported safetensors file is summarised here
(key, dtype, shape and the values' mean, spread and range per tensor), and the GPU host writes a
file of the same layout from it with a seeded generator. The models' weights (tens of MB) then need
not be carried there, and the activations stay in the range the real weights give (a running
variance stays positive, a kernel keeps its scale)."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
           "I32": np.int32, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _header(data: bytes) -> dict:
    (length,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    return header


def describe(safetensors: Path) -> dict:
    """key -> [dtype, shape, mean, std, min, max] of every tensor in ``safetensors``."""
    data = safetensors.read_bytes()
    (length,) = struct.unpack_from("<Q", data)
    recipe = {}
    for key, info in _header(data).items():
        start, end = info["data_offsets"]
        values = np.frombuffer(data, _DTYPES[info["dtype"]], offset=8 + length + start,
                               count=int(np.prod(info["shape"], dtype=np.int64)))
        v = values.astype(np.float64)
        recipe[key] = [info["dtype"], info["shape"], float(v.mean()), float(v.std()),
                       float(v.min()), float(v.max())] if v.size else [info["dtype"],
                                                                       info["shape"], 0, 0, 0, 0]
    return recipe


def regenerate(recipe: dict, out: Path, seed: int = 0) -> None:
    """A safetensors file with ``recipe``'s tensors, normally distributed as described."""
    rng = np.random.default_rng(seed)
    header, blobs, offset = {}, [], 0
    for key, (dtype, shape, mean, std, low, high) in recipe.items():
        values = np.clip(rng.normal(mean, std, shape), low, high).astype(_DTYPES[dtype])
        blob = values.tobytes()
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 64)
    out.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":  # python3 random_parameters.py RECIPE.json OUT.safetensors [SEED]
    regenerate(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]),
               int(sys.argv[3]) if len(sys.argv) > 3 else 0)
