"""Walk nested containers, replacing device leaves while keeping container types.

Unchanged sub-containers are returned as the identical object, so host data
passes through untouched.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

_SEQUENCES = (list, tuple, set, frozenset)
_MAPPINGS = (dict, OrderedDict)
_CONTAINERS = frozenset(_SEQUENCES + _MAPPINGS)  # one hash lookup for is_leaf
_NO_CHANGE = object()


def walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with every leaf ``x`` replaced by ``leaf(x)`` unless that returns ``x``.

    Lists, tuples (namedtuples too), sets, frozensets, dicts, OrderedDicts and
    dataclass instances are rebuilt with their own type; anything else is a leaf.
    """
    result = _walk(value, leaf)
    return value if result is _NO_CHANGE else result


def is_leaf(value: Any) -> bool:
    """True when :func:`walk` would treat ``value`` as a leaf (lets callers skip it)."""
    t = type(value)
    return (
        t not in _CONTAINERS
        and not (isinstance(value, tuple) and hasattr(t, "_make"))
        and not hasattr(t, "__dataclass_fields__")
    )


def _walk(value: Any, leaf: Callable[[Any], Any]) -> Any:
    t = type(value)
    if t in _SEQUENCES or (isinstance(value, tuple) and hasattr(t, "_make")):
        items = [_walk(v, leaf) for v in value]
        if all(i is _NO_CHANGE for i in items):
            return _NO_CHANGE
        new = [v if i is _NO_CHANGE else i for v, i in zip(value, items, strict=True)]
        return t._make(new) if hasattr(t, "_make") else t(new)
    if t in _MAPPINGS:
        items = {k: _walk(v, leaf) for k, v in value.items()}
        if all(i is _NO_CHANGE for i in items.values()):
            return _NO_CHANGE
        return t((k, value[k] if i is _NO_CHANGE else i) for k, i in items.items())
    if hasattr(t, "__dataclass_fields__"):
        return _walk_dataclass(value, leaf)
    new = leaf(value)
    return _NO_CHANGE if new is value else new


def _walk_dataclass(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """A user's dataclass holding device objects: a shallow copy with its fields replaced.

    Fields are set with ``object.__setattr__`` so frozen and slotted dataclasses work too.
    """
    names = [f.name for f in dataclasses.fields(value)]
    items = {n: _walk(getattr(value, n), leaf) for n in names}
    if all(i is _NO_CHANGE for i in items.values()):
        return _NO_CHANGE
    new = copy.copy(value)
    for n, i in items.items():
        if i is not _NO_CHANGE:
            object.__setattr__(new, n, i)
    return new
