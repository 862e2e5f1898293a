"""What every task of one shuffle needs: fixed before any data moves, then the rows."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ShuffleSpec:
    """One shuffle, as its transfer, barrier and unpack tasks see it.

    Made by :func:`~reference_impl.shuffle.shuffle` once the inputs were checked; the
    barrier returns a copy with ``rows`` (rows sent to each output), which unpack checks
    against what it received, so a lost or duplicated shard is an error, never a result.
    """

    id: str
    on: tuple[str, ...]
    npartitions: int
    placement: tuple[str, ...]  # output i -> the worker that receives and unpacks it
    schema: Any  # pyarrow.Schema of every input and output
    rows: tuple[int, ...] | None = None

    def outputs_on(self, worker: str) -> list[int]:
        return [i for i, w in enumerate(self.placement) if w == worker]

    def with_rows(self, rows: list[int]) -> ShuffleSpec:
        return replace(self, rows=tuple(rows))
