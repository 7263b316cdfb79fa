"""Location aliases after the module (``jax.export``'s ``mlir_module()``) are moved before their
uses; a text without them comes back as it is, found by reading from its end only."""

from __future__ import annotations

import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.input.parser import hoist_trailing_aliases

BODY = """module {
  func.func @main(%arg0: tensor<4xf32> loc(#loc1)) -> tensor<4xf32> {
    %0 = arith.addf %arg0, %arg0 : tensor<4xf32> loc(#loc2)
    return %0 : tensor<4xf32> loc(#loc0)
  } loc(#loc0)
} loc(#loc0)"""
ALIASES = '#loc0 = loc(unknown)\n#loc1 = loc("x")\n#loc2 = loc("f.py":8:6 to :78)'


def _reference(text: str) -> str:
    """The rule read line by line from the whole text (what the function did before it read
    only the end): the trailing empty and alias lines move to the front, ranges as starts."""
    import re

    alias = re.compile(r"#[\w$.-]+\s*=\s*loc\(.*\)\s*")
    lines = text.split("\n")
    end = len(lines)
    while end > 0 and (not lines[end - 1].strip() or alias.fullmatch(lines[end - 1])):
        end -= 1
    moved = [line.strip() for line in lines[end:] if line.strip()]
    if not moved or end == 0:
        return text
    lines[end:] = [""] * (len(lines) - end)
    joined = re.sub(r'(loc\("[^"\n]*":\d+:\d+)\s+to\s+(?:\d+)?:\d+\)', r"\1)", " ".join(moved))
    lines[0] = f"{lines[0]} {joined}" if alias.fullmatch(lines[0]) else f"{joined} {lines[0]}"
    return "\n".join(lines)


@pytest.mark.parametrize("text", [
    BODY,
    BODY + "\n",
    BODY + "\n\n  \n",
    f"{BODY}\n{ALIASES}",
    f"{BODY}\n{ALIASES}\n",
    f"{BODY}\n{ALIASES}\n\n",
    f"{BODY}\n\n{ALIASES}\n  \n",
    f"{BODY}\r\n{ALIASES}\r\n",
    f"#loc9 = loc(unknown)\n{BODY}\n{ALIASES}",
    ALIASES,                     # nothing before the aliases: nothing to move them onto
    ALIASES + "\n\n",
    "",
    "\n\n",
    f"{BODY}\n#loc3 = loc(unknown)\n// a comment\n",  # an alias before another line stays
])
def test_hoisting_matches_the_line_by_line_rule(text):
    assert hoist_trailing_aliases(text) == _reference(text)


def test_a_text_without_trailing_aliases_is_returned_as_it_is():
    text = BODY + "\n" + "x" * 1000 + "\n"
    assert hoist_trailing_aliases(text) is text


def test_a_module_with_aliases_after_it_compiles():
    assert compile_str(f"{BODY}\n{ALIASES}\n", CompileOptions(target_backends=["llvm-cpu"]))
