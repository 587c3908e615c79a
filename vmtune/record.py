"""Small immutable values (fixes, edits, policy entries) as plain classes with `__slots__`.

`typing.NamedTuple` was the obvious choice, but creating one costs ~0.15 ms at every start (it
builds the class through `collections.namedtuple`'s `eval` and compiles each string annotation),
and a one-file check created nine. A subclass lists its fields in `__slots__` and assigns them
in `__init__`; it gets equality, hashing and a repr (with field names) by value from them, as the
tuple had. Unlike a tuple it does not unpack, index or compare equal to a plain tuple:
nothing in vmtune does that with these values. Not changed once made (by convention: a
`__setattr__` guard would slow every construction on the check path).
"""

from __future__ import annotations


class Record:
    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())  # a TypeError when a field is a dict, as for the tuple

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"
