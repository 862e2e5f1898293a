"""A shard as packed host bytes plus one row of integers, and an output built from many.

A shard crosses the comms and waits for its unpack as the host copies of its buffers
(per column: values or chars, offsets, mask; the layout of ``table.frames``), described
by one index row: ``[input, chunk, rows, then per column: data bytes, offsets bytes,
mask bytes or -1]``. The schema is the shuffle's, so nothing else is needed, and a
worker keeps rows of plain integers per output, not Python objects per shard, and only
the integers the schema does not imply (:class:`RowCodec`).

An output is allocated once at its exact size from the index alone (no shard read),
then each shard's bytes are copied in at the rows its input order gives it, in
whatever order the bytes are read: memory, then files, chunk by chunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from reference_impl.table import Column, Table
from reference_impl.table.dtypes import is_varlen, offsets_dtype, storage_dtype
from reference_impl.table.frames import encode

HEAD = 3  # input, chunk, rows
PER_COLUMN = 3  # data bytes, offsets bytes, mask bytes (-1: no mask)


def pack_grouped(
    table: Table, offsets: list[int], source: tuple[int, int]
) -> list[tuple[int, list[int], list[np.ndarray]]]:
    """``(output, index row, host frames)`` of each non-empty partition of ``table`` (rows
    grouped by partition, partition ``i`` at ``offsets[i]:offsets[i + 1]``).

    One d2h copy per device buffer of the whole table; each shard's frames are views of
    those host copies (only string offsets are new arrays, rebased to start at 0)."""
    _, frames = encode(table)
    per_column = []
    at = 0
    for col in table.columns:
        data = frames[at]
        at += 1
        offs = None
        if col.offsets is not None:
            offs = frames[at].view(offsets_dtype(col.type))
            at += 1
        valid = None
        if col.valid is not None:
            valid = frames[at]
            at += 1
        width = 0 if offs is not None else storage_dtype(col.type).itemsize
        per_column.append((data, offs, valid, width))
    out = []
    for output in range(len(offsets) - 1):
        r0, r1 = offsets[output], offsets[output + 1]
        if r1 == r0:
            continue
        row = [int(source[0]), int(source[1]), r1 - r0]
        shard: list[np.ndarray] = []
        for data, offs, valid, width in per_column:
            if offs is not None:
                c0, c1 = int(offs[r0]), int(offs[r1])
                chars = data[c0:c1]
                rebased = (offs[r0 : r1 + 1] - offs.dtype.type(c0)).view(np.uint8)
                shard += [chars, rebased]
                row += [c1 - c0, rebased.nbytes]
            else:
                shard.append(data[r0 * width : r1 * width])
                row += [(r1 - r0) * width, 0]
            if valid is not None:
                shard.append(valid[r0:r1])
                row.append(r1 - r0)
            else:
                row.append(-1)
        out.append((output, row, shard))
    return out


MASK_BITS = 30  # column flags a held word carries: it stays a positive int32


class RowCodec:
    """An index row held in as few integers as its layout allows.

    Of a full row's three integers a column, a fixed-width column's follow from the shard's
    row count, the column's width and whether it has a mask, and a string column's from the
    row count, its offsets' width, its mask flag and its chars. So a worker keeps ``input,
    chunk, rows``, one word of mask flags per 30 columns and one count per string column:
    16 bytes a shard for four fixed-width columns instead of 60, and a worker holds
    partitions**2 / workers rows (issue 46: 30 MiB at 1,024 x 1,024).

    The layout is learned from one full row (every row of a run has the run's schema);
    :meth:`decode` gives the full rows back."""

    def __init__(self, ncolumns: int, widths: list[int], string: list[bool]) -> None:
        self.ncolumns = ncolumns
        self.widths = np.asarray(widths, np.int64)  # data (fixed) or offsets (string) item size
        self.string = np.asarray(string, bool)
        self.words = -(-ncolumns // MASK_BITS)
        # per word, (flag, where the column's mask bytes are in a full row)
        self._flags = [[] for _ in range(self.words)]
        for j in range(ncolumns):
            self._flags[j // MASK_BITS].append((1 << (j % MASK_BITS), HEAD + PER_COLUMN * j + 2))
        self._chars_at = [HEAD + PER_COLUMN * j for j in range(ncolumns) if string[j]]
        self.width = HEAD + self.words + len(self._chars_at)  # integers a held row

    @classmethod
    def learn(cls, row: list[int]) -> RowCodec:
        n = row[2]
        ncolumns = (len(row) - HEAD) // PER_COLUMN
        if n <= 0 or len(row) != HEAD + PER_COLUMN * ncolumns:
            raise ValueError(f"not an index row of a non-empty shard: {row}")
        widths, string = [], []
        for j in range(ncolumns):
            data, offsets, _ = row[HEAD + PER_COLUMN * j : HEAD + PER_COLUMN * (j + 1)]
            string.append(offsets > 0)
            widths.append(offsets // (n + 1) if offsets > 0 else data // n)
        return cls(ncolumns, widths, string)

    def encode(self, row: list[int]) -> list[int]:
        held = row[:HEAD]
        for flags in self._flags:
            held.append(sum(flag for flag, at in flags if row[at] >= 0))
        held += [row[at] for at in self._chars_at]
        return held

    def decode(self, held: np.ndarray) -> np.ndarray:
        """The full int64 rows of ``held`` (one row of :attr:`width` integers each)."""
        held = held.reshape(-1, self.width).astype(np.int64, copy=False)
        n = held[:, 2]
        full = np.empty((len(held), HEAD + PER_COLUMN * self.ncolumns), np.int64)
        full[:, :HEAD] = held[:, :HEAD]
        chars = iter(range(HEAD + self.words, self.width))
        for j in range(self.ncolumns):
            at = HEAD + PER_COLUMN * j
            if self.string[j]:
                full[:, at] = held[:, next(chars)]
                full[:, at + 1] = (n + 1) * self.widths[j]
            else:
                full[:, at] = n * self.widths[j]
                full[:, at + 1] = 0
            flag = (held[:, HEAD + j // MASK_BITS] >> (j % MASK_BITS)) & 1
            full[:, at + 2] = np.where(flag == 1, n, -1)
        return full


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
        if is_varlen(f.type):
            total += (rows + 1) * offsets_dtype(f.type).itemsize + int(index[:, col].sum())
        else:
            total += rows * storage_dtype(f.type).itemsize
    return total


class OutputBuilder:
    """One output's buffers staged in host memory at their exact sizes; shards are copied
    in by index row, then each buffer goes to the device in one h2d copy.

    One upload per buffer, not one per shard and column: on a GPU many small copies cost
    their launch each, on the sim device an allocation each (~50 us), and the output's
    host staging is one partition, which the memory bound allows."""

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
        self.bufs: list[dict[str, np.ndarray]] = []
        self.at_char: list[np.ndarray | None] = []
        for j, f in enumerate(schema):
            col = HEAD + PER_COLUMN * j
            bufs: dict[str, np.ndarray] = {}
            if n and (index[:, col + 2] >= 0).any():
                bufs["valid"] = np.empty(self.rows, np.bool_)
            if is_varlen(f.type):
                chars = index[:, col]
                starts = np.zeros(n, np.int64)
                starts[order] = np.cumsum(chars[order]) - chars[order]
                self.at_char.append(starts)
                bufs["offsets"] = np.empty(self.rows + 1, offsets_dtype(f.type))
                bufs["data"] = np.empty(int(chars.sum()) if n else 0, np.uint8)
            else:
                self.at_char.append(None)
                bufs["data"] = np.empty(self.rows, storage_dtype(f.type))
            self.bufs.append(bufs)

    def place(self, i: int, row: np.ndarray, payload: memoryview, start: int) -> None:
        """Copy shard ``i`` (index row ``row``, its bytes at ``payload[start:]``) into place."""
        n, r0 = int(row[2]), int(self.at_row[i])
        lens = row[HEAD:].tolist()
        at = start
        for j, bufs in enumerate(self.bufs):
            data_len, off_len, valid_len = lens[PER_COLUMN * j : PER_COLUMN * (j + 1)]
            data = bufs["data"]
            if "offsets" in bufs:
                c0 = int(self.at_char[j][i])  # type: ignore[index]
                data[c0 : c0 + data_len] = np.frombuffer(payload, np.uint8, data_len, at)
                at += data_len
                odt = bufs["offsets"].dtype
                offsets = np.frombuffer(payload, odt, off_len // odt.itemsize, at)
                np.add(offsets[:-1], odt.type(c0), out=bufs["offsets"][r0 : r0 + n])
                at += off_len
            else:
                data[r0 : r0 + n] = np.frombuffer(payload, data.dtype, n, at)
                at += data_len
            if "valid" in bufs:
                if valid_len >= 0:
                    bufs["valid"][r0 : r0 + n] = np.frombuffer(payload, np.bool_, n, at)
                else:
                    bufs["valid"][r0 : r0 + n] = True
            at += max(valid_len, 0)

    def finish(self) -> Table:
        """Upload every buffer (one h2d copy each) and let the host staging go."""
        cols = {}
        bufs_list, self.bufs = self.bufs, []
        for f, bufs in zip(self.schema, bufs_list, strict=True):
            if "offsets" in bufs:
                bufs["offsets"][self.rows] = bufs["data"].shape[0]
            up = {k: self.device.asarray(v) for k, v in bufs.items()}
            bufs.clear()
            cols[f.name] = Column.trusted(
                self.device, f.type, up["data"], up.get("valid"), up.get("offsets"), f.nullable
            )
        metadata = dict(self.schema.metadata) if self.schema.metadata else None
        return Table.trusted(self.device, cols, self.rows, metadata)


def empty_table(schema: pa.Schema, device: Any) -> Table:
    return Table.from_arrow(schema.empty_table(), device)


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
