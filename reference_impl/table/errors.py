"""Errors whose messages name what was wrong and what was there instead."""

from __future__ import annotations

from collections.abc import Iterable


class ColumnNotFoundError(KeyError):
    """A named column is not in the table; the message lists the columns present.

    A ``KeyError`` (a missing key), printed as plain text rather than a quoted repr.
    """

    def __init__(self, missing: Iterable[str], present: Iterable[str]) -> None:
        self.missing = list(missing)
        self.present = list(present)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        names = ", ".join(repr(m) for m in self.missing)
        which = "column" if len(self.missing) == 1 else "columns"
        present = ", ".join(repr(p) for p in self.present) or "none"
        return f"{which} {names} not in the table; columns present: {present}"

    def __str__(self) -> str:
        return self.message


class SchemaMismatchError(ValueError):
    """Tables that must share a schema do not; the message shows both."""
