"""Implementations, resolved through the conformance loader exactly as the suite does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.runner.loader import BUILTIN_IMPLS, ImplError, resolve

from .settings import UsageError


@dataclass
class Impl:
    """An implementation the run judges (``judged``) or only reports side by side."""

    spec: str
    adapter: Any | None
    judged: bool
    unavailable: str | None = None

    @property
    def name(self) -> str:
        return self.adapter.name if self.adapter is not None else self.spec

    @property
    def caps(self) -> frozenset[str]:
        return frozenset(self.adapter.capabilities) if self.adapter is not None else frozenset()

    def describe(self) -> dict[str, Any]:
        if self.adapter is None:
            return {"spec": self.spec, "judged": self.judged, "unavailable": self.unavailable}
        return {
            "spec": self.spec,
            "judged": self.judged,
            "version": str(self.adapter.version),
            "capabilities": sorted(self.caps),
        }


def registered() -> list[str]:
    """The built-in names the conformance loader knows (peers registered by others included)."""
    return list(BUILTIN_IMPLS)


def load(judged: list[str], compare: list[str]) -> list[Impl]:
    """Judged implementations must load (else one UsageError line); compared ones may be
    unavailable here, which the report says."""
    out, errors = [], []
    for spec in dict.fromkeys(judged):
        try:
            out.append(Impl(spec, resolve(spec), True))
        except ImplError as exc:
            errors.append(str(exc).replace("\n", "; "))
    if errors:
        raise UsageError("; ".join(errors))
    names = {i.name for i in out}
    for spec in dict.fromkeys(compare):
        if spec in judged:
            continue
        try:
            adapter = resolve(spec)
        except ImplError as exc:
            if spec not in BUILTIN_IMPLS:
                raise UsageError(str(exc).replace("\n", "; ")) from None
            out.append(Impl(spec, None, False, str(exc).split(": ", 1)[-1]))
            continue
        if adapter.name not in names:
            names.add(adapter.name)
            out.append(Impl(spec, adapter, False))
    return out
