"""A shard as packed host bytes plus one row of integers, and an output built from many.

A shard crosses the comms and waits for its unpack as the host copies of its buffers
(per column: values or chars, offsets, mask; the layout of ``table.frames``), described
by one index row: ``[input, chunk, rows, then per column: data bytes, offsets bytes,
mask bytes or -1]``. The schema is the shuffle's, so nothing else is needed, and a
worker keeps rows of plain integers per output, not Python objects per shard.

An output is allocated once at its exact size from the index alone (no shard read),
then each shard's bytes are copied in at the rows its input order gives it, in
whatever order the bytes are read: memory, then files, chunk by chunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from reference_impl.table import Column, Table, devops
from reference_impl.table.dtypes import is_string, offsets_dtype, storage_dtype
from reference_impl.table.frames import encode

HEAD = 3  # input, chunk, rows
PER_COLUMN = 3  # data bytes, offsets bytes, mask bytes (-1: no mask)


def row_width(schema: pa.Schema) -> int:
    return HEAD + PER_COLUMN * len(schema)


def pack(table: Table, source: tuple[int, int]) -> tuple[list[int], list[np.ndarray]]:
    """``(index row, host frames)`` of ``table``: one d2h copy per device buffer."""
    _, frames = encode(table)
    row = [int(source[0]), int(source[1]), table.num_rows]
    at = 0
    for col in table.columns:
        data = frames[at].nbytes
        at += 1
        offsets = 0
        if col.offsets is not None:
            offsets = frames[at].nbytes
            at += 1
        valid = -1
        if col.valid is not None:
            valid = frames[at].nbytes
            at += 1
        row += [data, offsets, valid]
    return row, frames


def record_nbytes(index: np.ndarray) -> np.ndarray:
    """Packed bytes of each shard (one per index row)."""
    lens = index[:, HEAD:].reshape(len(index), -1, PER_COLUMN)
    return lens[:, :, 0].sum(axis=1) + lens[:, :, 1].sum(axis=1) + np.maximum(lens[:, :, 2], 0).sum(axis=1)


def latest(index: np.ndarray) -> np.ndarray:
    """Which index rows count: a shard sent again (an input computed twice) replaces its
    first copy, so the last row of each (input, chunk) counts, the others not."""
    keep = np.zeros(len(index), bool)
    if len(index):
        seen: dict[tuple[int, int], int] = {}
        for i, (inp, chunk) in enumerate(index[:, :2].tolist()):
            seen[(inp, chunk)] = i
        keep[list(seen.values())] = True
    return keep


def output_nbytes(schema: pa.Schema, index: np.ndarray) -> int:
    """Device bytes of the output these shards make (what the unpack allocates); ``index``
    holds only the rows that count (:func:`latest`)."""
    rows = int(index[:, 2].sum())
    total = 0
    for j, f in enumerate(schema):
        col = HEAD + PER_COLUMN * j
        if (index[:, col + 2] >= 0).any():
            total += rows
        if is_string(f.type):
            total += (rows + 1) * offsets_dtype(f.type).itemsize + int(index[:, col].sum())
        else:
            total += rows * storage_dtype(f.type).itemsize
    return total


class OutputBuilder:
    """One output's device buffers, allocated at once; shards are placed into them by index row."""

    def __init__(self, schema: pa.Schema, index: np.ndarray, device: Any) -> None:
        self.schema, self.device = schema, device
        n = len(index)
        self.keep = latest(index)
        index = np.where(self.keep[:, None], index, 0)  # rows that do not count add nothing
        order = np.lexsort((index[:, 1], index[:, 0])) if n else np.zeros(0, np.int64)
        self.rows = int(index[:, 2].sum()) if n else 0
        # where each shard (by index row) lands: its first row, and per string column its
        # first char, in input order
        self.at_row = np.zeros(n, np.int64)
        self.at_row[order] = np.cumsum(index[order, 2]) - index[order, 2]
        self.bufs: list[dict[str, Any]] = []
        self.at_char: list[np.ndarray | None] = []
        for j, f in enumerate(schema):
            col = HEAD + PER_COLUMN * j
            bufs: dict[str, Any] = {}
            if n and (index[:, col + 2] >= 0).any():
                bufs["valid"] = devops.empty(device, self.rows, np.bool_)
            if is_string(f.type):
                chars = index[:, col]
                starts = np.zeros(n, np.int64)
                starts[order] = np.cumsum(chars[order]) - chars[order]
                self.at_char.append(starts)
                bufs["offsets"] = devops.empty(device, self.rows + 1, offsets_dtype(f.type))
                bufs["data"] = devops.empty(device, int(chars.sum()) if n else 0, np.uint8)
            else:
                self.at_char.append(None)
                bufs["data"] = devops.empty(device, self.rows, storage_dtype(f.type))
            self.bufs.append(bufs)

    def _upload(self, payload: memoryview, start: int, nbytes: int, dtype: Any) -> Any:
        host = np.frombuffer(payload, dtype=np.uint8, count=nbytes, offset=start)
        return self.device.asarray(host.view(dtype))

    def place(self, i: int, row: np.ndarray, payload: memoryview, start: int) -> None:
        """Copy shard ``i`` (index row ``row``, its bytes at ``payload[start:]``) into place."""
        n, r0 = int(row[2]), int(self.at_row[i])
        at = start
        for j, f in enumerate(self.schema):
            data_len, off_len, valid_len = (int(x) for x in row[HEAD + PER_COLUMN * j : HEAD + PER_COLUMN * (j + 1)])
            bufs = self.bufs[j]
            if is_string(f.type):
                c0 = int(self.at_char[j][i])  # type: ignore[index]
                if data_len:
                    bufs["data"][c0 : c0 + data_len] = self._upload(payload, at, data_len, np.uint8)
                at += data_len
                odt = offsets_dtype(f.type)
                offsets = self._upload(payload, at, off_len, odt)
                at += off_len
                if n:
                    xp = devops.namespace(self.device)
                    xp.add(offsets[:-1], odt.type(c0), out=bufs["offsets"][r0 : r0 + n])
                del offsets
            else:
                if n:
                    bufs["data"][r0 : r0 + n] = self._upload(payload, at, data_len, bufs["data"].dtype)
                at += data_len
            if "valid" in bufs and n:
                if valid_len >= 0:
                    bufs["valid"][r0 : r0 + n] = self._upload(payload, at, valid_len, np.bool_)
                else:
                    bufs["valid"][r0 : r0 + n] = True
            at += max(valid_len, 0)

    def finish(self) -> Table:
        cols = {}
        for j, f in enumerate(self.schema):
            bufs = self.bufs[j]
            if "offsets" in bufs:
                bufs["offsets"][self.rows] = bufs["data"].shape[0]
            cols[f.name] = Column._trusted(
                self.device, f.type, bufs["data"], bufs.get("valid"), bufs.get("offsets"), f.nullable
            )
        metadata = dict(self.schema.metadata) if self.schema.metadata else None
        self.bufs = []
        return Table._trusted(self.device, cols, self.rows, metadata)


def build(
    schema: pa.Schema, index: np.ndarray, pieces: Iterable[tuple[int, memoryview]], device: Any
) -> Table:
    """The output of shards ``index``; ``pieces`` yields ``(first row, bytes)``: the packed
    bytes of index rows ``first, first + 1, ...`` back to back, in any order of pieces."""
    builder = OutputBuilder(schema, index, device)
    sizes = record_nbytes(index) if len(index) else np.zeros(0, np.int64)
    for first, payload in pieces:
        at, i = 0, first
        while at < len(payload):
            if builder.keep[i]:
                builder.place(i, index[i], payload, at)
            at += int(sizes[i])
            i += 1
    return builder.finish()
