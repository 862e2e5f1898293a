"""A drawn value spec fitted to the store and device under test, before it is built.

Specs are drawn once for every store; what one cannot hold (repeated objects without
dedup, non-native byte order on CuPy) or a smaller limit is rewritten here."""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import strategies as S


def without_dups(spec: Any) -> Any:
    """``spec`` with repeated objects replaced by fresh ones (for stores without dedup)."""
    if isinstance(spec, S.Dup):
        return S.HostSpec("int", 0, spec.index)
    if isinstance(spec, S.Node):
        return S.Node(spec.kind, tuple(without_dups(c) for c in spec.children))
    return spec


def native_only(spec: Any) -> Any:
    """``spec`` with every byte order native (CuPy holds native byte order only)."""
    if isinstance(spec, S.ArraySpec) and spec.dtype.startswith(">"):
        return dataclasses.replace(spec, dtype="=" + spec.dtype[1:])
    if isinstance(spec, S.Node):
        return S.Node(spec.kind, tuple(native_only(c) for c in spec.children))
    return spec


def scaled(spec: Any, factor: float) -> Any:
    """``spec`` with its arrays' sizes scaled to another device limit."""
    if isinstance(spec, S.ArraySpec):
        return dataclasses.replace(spec, nbytes=int(spec.nbytes * factor))
    if isinstance(spec, S.Node):
        return S.Node(spec.kind, tuple(scaled(c, factor) for c in spec.children))
    return spec
