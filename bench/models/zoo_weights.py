"""The zoo's weights travel as a recipe, not as bytes: a module is compiled with its weights
exported to a parameter archive (``--iree-opt-export-parameters``), and the manifest records
which of the torch model's ``state_dict`` tensors each archive key holds. A GPU host that has
torch rebuilds the seeded model and writes the same archive again, so only the modules (a few
hundred KB each, against up to 50 MB of weights) cross the device tool's 64 MiB carry.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn


def _tensors(model: nn.Module) -> dict[str, bytes]:
    return {name: t.detach().contiguous().numpy().tobytes()
            for name, t in model.state_dict().items()}


def key_names(archive: Path, model: nn.Module) -> dict[str, str]:
    """archive key -> the ``state_dict`` name whose bytes it holds. A key that holds no tensor
    of the model (a constant torch-mlir computed) is an error: the recipe could not rebuild it."""
    from pyree.runtime.parameters.irpa import read_irpa
    by_bytes = {data: name for name, data in _tensors(model).items()}
    data = memoryview(archive.read_bytes())
    names = {}
    for key, entry in read_irpa(data, str(archive)).items():
        name = by_bytes.get(bytes(data[entry.offset:entry.offset + entry.length]))
        if name is None:
            raise ValueError(f"{archive}: parameter {key!r} ({entry.length} bytes) is none of "
                             f"the model's tensors")
        names[key] = name
    return names


def write_archive(path: Path, model: nn.Module, names: dict[str, str]) -> None:
    """Writes the archive ``key_names`` described, from ``model``'s own tensors."""
    from pyree.compiler.parameters import write_irpa
    tensors = _tensors(model)
    with open(path, "wb") as f:
        write_irpa(f, [(key, tensors[name]) for key, name in names.items()])
