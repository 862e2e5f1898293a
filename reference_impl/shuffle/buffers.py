"""Received shards, one buffer per output: host bytes, then one append-only file.

Every shard of output ``i`` that reaches its worker is appended to output ``i``'s
buffer: its packed bytes to one ``bytearray``, its index row to one ``array``. When the
worker's shards exceed their host allowance (:class:`~.limiter.HostBudget`), the largest
buffers are appended to their files (``<dir>/<output>.shards``, 0600 in a 0700
directory), so a worker holds a few objects per output, in memory or on disk, however
many inputs there are (one store entry and one spill file per shard cost ~9 KiB of RSS
each, and there are inputs x outputs of them).

Each write is one chunk with a keyed BLAKE2b digest (key per run), checked when the
unpack reads the chunk back, before a byte of it is used: a truncated or altered file is
a ShuffleError naming the file, never a wrong output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from .errors import ShuffleClosedError, ShuffleError
from .limiter import HostBudget
from .packed import RowCodec, record_nbytes


@dataclass
class Chunk:
    first: int  # index row of its first shard
    count: int
    offset: int  # in the file
    nbytes: int
    digest: bytes


INT32 = (-(2**31), 2**31 - 1)


@dataclass
class OutputBuffer:
    """One output's shards on its worker: ``index`` rows; bytes in ``memory``, then the file.

    A worker holds one index row per shard it receives, partitions**2 / workers of them,
    the one cost here that grows with the partition count squared: rows are held as
    :class:`~.packed.RowCodec` makes them (a few integers, not three a column), int32 until
    a value does not fit (a string column's chars past 2 GiB in one shard). At 1,024 x
    1,024, full rows held 60 MiB per worker as int64, 30 as int32."""

    codec: RowCodec
    index: array = field(default_factory=lambda: array("i"))
    memory: bytearray = field(default_factory=bytearray)
    in_file: int = 0  # index rows whose bytes are in the file (a prefix: writes keep order)
    file_bytes: int = 0
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def n_shards(self) -> int:
        return len(self.index) // self.codec.width

    def add_row(self, row: list[int]) -> None:
        held = self.codec.encode(row)
        if self.index.typecode == "i" and (min(held) < INT32[0] or max(held) > INT32[1]):
            self.index = array("q", self.index)
        self.index.extend(held)

    def rows(self) -> np.ndarray:
        """The full index rows, int64, checked against the bytes held: a row the codec
        could not give back whole would misplace every later shard's bytes."""
        held = np.frombuffer(self.index, dtype=np.int32 if self.index.typecode == "i" else np.int64)
        rows = self.codec.decode(held)
        described = int(record_nbytes(rows).sum()) if len(rows) else 0
        if described != self.file_bytes + len(self.memory):
            raise ValueError(
                f"its {len(rows)} index rows describe {described:,} bytes, but "
                f"{self.file_bytes + len(self.memory):,} are held"
            )
        return rows


class RunBuffers:
    """One run's output buffers on one worker, their files and their host bytes."""

    def __init__(self, shuffle_id: str, worker: str, directory: str, budget: HostBudget) -> None:
        self.id, self.worker = shuffle_id, worker
        self.directory = directory
        self.budget = budget
        self.outputs: dict[int, OutputBuffer] = {}
        self.held = 0  # bytes in memory over all outputs (this run's part of the budget)
        self.write_errors = 0
        self.closed = False
        self._key = os.urandom(32)
        self._lock = threading.Lock()

    def _check_open(self) -> None:
        if self.closed:  # a late shard must not recreate the removed directory
            raise ShuffleClosedError(self.id, "transfer", self.worker, "the run was closed")

    def path(self, output: int) -> str:
        return os.path.join(self.directory, f"{output}.shards")

    def append(self, output: int, row: list[int], frames: list) -> None:
        """Keep one shard of ``output``; may write the largest buffers out first."""
        with self._lock:
            self._check_open()
            buf = self.outputs.get(output)
            if buf is None:
                buf = self.outputs[output] = OutputBuffer(RowCodec.learn(row))
            before = len(buf.memory)
            for f in frames:
                buf.memory += memoryview(f)  # not ``+= f``: numpy would broadcast an add
            buf.add_row(row)
            added = len(buf.memory) - before
            self.held += added
        self.budget.add(added)
        allowance = self.budget.allowance()  # one read of the store's counters per shard
        if self.budget.buffered > allowance:
            self.write_out(self.budget.buffered - allowance // 2)

    def write_out(self, nbytes: int) -> int:
        """Append the largest memory buffers to their files until ``nbytes`` are written."""
        written = 0
        with self._lock:
            self._check_open()
            try:
                for output in sorted(self.outputs, key=lambda o: -len(self.outputs[o].memory)):
                    if written >= nbytes:
                        break
                    buf = self.outputs[output]
                    if buf.memory:
                        written += self._write(output, buf)
            finally:
                self.held -= written
                self.budget.add(-written)
        return written

    def _write(self, output: int, buf: OutputBuffer) -> int:
        data = buf.memory
        path = self.path(output)
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError as exc:
            self.write_errors += 1
            # The bytes stay in memory (nothing is lost); the shuffle fails at once rather
            # than hold every shard of the worker in host memory past its allowance.
            _truncate(path, buf.file_bytes)
            raise ShuffleError(
                self.id, "transfer", self.worker,
                f"the disk is full: writing {len(data):,} bytes of output {output}'s shards to "
                f"{path} failed: {exc!r}",
            ) from exc  # fmt: skip
        digest = hashlib.blake2b(data, key=self._key, digest_size=16).digest()
        first = buf.in_file
        count = buf.n_shards - first
        buf.chunks.append(Chunk(first, count, buf.file_bytes, len(data), digest))
        buf.in_file += count
        buf.file_bytes += len(data)
        buf.memory = bytearray()
        return len(data)

    def take(self, output: int) -> OutputBuffer | None:
        """Output ``output``'s buffer, handed over: its memory no longer counts here."""
        with self._lock:
            buf = self.outputs.pop(output, None)
            if buf is not None:
                self.held -= len(buf.memory)
        if buf is not None:
            self.budget.add(-len(buf.memory))
        return buf

    def read(self, output: int, buf: OutputBuffer, phase: str = "unpack") -> Iterator[tuple[int, memoryview]]:
        """``(first index row, bytes)`` of ``buf``: each file chunk checked, then memory."""
        path = self.path(output)
        if buf.chunks:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError as exc:
                raise self._unreadable(
                    output, path, phase, f"the file is missing ({buf.file_bytes:,} bytes were written)"
                ) from exc
            except OSError as exc:
                raise self._unreadable(output, path, phase, f"cannot open it: {exc!r}") from exc
            try:
                size = os.fstat(fd).st_size
                if size != buf.file_bytes:
                    raise self._unreadable(
                        output, path, phase, f"it holds {size:,} bytes, {buf.file_bytes:,} were written"
                    )
                for chunk in buf.chunks:
                    data = os.pread(fd, chunk.nbytes, chunk.offset)
                    digest = hashlib.blake2b(data, key=self._key, digest_size=16).digest()
                    if len(data) != chunk.nbytes or digest != chunk.digest:
                        raise self._unreadable(
                            output, path, phase,
                            f"the chunk at byte {chunk.offset:,} ({chunk.nbytes:,} bytes) does "
                            "not match what was written",
                        )  # fmt: skip
                    yield chunk.first, memoryview(data)
                    del data
            finally:
                os.close(fd)
        if buf.memory:
            yield buf.in_file, memoryview(buf.memory)

    def _unreadable(self, output: int, path: str, phase: str, why: str) -> ShuffleError:
        return ShuffleError(
            self.id, phase, self.worker, f"the shards of output {output} in {path} are unreadable: {why}"
        )

    def remove(self, output: int) -> None:
        try:
            os.unlink(self.path(output))
        except FileNotFoundError:
            pass

    def clear(self) -> None:
        """Drop every buffer and the run's directory (idempotent)."""
        with self._lock:
            self.closed = True
            held, self.held = self.held, 0
            self.outputs.clear()
            shutil.rmtree(self.directory, ignore_errors=True)
        self.budget.add(-held)

    def n_shards(self) -> int:
        with self._lock:
            return sum(b.n_shards for b in self.outputs.values())


def _truncate(path: str, nbytes: int) -> None:
    """Cut a partial write back to what the chunks cover."""
    try:
        os.truncate(path, nbytes)
    except OSError:
        pass
