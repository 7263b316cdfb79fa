"""Parameters: constants kept outside the module file (IREE's parameter archives, safetensors),
read at load time from the files given with ``--parameters=[scope=]file`` (or
``load_module(..., parameters=[...])``) and mapped, so a CPU device uses them in place.

    pm = ParameterIndex(["model=weights.irpa"])
"""

from pyree.runtime.parameters.entry import Entry, ParameterError
from pyree.runtime.parameters.index import ParameterIndex, parse_spec

__all__ = ["Entry", "ParameterError", "ParameterIndex", "parse_spec"]
