"""How the requests of one batch share calls of a compiled function (no Ray here).

pyree functions have static shapes, so a batch cannot grow a call: it fills calls of the size the
function was compiled for. Two plans:

* **Exact** (the default): a request gives every argument with the function's exact shape, and
  is one call. Its answer is what calling the function on its arguments gives, whatever else
  the batch holds.
* **Stacked** (``stack_rows=True``), for a function whose every argument and result has rank
  >= 1 and the same leading dimension N (its batch size). A request then gives each argument as
  ``k`` rows of the argument's row shape (``shape[1:]``), any ``k >= 1``, the same ``k`` for
  every argument. The rows of a batch's requests are concatenated and run in calls of N rows;
  the last call is padded by repeating its last row (real values, so a padded row cannot trip a
  check or an overflow that zeros would), and each request gets its own rows of every result
  back. N = 1 runs a batch row by row. When a shared call fails (a check op, say), each of its
  requests is run again alone, so that a bad request fails by itself. Stacking is exact only
  when every result row depends on the same argument rows alone, which neither the types nor
  the module can show: a function that mixes rows (x minus its column mean, a softmax or
  batch-norm over the batch, attention across the leading dimension) would give one client an
  answer computed with another client's rows and the padding. Hence opt-in.

Either way all the batch's calls are submitted before any result is read, so the device works
on one call while the host uploads the next.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyree.runtime import Function, InvocationError, PyreeError, TensorType
from pyree.runtime.vm.tensor_type import describe


def batch_rows(function: Function) -> int | None:
    """N when ``function`` can be stacked (every argument and result of rank >= 1 with the
    same leading dimension N), else None."""
    types = function.argument_types + function.result_types
    if not function.argument_types or not function.result_types or any(not t.shape for t in types):
        return None
    leading = {t.shape[0] for t in types}
    return leading.pop() if len(leading) == 1 else None


@dataclass(frozen=True)
class BatchPlan:
    function: Function
    rows: int | None    # N when requests are stacked, None when each request is one call

    @classmethod
    def of(cls, function: Function, stack_rows: bool = False) -> BatchPlan:
        """The exact plan, or with ``stack_rows`` the stacked one (a function whose types do
        not allow stacking is refused)."""
        if not stack_rows:
            return cls(function, None)
        rows = batch_rows(function)
        if rows is None:
            signature = ", ".join(map(str, function.argument_types))
            results = ", ".join(map(str, function.result_types))
            raise ValueError(f"function '{function.name}' ({signature}) -> ({results}) cannot be "
                             f"served with stack_rows=True: stacking needs every argument and "
                             f"result to have the same leading (batch) dimension")
        return cls(function, rows)

    def describe(self) -> dict:
        """What a client needs to build a request (the HTTP interface's GET)."""
        f = self.function
        return {"function": f.name, "arguments": [str(t) for t in f.argument_types],
                "results": [str(t) for t in f.result_types], "batch_rows": self.rows}

    def check(self, arrays: list[np.ndarray]) -> None:
        """Raises InvocationError when one request's arrays do not fit the plan."""
        f = self.function
        if len(arrays) != len(f.argument_types):
            expected = ", ".join(map(self._spelling, f.argument_types)) or "none"
            raise InvocationError(f"function '{f.name}' takes {len(f.argument_types)} arguments "
                                  f"({expected}{self._rows_note('; ')}), got {len(arrays)}")
        for index, (array, t) in enumerate(zip(arrays, f.argument_types)):
            if self.rows is None:
                fits = array.shape == t.shape
            else:
                fits = array.ndim == len(t.shape) and array.shape[1:] == t.shape[1:] and len(array)
            if not fits or array.dtype != t.dtype:
                raise InvocationError(f"function '{f.name}' argument {index}: expected "
                                      f"{self._spelling(t)}{self._rows_note(' (', t)}, "
                                      f"got {describe(array)}")
        if self.rows is not None and len({len(a) for a in arrays}) > 1:
            raise InvocationError(f"function '{f.name}': the arguments of one request have "
                                  f"different row counts ({', '.join(str(len(a)) for a in arrays)});"
                                  f" every argument needs the same number of rows")

    def _spelling(self, t: TensorType) -> str:
        return str(t) if self.rows is None else f"kx{TensorType.of(t.element_type, t.shape[1:])}"

    def _rows_note(self, opening: str, t: TensorType | None = None) -> str:
        """How stacked arguments are spelled, after ``opening`` (and closed if it opened)."""
        if self.rows is None:
            return ""
        whole = f"of the function's {t}" if t is not None else "each"
        return (f"{opening}k >= 1 rows {whole}, which the server stacks into calls of "
                f"{self.rows} rows{')' if '(' in opening else ''}")

    def run(self, requests: list[list[np.ndarray]]) -> list[list[np.ndarray] | PyreeError]:
        """Every request's results, or the error of the call that computed them."""
        if self.rows is None:
            return [_host(call) for call in [self._submit(arrays) for arrays in requests]]
        counts = [len(arrays[0]) for arrays in requests]
        stacked = [np.concatenate(column) for column in zip(*requests)]
        total, n = sum(counts), self.rows
        calls = [self._submit([_pad(a[start:start + n], n) for a in stacked])
                 for start in range(0, total, n)]
        calls = [_host(call) for call in calls]
        placeholder = [np.empty((n, *t.shape[1:]), t.dtype) for t in self.function.result_types]
        results = [np.concatenate(column)
                   for column in zip(*(placeholder if isinstance(c, PyreeError) else c for c in calls))]
        out: list[list[np.ndarray] | PyreeError] = []
        start = 0
        for k, request in zip(counts, requests):
            failed = [c for c in calls[start // n:(start + k - 1) // n + 1] if isinstance(c, PyreeError)]
            if not failed:
                out.append([r[start:start + k] for r in results])
            elif len(requests) == 1:
                out.append(failed[0])
            else:  # a call shared with others failed: alone, only its own rows can fail it
                out.append(self.run([request])[0])
            start += k
        return out

    def _submit(self, arrays: list[np.ndarray]) -> list | PyreeError:
        """One call's (still computing) results, or its error."""
        try:
            results = self.function(*arrays)
        except PyreeError as e:
            return e
        return list(results) if isinstance(results, tuple) else [] if results is None else [results]


def _host(call: list | PyreeError) -> list[np.ndarray] | PyreeError:
    if isinstance(call, PyreeError):
        return call
    try:
        return [result.to_host() for result in call]
    except PyreeError as e:
        return e


def _pad(rows: np.ndarray, n: int) -> np.ndarray:
    """``rows`` grown to ``n`` rows by repeating its last one."""
    return rows if len(rows) == n else np.concatenate([rows, np.repeat(rows[-1:], n - len(rows), 0)])
