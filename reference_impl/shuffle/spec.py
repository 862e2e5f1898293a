"""What every task of one shuffle needs: the shuffle, fixed before any data moves, and
the run (one attempt at it, started by the coordinator), then the rows.

The task keys of a shuffle are made here and only here (:class:`ShuffleSpec`'s ``*_key``);
nothing parses them back: the scheduler finds a shuffle from its barrier task's
arguments (:func:`barrier_spec`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

KEY_PREFIX = "devshuffle-"  # of a shuffle's id, and so of every task key it makes


def new_shuffle_id(token: str | None = None) -> str:
    """A fresh shuffle id; ``token`` (a dask collection's) makes it readable in a graph."""
    if token is None:
        return f"{KEY_PREFIX}{uuid.uuid4().hex[:16]}"
    return f"{KEY_PREFIX}{token[:16]}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class ShuffleSpec:
    """One shuffle, as :func:`~reference_impl.shuffle.shuffle` fixed it once the inputs
    were checked. Where its outputs go is not here: that is each run's (:class:`RunSpec`)."""

    id: str
    on: tuple[str, ...]
    npartitions: int
    schema: Any  # pyarrow.Schema of every input and output
    # True: ``on`` is one integer column that holds each row's output (dask's own
    # ``_partitions``, from its hash or its quantiles), so no key is hashed. It is not
    # carried, and ``schema`` lacks it: every row of output i holds i there, which the
    # output's builder restores (``in_dask``), so it is neither sent nor held as shards.
    destination: bool = False
    # Set for a shuffle inside a dask graph (``in_dask``), which registers itself with the
    # coordinator as its graph arrives; None: its client registered it before submitting.
    max_restarts: int | None = None

    # --- its task keys ------------------------------------------------------------------
    def transfer_key(self, n: int) -> str:
        """The ``n``-th transfer task (per worker eagerly, per input partition in a graph)."""
        return f"{self.id}-transfer-{n}"

    def input_key(self, n: int) -> str:
        """Input partition ``n`` made a transfer's input, inside its transfer (in a graph)."""
        return f"{self.id}-table-{n}"

    @property
    def barrier_key(self) -> str:
        return f"{self.id}-barrier"

    def unpack_key(self, output: int) -> str:
        return f"{self.id}-unpack-{output}"

    @property
    def unpack_keys(self) -> list[str]:
        return [self.unpack_key(i) for i in range(self.npartitions)]


def barrier_spec(ts: Any) -> ShuffleSpec | None:
    """The shuffle whose barrier the scheduler's task ``ts`` is (its first argument is the
    ShuffleSpec, and its key that spec's barrier key), else None."""
    args = getattr(getattr(ts, "run_spec", None), "args", ())
    spec = args[0] if args else None
    if isinstance(spec, ShuffleSpec) and ts.key == spec.barrier_key:
        return spec
    return None


@dataclass(frozen=True)
class RunSpec:
    """One run of a shuffle: a worker that leaves mid-shuffle ends the run, and the
    coordinator starts the next with a higher ``run_id`` on the workers left, so that
    anything of the old run (a late shard, a stale result) is told from the new.

    The barrier returns a copy with ``rows`` (rows sent to each output), which unpack
    checks against what it received, so a lost or duplicated shard is an error, never a
    result. ``wanted`` holds the outputs this run builds: those still in memory from an
    earlier run are kept, never built again.
    """

    shuffle: ShuffleSpec
    run_id: int
    placement: tuple[str, ...]  # output i -> the worker that receives and unpacks it
    wanted: frozenset[int]
    rows: tuple[int, ...] | None = None

    @property
    def id(self) -> str:
        return self.shuffle.id

    @property
    def npartitions(self) -> int:
        return self.shuffle.npartitions

    @property
    def on(self) -> tuple[str, ...]:
        return self.shuffle.on

    @property
    def schema(self) -> Any:
        return self.shuffle.schema

    def outputs_on(self, worker: str) -> list[int]:
        return [i for i, w in enumerate(self.placement) if w == worker and i in self.wanted]

    def with_rows(self, rows: list[int]) -> RunSpec:
        return replace(self, rows=tuple(rows))

    @classmethod
    def from_coordinator(cls, shuffle: ShuffleSpec, answer: dict) -> RunSpec:
        return cls(shuffle, int(answer["run_id"]), tuple(answer["placement"]), frozenset(answer["wanted"]))
