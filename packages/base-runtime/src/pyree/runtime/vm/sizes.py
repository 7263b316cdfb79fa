"""A dynamic function's run-time sizes (schema 1.5): its symbols bound from a call's argument
shapes, checked, and every SizeExpr of the function evaluated.

Symbol k takes its value from the first argument dim whose expression is the bare ``1 k``
(arguments, then dims, in order). Before anything runs, each symbol is held to its bounds (min,
max, divisor) and every dim of every argument to its declared size (a static dim) or expression
(a dynamic one), so two arguments that share a symbol must agree. ``instance`` then evaluates
every SizeExpr into the static function of those sizes (module/instance.py), which the verifier
checks as it checks a static function at load. A size that has no exact value (negative, past
2^53, a division by zero; a push constant past 32 bits) is an InvocationError naming the
function, the sizes and the expression, never a wrong size.
"""

from __future__ import annotations

from pyree.runtime.element_types import spell
from pyree.runtime.errors import InvocationError
from pyree.runtime.module import size_exprs
from pyree.runtime.module.instance import instantiate


class Sizes:
    """One dynamic function's symbols and its arguments' declared dims, from its verified tree."""

    def __init__(self, tree):
        self.tree = tree
        self.name = tree.name
        self.symbols = tree.symbols
        self.names = [s.name for s in tree.symbols]
        # per argument, per dim: its static size, or its program (a list) where dynamic
        self.dims: list[list[int | list[int]]] = []
        # per symbol: the (argument, dim) it is bound from
        binders: dict[int, tuple[int, int]] = {}
        for a, t in enumerate(tree.arguments):
            programs = iter(t.dynamicDims or [])
            dims: list[int | list[int]] = []
            for d, n in enumerate(t.dims):
                if n != -1:
                    dims.append(n)
                    continue
                code = [int(v) for v in next(programs).code]
                dims.append(code)
                k = size_exprs.bare_symbol(code)
                if k is not None:
                    binders.setdefault(k, (a, d))
            self.dims.append(dims)
        self.binders = [binders[k] for k in range(len(self.symbols))]

    def declared(self, index: int) -> str:
        """Argument ``index``'s declared type, ``?`` for its dynamic dims: ``?x3xf32``."""
        t = self.tree.arguments[index]
        return spell(t.elementType, t.dims)

    def _symbol(self, k: int) -> str:
        a, d = self.binders[k]
        return f"argument {a} dim {d} (symbol `{self.names[k]}`)"

    def check(self, values: tuple, shapes: list) -> None:
        """Raises InvocationError unless ``values`` (bound from ``shapes``) are within every
        symbol's bounds and every argument dim is what its declaration says."""
        for k, (value, symbol) in enumerate(zip(values, self.symbols)):
            a, d = self.binders[k]
            where = f"function '{self.name}': `{symbol.name}` (argument {a} dim {d}) is {value}"
            if value < symbol.min:
                raise InvocationError(f"{where}, below its bound {symbol.min}")
            if symbol.max != -1 and value > symbol.max:
                raise InvocationError(f"{where}, past its bound {symbol.max}")
            if value % symbol.divisor:
                raise InvocationError(f"{where}, not a multiple of {symbol.divisor}")
        for a, shape in enumerate(shapes):
            self.explain(a, shape, values)

    def explain_shape(self, index: int, shape: tuple) -> None:
        """Raises InvocationError when argument ``index`` of ``shape`` has another rank or
        another static dim than it declares."""
        dims = self.dims[index]
        if len(shape) != len(dims) or any(not isinstance(n, list) and n != s
                                          for n, s in zip(dims, shape)):
            raise InvocationError(f"function '{self.name}' argument {index}: expected "
                                  f"{self.declared(index)}, got a shape of "
                                  f"{'x'.join(str(s) for s in shape) or 'rank 0'}")

    def explain(self, index: int, shape: tuple, values: tuple) -> None:
        """Raises InvocationError naming how argument ``index`` of ``shape`` differs from its
        declaration at ``values``; returns when it does not."""
        self.explain_shape(index, shape)
        for d, (code, actual) in enumerate(zip(self.dims[index], shape)):
            if not isinstance(code, list):
                continue
            want = self.evaluate(code, values, f"argument {index} dim {d}")
            if want == actual:
                continue
            k = size_exprs.bare_symbol(code)
            if k is not None:
                raise InvocationError(f"function '{self.name}': argument {index} dim {d} is "
                                      f"{actual} but {self._symbol(k)} is {want}")
            given = ", ".join(f"{self._symbol(j)} is {values[j]}"
                              for j in dict.fromkeys(size_exprs.symbols(code)))
            raise InvocationError(f"function '{self.name}': argument {index} dim {d} is "
                                  f"{actual} but must be `{size_exprs.spell(code, self.names)}` "
                                  f"= {want} ({given})")

    def at(self, values: tuple) -> str:
        return ", ".join(f"{name}={value}" for name, value in zip(self.names, values))

    def evaluate(self, code: list[int], values: tuple, label: str,
                 limit: int = size_exprs.LIMIT) -> int:
        try:
            value = size_exprs.evaluate(code, values)
        except size_exprs.SizeError as e:
            raise InvocationError(f"function '{self.name}' at {self.at(values)}: {label} "
                                  f"`{size_exprs.spell(code, self.names)}` is {e}") from None
        if value > limit:
            raise InvocationError(f"function '{self.name}' at {self.at(values)}: {label} "
                                  f"`{size_exprs.spell(code, self.names)}` is {value}, past "
                                  f"{limit}, the most it can hold")
        return value

    def instance(self, values: tuple):
        """The function at ``values`` (checked by ``check``): a static FunctionT, verified, with
        its clears; InvocationError for a size without an exact value, ModuleError where the
        module's expressions contradict each other at this size."""
        where = f"function '{self.name}' at {self.at(values)}"
        instance = instantiate(self.tree, lambda label, code, limit=size_exprs.LIMIT:
                               self.evaluate(code, values, label, limit), where)
        self.tree.verify_size(instance, where)
        return instance
