"""A cached property without functools' per-instance lock (Python 3.11 takes an RLock on
every first access, which dominated checking time: each domain is a new instance)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:
    from functools import cached_property as cached
else:

    class cached(Generic[T]):  # lower case: a drop-in for functools.cached_property
        def __init__(self, func: Callable[[Any], T]) -> None:
            self.func = func
            self.name = func.__name__
            self.__doc__ = func.__doc__

        def __set_name__(self, owner: type, name: str) -> None:
            self.name = name

        def __get__(self, obj: Any, objtype: type | None = None) -> T:
            if obj is None:
                return self  # type: ignore[return-value]
            value = obj.__dict__[self.name] = self.func(obj)
            return value
