"""``Strings``: how a string column is handed to the kernels (Arrow layout)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class Strings:
    """A utf8 / large_utf8 (or binary) column in Arrow layout.

    ``offsets``: int32 or int64, ``nrows + 1`` entries, non-decreasing; row
    ``i`` is ``chars[offsets[i]:offsets[i+1]]``.  ``chars``: uint8.  Both are
    1-D arrays of one device (numpy arrays for :func:`hashing.hash_numpy`).
    ``offsets[0]`` need not be 0, so a sliced Arrow array passes as it is.

    A class rather than a tuple so that a sequence of columns never mistakes
    one string column for two columns; ``len()`` is the row count.
    """

    offsets: Any
    chars: Any

    def __len__(self) -> int:
        return max(len(self.offsets) - 1, 0)

    def slice(self, start: int, stop: int) -> Strings:
        """Rows ``[start, stop)`` as a zero-copy view: ``offsets[start:stop+1]``
        and the whole ``chars`` (offsets are not rebased, as in an Arrow slice)."""
        return Strings(self.offsets[start:stop + 1], self.chars)
