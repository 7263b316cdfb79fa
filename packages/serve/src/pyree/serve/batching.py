"""How the requests of one batch share calls of a compiled function (no Ray here).

Two plans:

* **Exact** (the default): a request gives every argument with the function's shape (any size
  for a run-time ``?`` dim), and is one call. Its answer is what calling the function on its
  arguments gives, whatever else the batch holds.
* **Stacked** (``stack_rows=True``), for a function whose every argument and result has rank
  >= 1 and the same leading (batch) dimension: a static N, or one run-time size (a dynamic
  batch, ``?x53xf32 -> ?x11xf32`` with one symbol for every ``?``). A request then gives each
  argument as ``k`` rows of the argument's row shape (``shape[1:]``, static), any ``k >= 1``,
  the same ``k`` for every argument, and gets its own rows of every result back. The rows of a
  batch's requests are concatenated; with a static N they run in calls of N rows, the last one
  padded by repeating its last row (real values, so a padded row cannot trip a check or an
  overflow that zeros would); with a dynamic batch they are one call of exactly the batch's
  rows, split only where the size's declared maximum says so (and padded only up to its
  declared minimum or divisor). When a shared call fails (a check op, say), each of its
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


@dataclass(frozen=True)
class CallRows:
    """The rows one stacked call may have: from ``least`` to ``most`` (None: any number), a
    multiple of ``multiple``. A static batch N allows exactly N; a dynamic batch allows what its
    run-time size ``symbol`` is declared to take."""
    least: int
    most: int | None
    multiple: int = 1
    symbol: str | None = None

    def calls(self, total: int) -> list[tuple[int, int, int]]:
        """(first row, past the last row, rows passed) of each call that ``total`` rows need:
        as few as the bounds allow, each padded only up to the least size it may have (none
        for a dynamic batch without bounds: one call of exactly ``total`` rows)."""
        step = total if self.most is None else self.most // self.multiple * self.multiple
        spans = [(start, min(start + step, total)) for start in range(0, total, step)]
        return [(start, stop, _round_up(max(stop - start, self.least), self.multiple))
                for start, stop in spans]


def call_rows(function: Function) -> CallRows:
    """How ``function``'s calls take stacked rows: every argument and result of rank >= 1 with
    the same leading dimension, a static N or one run-time size (a dynamic batch), and static
    dims past it. Raises ValueError naming the function, its types and what stops it."""
    types = function.argument_types + function.result_types
    dims = function.argument_dims + function.result_dims
    if not function.argument_types or not function.result_types or any(not t.shape for t in types):
        _refuse(function, "stacking needs every argument and result to have the same leading "
                          "(batch) dimension")
    leading = list(dict.fromkeys(d[0] for d in dims))
    if any(isinstance(d, int) for d in leading) and any(isinstance(d, str) for d in leading):
        _refuse(function, f"its leading dims mix static and run-time sizes "
                          f"({', '.join(map(str, leading))}); stacking needs every argument and "
                          f"result to lead with the same batch dimension, one static size or one "
                          f"run-time size")
    if len(leading) > 1:
        what = "static" if isinstance(leading[0], int) else "run-time"
        _refuse(function, f"its leading dims are different {what} sizes "
                          f"({', '.join(map(str, leading))}); stacking needs every argument and "
                          f"result to have the same leading (batch) dimension")
    rows = [t for t in types if -1 in t.shape[1:]]
    if rows:
        _refuse(function, f"a row of {rows[0]} has a run-time size past its leading dim; "
                          f"stacking needs static dims after the batch dimension")
    if isinstance(leading[0], int):
        return CallRows(leading[0], leading[0])
    symbol = next((s for s in function.symbols if s.name == leading[0]), None)
    if symbol is None:
        _refuse(function, f"its leading dim `{leading[0]}` is a formula, not one run-time size; "
                          f"stacking needs a batch dimension that is an argument's own size")
    least = _round_up(max(symbol.min, 1), symbol.divisor)
    if symbol.max is not None and least > symbol.max:
        _refuse(function, f"its batch size `{symbol.name}` has no size of at least 1 in "
                          f"[{symbol.min}, {symbol.max}] that is a multiple of {symbol.divisor}")
    return CallRows(symbol.min, symbol.max, symbol.divisor, symbol.name)


def _refuse(function: Function, why: str):
    signature = ", ".join(map(str, function.argument_types))
    results = ", ".join(map(str, function.result_types))
    raise ValueError(f"function '{function.name}' ({signature}) -> ({results}) cannot be served "
                     f"with stack_rows=True: {why}")


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


@dataclass(frozen=True)
class BatchPlan:
    function: Function
    rows: CallRows | None    # how stacked calls take rows; None when each request is one call

    @classmethod
    def of(cls, function: Function, stack_rows: bool = False) -> BatchPlan:
        """The exact plan, or with ``stack_rows`` the stacked one (a function whose types do
        not allow stacking is refused: call_rows)."""
        return cls(function, call_rows(function) if stack_rows else None)

    def describe(self) -> dict:
        """What a client needs to build a request (the HTTP interface's GET). ``batch_rows``:
        None for exact calls, the rows of every stacked call, or ``?`` where a batch's rows
        are one call (at most ``max_call_rows`` rows, where the function declares a bound)."""
        f, rows = self.function, self.rows
        described = {"function": f.name, "arguments": [str(t) for t in f.argument_types],
                     "results": [str(t) for t in f.result_types],
                     "batch_rows": None if rows is None else "?" if rows.symbol else rows.least}
        if rows is not None and rows.symbol and rows.most is not None:
            described["max_call_rows"] = rows.most
        return described

    def check(self, arrays: list[np.ndarray]) -> None:
        """Raises InvocationError when one request's arrays do not fit the plan."""
        f = self.function
        if len(arrays) != len(f.argument_types):
            expected = ", ".join(map(self._spelling, f.argument_types)) or "none"
            raise InvocationError(f"function '{f.name}' takes {len(f.argument_types)} arguments "
                                  f"({expected}{self._rows_note('; ')}), got {len(arrays)}")
        for index, (array, t) in enumerate(zip(arrays, f.argument_types)):
            if self.rows is None:  # a run-time dim takes any size; the call checks the rest
                fits = array.ndim == len(t.shape) and all(
                    d in (-1, n) for d, n in zip(t.shape, array.shape))
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
        rows = self.rows
        if rows is None:
            return ""
        whole = f"of the function's {t}" if t is not None else "each"
        calls = f"calls of {rows.least} rows" if rows.symbol is None else \
            "one call per batch" if rows.most is None else f"calls of at most {rows.most} rows"
        return (f"{opening}k >= 1 rows {whole}, which the server stacks into "
                f"{calls}{')' if '(' in opening else ''}")

    def run(self, requests: list[list[np.ndarray]]) -> list[list[np.ndarray] | PyreeError]:
        """Every request's results, or the error of the call that computed them."""
        if self.rows is None:
            return [_host(call) for call in [self._submit(arrays) for arrays in requests]]
        counts = [len(arrays[0]) for arrays in requests]
        stacked = [np.concatenate(column) for column in zip(*requests)]
        spans = self.rows.calls(sum(counts))
        calls = [self._submit([_pad(a[start:stop], size) for a in stacked])
                 for start, stop, size in spans]
        calls = [_host(call) for call in calls]
        # each call's own rows (its padding dropped); a failed call's rows are never read
        results = [np.concatenate(column) for column in zip(*(
            [np.empty((stop - start, *t.shape[1:]), t.dtype) for t in self.function.result_types]
            if isinstance(call, PyreeError) else [r[:stop - start] for r in call]
            for (start, stop, _), call in zip(spans, calls)))]
        out: list[list[np.ndarray] | PyreeError] = []
        start = 0
        for k, request in zip(counts, requests):
            failed = [call for (first, stop, _), call in zip(spans, calls)
                      if first < start + k and stop > start and isinstance(call, PyreeError)]
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
