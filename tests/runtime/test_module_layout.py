"""The table layouts of the bounds walker and the unpack must match schemas/*.fbs field for
field."""

from __future__ import annotations

import re
from pathlib import Path

from pyree.runtime.module.layout import DATA_REF, TABLES

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
SCALARS = {"ubyte": "<B", "byte": "<b", "bool": "<?", "ushort": "<H", "short": "<h",
           "uint": "<I", "int": "<i", "float": "<f", "ulong": "<Q", "long": "<q", "double": "<d"}


def _schema() -> tuple[dict[str, list], dict[str, str]]:
    text = re.sub(r"//[^\n]*", "", "\n".join(p.read_text() for p in sorted(SCHEMAS.glob("*.fbs"))))
    enums = {name: SCALARS[base] for name, base in re.findall(r"enum (\w+)\s*:\s*(\w+)", text)}
    structs = set(re.findall(r"struct (\w+)", text))
    tables = {}
    for name, body in re.findall(r"table (\w+)\s*\{([^}]*)\}", text):
        tables[name] = re.findall(r"(\w+)\s*:\s*([\w\[\]]+)", body)
    return tables, {**SCALARS, **enums, **{s: DATA_REF for s in structs}}


def _camel(name: str) -> str:
    """A schema field's name as flatc's object API spells it (``min_length`` -> ``minLength``)."""
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _kind(type_text: str, sizes: dict[str, str]):
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
    expected = {name: [(_camel(n), _kind(t, sizes)) for n, t in fields]
                for name, fields in tables.items()}
    assert TABLES == expected
