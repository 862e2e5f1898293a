"""Deterministic input partitions and order-free per-row checksums.

Every row has a unique ``row_id``; its checksum mixes all of its values, so the
(count, sum, xor) of the row checksums going in must equal those coming out: a row
lost, duplicated, invented or changed shows, whatever order the outputs are in.
Vectorised with numpy, so a few GiB check in seconds.

The shuffle scenario computes them where the tables are (issue 24): every input is made on a
worker (:func:`make_table` from the seed: nothing travels from the caller) and every output is
summarised on the worker holding it (:func:`summarize`): its digest, schema, distinct keys
(for co-location) and, per bucket of row ids, the count and the sum of the row checksums, so
that a difference still names the row-id ranges it is in. Only the summaries travel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from conformance.shuffle.tables import ROW_ID

KEY = "k0"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def make_table(seed: int, index: int, rows: int, *, keys: int = 1 << 40) -> pa.Table:
    """Input partition ``index`` of a run: ``k0`` int64 in [0, keys), ``p0`` float64,
    ``row_id`` = index * rows + i."""
    rng = np.random.default_rng([seed, index])
    return pa.table(
        {
            KEY: rng.integers(0, keys, rows, dtype=np.int64),
            "p0": rng.random(rows),
            ROW_ID: np.arange(index * rows, (index + 1) * rows, dtype=np.int64),
        }
    )


def _mix64(x: np.ndarray) -> np.ndarray:
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _bits(column: pa.ChunkedArray) -> np.ndarray:
    if column.null_count:
        raise ValueError("stress tables have no nulls")
    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    values = arr.to_numpy(zero_copy_only=False)
    if values.dtype.itemsize != 8:
        raise ValueError(f"stress checksums take 8-byte columns, got {arr.type}")
    return np.ascontiguousarray(values).view(np.uint64)


def row_checksums(table: pa.Table, names: Sequence[str]) -> np.ndarray:
    """One uint64 per row, mixing the columns ``names`` in that order."""
    h = np.zeros(table.num_rows, np.uint64)
    with np.errstate(over="ignore"):
        for name in names:
            h = _mix64(h ^ _bits(table.column(name)))
    return h


@dataclass(frozen=True)
class Digest:
    """Order-free summary of a set of rows: how many, and the sum and xor of their checksums."""

    rows: int = 0
    total: int = 0
    xor: int = 0

    def __add__(self, other: Digest) -> Digest:
        return Digest(
            self.rows + other.rows, (self.total + other.total) % 2**64, self.xor ^ other.xor
        )

    def as_dict(self) -> dict[str, str | int]:
        return {"rows": self.rows, "sum": f"{self.total:016x}", "xor": f"{self.xor:016x}"}


def digest(table: pa.Table, names: Sequence[str]) -> Digest:
    h = row_checksums(table, names)
    with np.errstate(over="ignore"):
        total = int(h.sum(dtype=np.uint64)) if len(h) else 0
    return Digest(len(h), total, int(np.bitwise_xor.reduce(h)) if len(h) else 0)


@dataclass(frozen=True)
class Summary:
    """One table as a worker describes it: rows and digest, schema, the sorted distinct
    ``key`` values, and per bucket of ``width`` row ids (``row_id // width``) the rows and the
    sum of their checksums."""

    digest: Digest
    schema: pa.Schema
    keys: np.ndarray
    buckets: np.ndarray
    counts: np.ndarray
    sums: np.ndarray


def bucket_width(total_rows: int, buckets: int = 4096) -> int:
    """Row ids per bucket: at most ``buckets`` buckets over ``total_rows`` rows."""
    return max(1, -(-total_rows // buckets))


def summarize(table: pa.Table, names: Sequence[str], width: int, key: str = KEY) -> Summary:
    """Task: ``table`` summarised where it is (see :class:`Summary`)."""
    h = row_checksums(table, names)
    if len(h):
        ids = _bits(table.column(ROW_ID)).view(np.int64)
        order = np.argsort(ids // width, kind="stable")
        b = (ids // width)[order]
        starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
        buckets = b[starts]
        counts = np.diff(np.r_[starts, len(b)]).astype(np.int64)
        with np.errstate(over="ignore"):
            sums = np.add.reduceat(h[order], starts).astype(np.uint64)
        keys = np.unique(_bits(table.column(key)).view(np.int64))
    else:
        buckets = counts = keys = np.empty(0, np.int64)
        sums = np.empty(0, np.uint64)
    return Summary(digest(table, names), table.schema, keys, buckets, counts, sums)


def bucket_totals(summaries: Sequence[Summary]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(buckets, rows, checksum sums)`` over all ``summaries``, by bucket."""
    if not summaries:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint64)
    b = np.concatenate([s.buckets for s in summaries])
    c = np.concatenate([s.counts for s in summaries])
    h = np.concatenate([s.sums for s in summaries]).astype(np.uint64)
    uniq, inv = np.unique(b, return_inverse=True)
    rows = np.zeros(len(uniq), np.int64)
    np.add.at(rows, inv, c)
    sums = np.zeros(len(uniq), np.uint64)
    with np.errstate(over="ignore"):
        np.add.at(sums, inv, h)
    return uniq, rows, sums


