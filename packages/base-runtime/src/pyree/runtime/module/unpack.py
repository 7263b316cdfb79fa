"""The object tree of a module file (the generated ``*T`` classes of ``pyree.runtime._fb``),
read straight from the table layouts of layout.py.

The generated object API's unpack makes several method calls per field (each looks the field up
in the vtable again) and builds a reader object twice per child table; this reads each vtable
once and each field with one struct read, about three times faster, into the same classes and
values: strings as bytes, scalar vectors as lists, absent fields at their defaults
(tests/runtime/test_module_unpack.py compares the two trees). It trusts every offset: it runs
after bounds.py has checked them all and capped the objects that sharing could multiply.
"""

from __future__ import annotations

import struct

from pyree.runtime import _fb
from pyree.runtime.module.layout import DATA_REF, ROOT, TABLES

_U16, _U32, _I32 = (struct.Struct(f).unpack_from for f in ("<H", "<I", "<i"))
_DATA_REF = struct.Struct(DATA_REF).unpack_from

# How each field is read: what _table does with it.
_SCALAR, _STRUCT, _STRING, _VECTOR, _STRINGS, _TABLE, _TABLES = range(7)


def _plan(kind) -> tuple[int, object]:
    if kind == DATA_REF:
        return _STRUCT, None
    if kind == "string":
        return _STRING, None
    if isinstance(kind, str):
        return _SCALAR, struct.Struct(kind).unpack_from
    how = {"vector": _VECTOR, "strings": _STRINGS, "table": _TABLE, "tables": _TABLES}[kind[0]]
    return how, kind[1][1:] if how == _VECTOR else kind[1] if len(kind) > 1 else None


# table -> (its T class, [(vtable entry, attribute, how, argument)])
_PLANS = {name: (getattr(_fb, f"{name}T"), [(4 + 2 * slot, attribute, *_plan(kind))
                                            for slot, (attribute, kind) in enumerate(fields)])
          for name, fields in TABLES.items()}


def _string(buf, pos: int) -> bytes:
    """The string whose uoffset is at ``pos``."""
    pos += _U32(buf, pos)[0]
    return bytes(buf[pos + 4:pos + 4 + _U32(buf, pos)[0]])


def _table(buf, pos: int, name: str):
    cls, fields = _PLANS[name]
    out = cls()
    values = out.__dict__
    vtable = pos - _I32(buf, pos)[0]
    vtable_size = _U16(buf, vtable)[0]
    for entry, attribute, how, argument in fields:
        if entry >= vtable_size:
            break
        offset = _U16(buf, vtable + entry)[0]
        if not offset:
            continue
        at = pos + offset
        if how == _SCALAR:
            values[attribute] = argument(buf, at)[0]
        elif how == _STRING:
            values[attribute] = _string(buf, at)
        elif how == _TABLE:
            values[attribute] = _table(buf, at + _U32(buf, at)[0], argument)
        elif how == _STRUCT:
            ref = _fb.DataRefT()
            ref.offset, ref.length = _DATA_REF(buf, at)
            values[attribute] = ref
        else:
            at += _U32(buf, at)[0]
            count, at = _U32(buf, at)[0], at + 4
            if how == _VECTOR:
                values[attribute] = list(struct.unpack_from(f"<{count}{argument}", buf, at))
            elif how == _TABLES:
                values[attribute] = [_table(buf, p + _U32(buf, p)[0], argument)
                                     for p in range(at, at + 4 * count, 4)]
            else:
                values[attribute] = [_string(buf, p) for p in range(at, at + 4 * count, 4)]
    return out


def unpack(buf) -> _fb.ModuleT:
    """The Module tree of a FlatBuffer that bounds.check_bounds has passed."""
    return _table(buf, _U32(buf, 0)[0], ROOT)
