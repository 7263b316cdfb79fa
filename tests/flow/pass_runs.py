"""What a flow pass's test needs: the IR right after a named pass of the real pipeline list
(flow/passes.py), and the numbers of the whole compile on local-task."""

from __future__ import annotations

from compiled import compiled
from pyree.compiler import CompileOptions
from pyree.compiler.flow.passes import flow_passes, run_passes
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Function, Generic


def after_pass(mlir: str, name: str, *, gpu: bool = False, implicit_gemm: bool = False,
               run: int = 0, attention: bool = False, run_time_attention=None,
               small_sides: bool = False) -> Function:
    """The one function of ``mlir`` after the ``run``-th run of pass ``name`` (and every pass
    before it), as the pipeline runs them for these targets."""
    (function,) = import_mlir(mlir, "t.mlir").functions
    passes = flow_passes(gpu, implicit_gemm, attention=attention,
                         run_time_attention=run_time_attention, small_sides=small_sides)
    last = [k for k, p in enumerate(passes) if p.name == name][run]
    return run_passes(function, passes[:last + 1])


def before_pass(mlir: str, name: str, **kwargs) -> Function:
    """The function right before the first run of ``name``."""
    (function,) = import_mlir(mlir, "t.mlir").functions
    passes = flow_passes(kwargs.get("gpu", False), kwargs.get("implicit_gemm", False),
                         attention=kwargs.get("attention", False))
    return run_passes(function, passes[:[p.name for p in passes].index(name)])


def generics(function: Function) -> list[Generic]:
    return [op for op in function.ops if isinstance(op, Generic)]


def run_local_task(mlir: str, *args, function: str = "main"):
    """``mlir`` compiled for llvm-cpu and called on local-task: its one result on the host."""
    import pyree.runtime as rt

    module = rt.load_module(compiled(mlir, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    return module[function](*args).to_host()
