"""A cached property without functools' per-instance lock (Python 3.11 takes an RLock on
every first access, which dominated checking time: each domain is a new instance).

A descriptor class of its own, also for type checkers (not functools.cached_property under
TYPE_CHECKING): mypyc compiles a method that mypy takes for a cached_property as a plain
property, computed again at every read (2.3x slower, docs/benchmarks.md); this decorator it
applies at run time as the interpreter does, to a class it leaves interpreted (vmtune.facts.domain),
whose instances have the __dict__ a fact is kept in. Compiled itself, __get__ is a C slot: a fact's
first read costs less (manifests and domain XML, -j 1: ~35 M instructions less each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached(Generic[T]):  # lower case: a drop-in for functools.cached_property
    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        # a method mypyc compiled is a callable object without __name__ or __doc__:
        # __set_name__ names the fact
        self.name: str = getattr(func, "__name__", "")
        self.__doc__ = getattr(func, "__doc__", None)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> cached[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)
        return value