def bucket_diff(inputs: Sequence[Summary], outputs: Sequence[Summary], width: int) -> str:
    """The row-id ranges whose rows or checksums differ between inputs and outputs."""
    bi, ri, si = bucket_totals(inputs)
    bo, ro, so = bucket_totals(outputs)
    everything = np.union1d(bi, bo)
    rows_in = np.zeros(len(everything), np.int64)
    rows_out = np.zeros(len(everything), np.int64)
    sums_in = np.zeros(len(everything), np.uint64)
    sums_out = np.zeros(len(everything), np.uint64)
    rows_in[np.searchsorted(everything, bi)] = ri
    sums_in[np.searchsorted(everything, bi)] = si
    rows_out[np.searchsorted(everything, bo)] = ro
    sums_out[np.searchsorted(everything, bo)] = so
    bad = np.flatnonzero((rows_in != rows_out) | (sums_in != sums_out))
    if not len(bad):
        return "no row-id range differs"
    parts = []
    for i in bad[:5]:
        lo = int(everything[i]) * width
        what = (
            f"{rows_in[i]} rows in, {rows_out[i]} out"
            if rows_in[i] != rows_out[i]
            else "rows changed"
        )
        parts.append(f"row ids [{lo}, {lo + width}): {what}")
    more = f" (+{len(bad) - 5} more ranges)" if len(bad) > 5 else ""
    return f"{len(bad)} row-id ranges differ: " + "; ".join(parts) + more


def summary_problems(
    inputs: Sequence[Summary],
    outputs: Sequence[object],
    npartitions: int,
    schema: pa.Schema,
    width: int,
) -> list[str]:
    """What is wrong with a shuffle's outputs, from their summaries alone: count, schema,
    co-location, then the digests (and the row-id ranges that differ)."""
    problems = []
    if len(outputs) != npartitions:
        problems.append(f"{len(outputs)} outputs for npartitions={npartitions}")
    bad = [i for i, s in enumerate(outputs) if not isinstance(s, Summary)]
    if bad:
        return [*problems, f"outputs {bad[:5]} are not pyarrow Tables"]
    for i, s in enumerate(outputs):
        if not s.schema.equals(schema, check_metadata=False):
            return [*problems, f"output {i} has schema {s.schema}, expected {schema}"]
    split = split_keys([s.keys for s in outputs])
    if len(split):
        problems.append(
            f"{len(split)} keys are split over several outputs (not co-located), e.g. "
            f"{KEY}={int(split[0])}"
        )
    want = sum((s.digest for s in inputs), Digest())
    got = sum((s.digest for s in outputs), Digest())
    if got != want:
        problems.append(
            f"per-row checksums differ: in {want.as_dict()}, out {got.as_dict()} "
            f"({bucket_diff(inputs, outputs, width)})"
        )
    return problems


