"""Shardy (``sdy``), as far as JAX's single-device programs use it: JAX 0.7 and later put
``#sdy.op_sharding_rule<...>`` on the custom calls of its linear algebra and ``#sdy.sharding``
on sharded arguments. They say how to split work across devices, which one device never
does, so each is kept as its text (``HloAttr``) and never read; xDSL does not know the
dialect, and without this the program failed to parse ("'sdy.op_sharding_rule' is not
registered") before pyree could name the op it cannot compile."""

from __future__ import annotations

from pyree.compiler.input.dialects.stablehlo import text_attr
from xdsl.ir import Dialect

Shardy = Dialect("sdy", [], [text_attr(f"sdy.{kind}") for kind in (
    "op_sharding_rule", "sharding", "sharding_per_value", "tensor_sharding", "mesh",
    "manual_axes", "dim_sharding", "axis_ref", "sub_axis_info", "sharding_rule")])
