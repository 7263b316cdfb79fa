"""StableHLO and CHLO -> tensor program: the per-op rules, merged into ``lowering._RULES``.

stablehlo.while/if/case are lowered with scf's control flow (``input/control_flow.py``). Ops
that are declared but have no rule, and ops not declared at all, are refused by name.
"""

from pyree.compiler.errors import CompileError
from pyree.compiler.input.dialects.stablehlo import CHLO_BROADCAST, CHLO_ELEMENTWISE, ELEMENTWISE
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo import (
    batch_norm,
    cholesky,
    collectives,
    complex,
    composite,
    contraction,
    dynamic,
    einsum,
    gather_scatter,
    lapack,
    reduce,
    rng,
    rng_uniform,
    select_and_scatter,
    shape_ops,
    sort,
    tokens,
    tuples,
)
from pyree.compiler.input.stablehlo.elementwise import (
    lower_batch_norm_inference,
    lower_bitcast_convert,
    lower_constant,
    lower_elementwise,
    lower_map,
)

STABLEHLO_RULES = {
    "stablehlo.constant": lower_constant,
    **{f"stablehlo.{name}": lower_elementwise for name in ELEMENTWISE},
    **{f"chlo.{name}": lower_elementwise for name in CHLO_ELEMENTWISE},
    **{f"chlo.broadcast_{name}": lower_elementwise for name in CHLO_BROADCAST},
    "stablehlo.bitcast_convert": lower_bitcast_convert,
    "stablehlo.broadcast_in_dim": shape_ops.lower_broadcast_in_dim,
    "stablehlo.broadcast": shape_ops.lower_broadcast,
    "stablehlo.torch_index_select": shape_ops.lower_torch_index_select,
    "stablehlo.reshape": shape_ops.lower_reshape,
    "stablehlo.transpose": shape_ops.lower_transpose,
    "stablehlo.slice": shape_ops.lower_slice,
    "stablehlo.concatenate": shape_ops.lower_concatenate,
    "stablehlo.pad": shape_ops.lower_pad,
    "stablehlo.iota": shape_ops.lower_iota,
    "stablehlo.reverse": shape_ops.lower_reverse,
    "stablehlo.dynamic_slice": shape_ops.lower_dynamic_slice,
    "stablehlo.dynamic_update_slice": shape_ops.lower_dynamic_update_slice,
    "stablehlo.optimization_barrier": shape_ops.lower_identity,
    "stablehlo.custom_call": shape_ops.lower_custom_call,
    "stablehlo.get_dimension_size": shape_ops.lower_get_dimension_size,
    "stablehlo.dot_general": contraction.lower_dot_general,
    "stablehlo.dot": contraction.lower_dot_general,
    "stablehlo.convolution": contraction.lower_convolution,
    "stablehlo.reduce": reduce.lower_reduce,
    "stablehlo.reduce_window": reduce.lower_reduce_window,
    "stablehlo.gather": gather_scatter.lower_gather,
    "stablehlo.dynamic_gather": gather_scatter.lower_dynamic_gather,
    "stablehlo.scatter": gather_scatter.lower_scatter,
    "stablehlo.sort": sort.lower_sort,
    "stablehlo.select_and_scatter": select_and_scatter.lower_select_and_scatter,
    "chlo.top_k": sort.lower_top_k,
    "stablehlo.map": lower_map,
    "stablehlo.batch_norm_inference": lower_batch_norm_inference,
    "stablehlo.rng_bit_generator": rng.lower_rng_bit_generator,
    "stablehlo.complex": complex.lower_complex,
    "stablehlo.real": complex.lower_part,
    "stablehlo.imag": complex.lower_part,
    "stablehlo.fft": complex.lower_fft,
    "stablehlo.rng": rng_uniform.lower_rng,
    "stablehlo.cholesky": cholesky.lower_cholesky,
    "stablehlo.triangular_solve": lapack.lower_triangular_solve,
    "stablehlo.composite": composite.lower_composite,
    "stablehlo.batch_norm_training": batch_norm.lower_batch_norm_training,
    "stablehlo.batch_norm_grad": batch_norm.lower_batch_norm_grad,
    "stablehlo.einsum": einsum.lower_einsum,
    "stablehlo.unary_einsum": einsum.lower_einsum,
    **collectives.RULES,
    "stablehlo.after_all": tokens.lower_after_all,
    "stablehlo.create_token": tokens.lower_after_all,
    "stablehlo.tuple": tuples.lower_tuple,
    "stablehlo.get_tuple_element": tuples.lower_get_tuple_element,
}
for _name in ("sine", "cosine", "exponential"):  # of a complex value: its own rule
    STABLEHLO_RULES[f"stablehlo.{_name}"] = complex.or_complex(STABLEHLO_RULES[f"stablehlo.{_name}"])
for _name in complex.PART_WISE:  # of complex values: the real rule on each part
    STABLEHLO_RULES[f"stablehlo.{_name}"] = complex.part_wise(STABLEHLO_RULES[f"stablehlo.{_name}"])
for _name in ("multiply", "divide", "abs"):
    STABLEHLO_RULES[f"stablehlo.{_name}"] = complex.lower_complex_binary(
        STABLEHLO_RULES[f"stablehlo.{_name}"])
STABLEHLO_RULES["stablehlo.convert"] = complex.lower_convert(STABLEHLO_RULES["stablehlo.convert"])
STABLEHLO_RULES["stablehlo.constant"] = complex.lower_constant(STABLEHLO_RULES["stablehlo.constant"])


STABLEHLO_RULES.update(dynamic.RULES)
# Ops that compute on run-time sizes when an operand is one (dynamic.py); else on tensors.
_TAKE_SIZES = {*dynamic.RULES, "stablehlo.custom_call",  # shape operands; shape assertions
               "stablehlo.composite", "stablehlo.tuple"}  # pass sizes on as a call does
_ON_SIZES = {*dynamic.SIZE_OPS, "stablehlo.compare", "stablehlo.and", "stablehlo.or",
             "stablehlo.reshape", "stablehlo.concatenate"}


def _naming_the_op(rule):
    """A StableHLO rule that meets a ``?`` dim it was not taught names the op (what a user of
    JAX's symbolic shapes needs to know), not only the type. An op on run-time sizes computes
    sizes (``dynamic.lower_size_op``)."""
    def lower(fn, op):
        if op.name in _ON_SIZES and dynamic.is_size_op(fn, op):
            return dynamic.lower_size_op(fn, op)
        if op.name not in _TAKE_SIZES and dynamic.is_size_op(fn, op):
            raise CompileError(f"'{op.name}' reads a run-time size as data (JAX does for a "
                               "mean over a symbolic dim, or a size compared or converted to "
                               "a float); pyree uses run-time sizes only as shapes so far",
                               location_of(op))
        try:
            return rule(fn, op)
        except CompileError as e:
            if not e.message.startswith("dynamic dimensions are not supported yet (in"):
                raise
            raise CompileError(f"'{op.name}' with dynamic dimensions is not supported yet "
                               f"{e.message.split('yet ', 1)[1]}; pyree lowers StableHLO with "
                               "static shapes only", e.location) from None
    return lower


STABLEHLO_RULES = {name: _naming_the_op(rule) for name, rule in STABLEHLO_RULES.items()}
