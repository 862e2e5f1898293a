"""One shuffle's state on one worker: its received shards, its failure, its sends."""

from __future__ import annotations

import asyncio
import threading

from .buffers import OutputBuffer, RunBuffers
from .errors import RunSuperseded, ShuffleError


class ShuffleRun:
    """What one worker holds of one shuffle, from its first shard to its close."""

    def __init__(self, shuffle_id: str, run_id: int, worker: str, buffers: RunBuffers) -> None:
        self.id = shuffle_id
        self.run_id = run_id
        self.worker = worker
        self.buffers = buffers
        self.lock = threading.Lock()
        self.unpacked: set[int] = set()
        self.failure: ShuffleError | None = None
        self.sends: list[asyncio.Task] = []
        self.closed = threading.Event()  # set once the worker dropped the run

    def check(self) -> None:
        if self.failure is not None:
            raise self.failure.copy()

    def fail(self, exc: ShuffleError) -> bool:
        """Record the run's first failure; False if it had one already."""
        with self.lock:
            if self.failure is not None:
                return False
            self.failure = exc
            return True

    def add(self, output: int, row: list[int], frames: list) -> None:
        """Keep one shard of ``output`` (one sent again replaces its first copy at unpack)."""
        with self.lock:
            self.check()
            if output in self.unpacked:
                raise ShuffleError(
                    self.id, "transfer", self.worker,
                    f"a shard of output {output} arrived after that output was unpacked",
                )  # fmt: skip
        try:
            self.buffers.append(output, row, frames)
        except ShuffleError as exc:
            self.fail(exc.copy())
            raise

    def take(self, output: int) -> OutputBuffer | None:
        """Output ``output``'s shards, handed over to its unpack (no longer held here)."""
        with self.lock:
            self.check()
            self.unpacked.add(output)
        return self.buffers.take(output)

    def close(self, exc: ShuffleError) -> None:
        """Fail the run (if it had not) and drop every shard and file it holds."""
        self.fail(exc)
        self.buffers.clear()
        self.closed.set()

    def superseded(self, wait: float = 0.0) -> bool:
        """Whether a newer run replaced this one, waiting up to ``wait`` seconds for the
        coordinator's word (a send to a worker that died fails before that word comes)."""
        self.closed.wait(wait)
        return isinstance(self.failure, RunSuperseded)