def digest_all(tables: Sequence[pa.Table], names: Sequence[str]) -> Digest:
    out = Digest()
    for t in tables:
        out = out + digest(t, names)
    return out


def output_problems(
    outputs: Sequence[object], npartitions: int, schema: pa.Schema, key: str = KEY
) -> list[str]:
    """Structural invariants of a shuffle's outputs: their count, types, schema, and every
    key in exactly one output (co-location)."""
    problems = []
    if len(outputs) != npartitions:
        problems.append(f"{len(outputs)} outputs for npartitions={npartitions}")
    bad = [i for i, t in enumerate(outputs) if not isinstance(t, pa.Table)]
    if bad:
        return [*problems, f"outputs {bad[:5]} are not pyarrow Tables"]
    for i, t in enumerate(outputs):
        if not t.schema.equals(schema, check_metadata=False):
            problems.append(f"output {i} has schema {t.schema}, expected {schema}")
            return problems
    split = _split_keys(outputs, key)
    if len(split):
        problems.append(
            f"{len(split)} keys are split over several outputs (not co-located), e.g. "
            f"{key}={int(split[0])}"
        )
    return problems


def _split_keys(outputs: Sequence[pa.Table], key: str) -> np.ndarray:
    """The keys found in more than one output (see :func:`split_keys`)."""
    return split_keys([_bits(t.column(key)).view(np.int64) for t in outputs])


def split_keys(keys_per_output: Sequence[np.ndarray]) -> np.ndarray:
    """The keys found in more than one output, given each output's int64 keys. One sort of
    (key, output) pairs packed in an int64 when the keys leave room for the output number
    (stress keys are below 2^40), else a unique per output: 89.5M rows took 144 s that way,
    the packed sort a fraction of it."""
    outputs = keys_per_output
    parts = [(i, k) for i, k in enumerate(outputs) if len(k)]
    if not parts:
        return np.empty(0, np.int64)
    bits = max(1, (len(outputs) - 1).bit_length())
    keys = np.concatenate([k for _, k in parts])
    if keys.min() >= 0 and int(keys.max()) < 1 << (63 - bits):
        packed = keys << bits
        del keys
        packed |= np.repeat(np.array([i for i, _ in parts], np.int64), [len(k) for _, k in parts])
        packed.sort()
        same_key = (packed[1:] >> bits) == (packed[:-1] >> bits)
        same_key &= packed[1:] != packed[:-1]  # equal keys, other outputs
        return np.unique(packed[1:][same_key] >> bits)
    uniques = np.concatenate([np.unique(k) for _, k in parts])
    values, counts = np.unique(uniques, return_counts=True)
    return values[counts > 1]


def row_diff(inputs: Sequence[pa.Table], outputs: Sequence[pa.Table], names: Sequence[str]) -> str:
    """Which rows differ, by row id (only called once the digests disagree)."""

    def by_id(tables):
        ids = [_bits(t.column(ROW_ID)).view(np.int64) for t in tables if t.num_rows]
        hs = [row_checksums(t, names) for t in tables if t.num_rows]
        return (np.concatenate(ids) if ids else np.empty(0, np.int64)), (
            np.concatenate(hs) if hs else np.empty(0, np.uint64)
        )

    in_ids, in_h = by_id(inputs)
    out_ids, out_h = by_id(outputs)
    uniq, counts = np.unique(out_ids, return_counts=True)
    lost = np.setdiff1d(in_ids, out_ids)
    extra = np.setdiff1d(out_ids, in_ids)
    twice = uniq[counts > 1]
    order_in, order_out = np.argsort(in_ids), np.argsort(out_ids)
    common, ia, ib = np.intersect1d(in_ids[order_in], out_ids[order_out], return_indices=True)
    changed = common[in_h[order_in][ia] != out_h[order_out][ib]]
    parts = []
    for what, ids in (("lost", lost), ("invented", extra), ("duplicated", twice), ("changed", changed)):
        if len(ids):
            parts.append(f"{len(ids)} rows {what} (row ids {ids[:5].tolist()})")
    return "; ".join(parts) or "no row-level difference found"
