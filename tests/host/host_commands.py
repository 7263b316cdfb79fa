"""The host program's commands of one MLIR function, as the compiler writes them (flow, then
linearize, plan and emit), for tests that count what a planning rule saves."""

from __future__ import annotations

from pyree.compiler._fb.CommandKind import CommandKind
from pyree.compiler.flow.passes import flow_passes, run_flow
from pyree.compiler.host.linearize import linearize
from pyree.compiler.host.planning import plan_function
from pyree.compiler.host.program import emit_function
from pyree.compiler.input import parse_mlir
from pyree.compiler.input.lowering import lower_to_tensor_program


def host_function(text: str, **lowering):
    """The module's Function table of the one function of ``text`` (CPU flow)."""
    program = lower_to_tensor_program(parse_mlir(text, "program.mlir"), **lowering)
    function = run_flow(program, flow_passes(gpu=False, implicit_gemm=False)).functions[0]
    steps = linearize(function)
    ordinals = {step: 0 for step in steps if hasattr(step, "outputs")}
    return emit_function(function, steps, plan_function(function, steps, {}), ordinals)


def copies(text: str, **lowering) -> int:
    """How many copy commands the one function of ``text`` runs (CPU flow)."""
    return sum(c.kind == CommandKind.copy for c in host_function(text, **lowering).commands)
