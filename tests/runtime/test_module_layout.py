"""The bounds walker's table layouts must match schemas/*.fbs field for field."""

from __future__ import annotations

import re
from pathlib import Path

from pyree.runtime.module.layout import DATA_REF, TABLES

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
SCALARS = {"ubyte": 1, "byte": 1, "bool": 1, "ushort": 2, "short": 2, "uint": 4, "int": 4,
           "float": 4, "ulong": 8, "long": 8, "double": 8}


def _schema() -> tuple[dict[str, list], dict[str, int]]:
    text = re.sub(r"//[^\n]*", "", "\n".join(p.read_text() for p in sorted(SCHEMAS.glob("*.fbs"))))
    enums = {name: SCALARS[base] for name, base in re.findall(r"enum (\w+)\s*:\s*(\w+)", text)}
    structs = set(re.findall(r"struct (\w+)", text))
    tables = {}
    for name, body in re.findall(r"table (\w+)\s*\{([^}]*)\}", text):
        tables[name] = [t.strip() for t in re.findall(r"\w+\s*:\s*([\w\[\]]+)", body)]
    return tables, {**SCALARS, **enums, **{s: DATA_REF for s in structs}}


def _kind(type_text: str, sizes: dict[str, int]):
    if type_text == "string":
        return "string"
    if type_text.startswith("["):
        element = type_text[1:-1]
        if element == "string":
            return ("strings",)
        return ("vector", sizes[element]) if element in sizes else ("tables", element)
    return sizes.get(type_text, ("table", type_text))


def test_layout_matches_schema():
    tables, sizes = _schema()
    expected = {name: [_kind(t, sizes) for t in fields] for name, fields in tables.items()}
    assert TABLES == expected
