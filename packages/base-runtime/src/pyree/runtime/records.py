"""Record: the frozen value classes of the runtime (TensorType, DeviceInfo, a recorded Command...),
declared as annotated fields, as ``@dataclass(frozen=True)`` declares them.

dataclasses costs a process that only runs a module its import (inspect, ast, dis, tokenize)
and the code it generates and compiles for each of the runtime's record classes. A Record
subclass gets the same behaviour from one shared implementation: ``__init__`` taking the fields
in order (positionally or by name; a class attribute is the default), read-only attributes,
``==`` and ``hash`` over the fields (only between records of the same class) and
``Name(field=value, ...)`` as repr. A subclass keeps a ``__dict__``, so
``functools.cached_property`` works on it.
"""

from __future__ import annotations

from operator import attrgetter


class Record:
    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, object] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = [name for name in cls.__dict__.get("__annotations__", {})
               if not name.startswith("_")]
        cls._fields = (*cls._fields, *(n for n in own if n not in cls._fields))
        cls._defaults = {**cls._defaults,
                         **{n: cls.__dict__[n] for n in own if n in cls.__dict__}}
        for name in own:  # the defaults were class attributes: instances hold the values
            if name in cls.__dict__:
                delattr(cls, name)
        # the fields' values as a tuple, read in C: hashing a recorded Command (a key of the
        # host drivers' per-dispatch cache) is on every dispatch's path
        read = attrgetter(*cls._fields) if cls._fields else None
        cls._key = staticmethod(read if len(cls._fields) > 1 else
                                (lambda record: (read(record),)) if read else (lambda record: ()))
        missing = [n for n in cls._fields if n not in cls._defaults]
        if any(cls._fields.index(n) > cls._fields.index(d) for n in missing for d in cls._defaults):
            raise TypeError(f"{cls.__name__}: a field without a default follows one with")

    def __init__(self, *args, **kwargs):
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, "
                            f"{len(args)} given")
        values = dict(zip(fields, args))
        for name, value in kwargs.items():
            if name not in fields or name in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated "
                                f"argument '{name}'")
            values[name] = value
        for name in fields:
            if name not in values:
                if name not in self._defaults:
                    raise TypeError(f"{type(self).__name__}() missing argument '{name}'")
                values[name] = self._defaults[name]
        self.__dict__.update(values)

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field '{name}' of a {type(self).__name__}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field '{name}' of a {type(self).__name__}")

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key(self) == other._key(other)

    def __hash__(self):
        return hash(self._key(self))

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={self.__dict__[name]!r}" for name in self._fields)
        return f"{type(self).__qualname__}({values})"
