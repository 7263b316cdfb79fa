"""A seeded sweep of broken inputs: functions of the op test files in tests/e2e/ops, each with
one mutation (an operand dropped or swapped, a number or an element type changed, a line
removed), compiled with ``compile_str``. Each must compile or fail with a CompileError that
names a ``file:line:col``; any other exception is a compiler bug. A few thousand mutants of
this kind, across every target, found the refusals in input/checks.py; CI runs a small,
fixed sample."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from pyree.compiler import CompileError, compile_str

OPS = Path(__file__).resolve().parent.parent / "e2e" / "ops"
FILES = ["elementwise", "linalg", "linalg_ext", "tensor", "stablehlo_elementwise",
         "stablehlo_reduce", "stablehlo_shape", "stablehlo_gather_scatter", "convolution"]
_NUMBER = re.compile(r"(?<![%\w.#])\d+(?![\w.])")
_VALUE = re.compile(r"%[\w.]+")
_ELEMENT = re.compile(r"x(f32|f16|i32|i1|i64|i8)>")


def _functions() -> list[str]:
    out = []
    for name in FILES:
        text = (OPS / f"{name}.mlir").read_text()
        starts = [m.start() for m in re.finditer(r"^func\.func", text, re.M)]
        for a, b in zip(starts, starts[1:] + [len(text)]):
            body = text[a:b]
            out.append(body[:body.rfind("\n}") + 2])
    return out


def _mutate(text: str, rng: random.Random) -> str | None:
    lines = text.split("\n")
    kind = rng.choice(["drop", "swap", "number", "number", "element", "line"])
    if kind == "line":
        del lines[rng.randrange(1, len(lines) - 1)]
        return "\n".join(lines)
    if kind in ("drop", "swap"):
        rows = [i for i, line in enumerate(lines) if "=" in line and line.count("%") >= 2]
        if not rows:
            return None
        i = rng.choice(rows)
        lhs, rhs = lines[i].split("=", 1)
        m = rng.choice(list(_VALUE.finditer(rhs)) or [None])
        if m is None:
            return None
        names = sorted(set(_VALUE.findall(text)))
        new = "" if kind == "drop" else rng.choice(names)
        rhs = rhs[:m.start()] + new + rhs[m.end():]
        lines[i] = lhs + "=" + re.sub(r",\s*([,)])", r"\1", re.sub(r"\(\s*,", "(", rhs))
        return "\n".join(lines)
    pattern = _NUMBER if kind == "number" else _ELEMENT
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    m = rng.choice(matches)
    if kind == "number":
        new = str(rng.choice([0, 1, 2, 3, 7, 4294967296, 99999999999, int(m.group()) + 1]))
        return text[:m.start()] + new + text[m.end():]
    return text[:m.start(1)] + rng.choice(["f32", "f16", "i32", "i1", "i64", "bf16"]) + text[m.end(1):]


@pytest.mark.parametrize("seed", range(4))
def test_broken_inputs_fail_only_with_a_located_compile_error(seed):
    rng = random.Random(seed)
    functions = _functions()
    outcomes = {"compiled": 0, "refused": 0}
    for _ in range(10):
        text = None
        while text is None:
            text = _mutate(rng.choice(functions), rng)
        try:
            compile_str(text, source_name="mutant.mlir", target_backends=["llvm-cpu"])
            outcomes["compiled"] += 1
        except CompileError as err:
            assert err.location.startswith("mutant.mlir:"), f"{err}\n--- input ---\n{text}"
            outcomes["refused"] += 1
        except Exception as err:  # noqa: BLE001 - the bug this test is for
            pytest.fail(f"{type(err).__name__}: {err}\n--- input ---\n{text}")
    assert outcomes["refused"] > 0, outcomes  # the mutations do break inputs
