"""Weights as the importers write them: inline ``dense<"0x...">`` (torch-mlir's ONNX path) and
``dense_resource`` blobs (its FX path). The parser cuts long hex out of the text before xDSL
sees it; values, op locations and error positions must be as if it had not."""

import re
import struct

import numpy as np
import pytest
from pyree.compiler.errors import CompileError
from pyree.compiler.input import import_mlir, parse_mlir
from pyree.compiler.input.parser import location_of
from pyree.compiler.tensor_program import Constant


def model(rng, n=300):
    """Two inline hex constants (one mid-line), a resource blob and a short inline hex that
    xDSL reads itself; returns the text and the values in use order."""
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    short = rng.standard_normal(2).astype(np.float32)
    t = f"tensor<{n}xf32>"
    text = f"""func.func @f(%x: {t}) -> ({t}, tensor<2xf32>) {{
  %a = arith.constant dense<"0x{a.tobytes().hex()}"> : {t}
  %b = arith.constant dense<"0x{b.tobytes().hex().upper()}"> : {t}  %s = arith.addf %a, %b : {t}
  %c = arith.constant dense_resource<weights.c> : {t}
  %d = arith.addf %s, %c : {t}
  %e = arith.addf %d, %x : {t}
  %h = arith.constant dense<"0x{short.tobytes().hex()}"> : tensor<2xf32>
  return %e, %h : {t}, tensor<2xf32>
}}
{{-#
  dialect_resources: {{
    builtin: {{
      weights.c: "0x{(struct.pack('<I', 4) + c.tobytes()).hex()}"
    }}
  }}
#-}}
"""
    return text, [a, b, c, short]


def test_values_and_locations(rng):
    text, values = model(rng)
    module = parse_mlir(text, "m.mlir")
    where = {op.name + str(i): location_of(op) for i, op in enumerate(module.walk())}
    lines = [f"m.mlir:{line}:{col}" for line, col in
             [(1, 1), (2, 3), (3, 3), (3, text.splitlines()[2].index("%s") + 1), (4, 3), (5, 3),
              (6, 3), (7, 3), (8, 3)]]
    assert list(where.values())[1:] == lines
    constants = [op for op in import_mlir(text).functions[0].ops if isinstance(op, Constant)]
    for op, want in zip(constants, values):
        np.testing.assert_array_equal(np.frombuffer(op.data, np.float32), want)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("%s = arith.addf %a, %b", "%s = arith.addf %a, %q"),
     "m.mlir:3:{col}: error: use of undefined value %q"),
    (lambda t: re.sub(r'[0-9a-f]{8}("> : tensor<300xf32>\n)', r"\1", t, count=1),  # 4 bytes short
     "m.mlir:2:3: error: this dense<\"0x...\"> literal holds 1196 bytes, but tensor<300xf32> needs 1200"),
    (lambda t: t.replace("weights.c: \"0x", "weights.d: \"0x"),
     "m.mlir:4:3: error: dense_resource 'weights.c' has no blob in the file's dialect_resources section"),
    (lambda t: t.replace("weights.c: \"0x04000000", "weights.c: \"0x0400000"),
     "m.mlir:4:3: error: dense_resource 'weights.c': the data is not whole bytes of hex digits"),
])
def test_errors_point_into_the_original_text(rng, edit, message):
    text = edit(model(rng)[0])
    col = text.splitlines()[2].find("%q") + 1
    with pytest.raises(CompileError) as info:
        parse_mlir(text, "m.mlir")
    assert str(info.value).splitlines()[0] == message.format(col=col)
    assert "__pyree" not in str(info.value)


@pytest.mark.parametrize("section", [
    ' x: "0x04000000AABB", y_1.z: "0x04000000aabbccdd"',   # ordinary blobs, either case
    ' short: "0x0400", empty: "0x", bare: "0x04000000"',   # shorter than their alignment
    ' odd: "0x04000000ABC", next: "0x04000000AB"',         # an odd count of digits
    ' spaced: "0x04000000AB CD", next: "0x04000000AB"',    # whitespace fromhex would skip
    ' bad: "0x04000000ABXY", next: "0x04000000AB"',        # a digit that is not hex
    ' bad: "0x0400zz00AB", next: "0x04000000AB"',          # ... among the alignment's
    ' open: "0x04000000AB',                                # no closing quote
    ' dup: "0x04000000AB", dup: "0x04000000 CD", dup2: "0x04000000EF", dup2: "0x04000000"',
    ' "quoted key": "0x04000000AB", k : "0x04000000CD"',   # a key that needs quoting
])
def test_blobs_are_found_as_the_regex_finds_them(section):
    """The blobs of a resource section, found by their closing quotes and decoded at once
    where that proves them hex, are what the regex over every digit finds (and decodes)."""
    from pyree.compiler.input import parser

    text = "{-#\n dialect_resources: {\n builtin: {\n" + section + "\n }\n }\n#-}\n"
    found = list(parser._resource_blobs(text, 0))
    regex = [(m.group(1), m.start(2), m.end(2)) for m in parser._RESOURCE_BLOB.finditer(text)]
    assert [f[:3] for f in found] == regex
    for _, start, end, data in found:
        if data is not None:
            assert data == bytes.fromhex(text[start + 8:end])
    blobs = parser._Blobs(text)
    for key, (start, end) in {key: (start, end) for key, start, end in regex}.items():
        try:  # (a key given twice: its last blob)
            expected = bytes.fromhex(text[start + 8:end])
        except ValueError:
            with pytest.raises(ValueError):
                blobs.decode(key)
            continue
        assert blobs.decode(key) == expected
