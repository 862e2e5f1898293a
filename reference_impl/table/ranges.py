"""Byte ranges of host buffers, gathered and scattered with numpy, never row by row.

Variable-width data (Arrow's bitmaps and offsets, the nested encoding of :mod:`.nested`)
is many short ranges of one buffer. Each helper turns the ranges into one slice (when they
leave no gap), one index array (when they are few bytes, or all one small width: a
broadcast sum), or one boolean mask (when they cover much of the buffer: a mask costs a
byte per buffer byte, an index eight per byte taken), so a call is a few whole-buffer
numpy passes whatever the number of rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_MASK_SHARE = 8  # a mask beats an index once the ranges cover 1/8 of the buffer
_BROADCAST = 16  # ranges of one width up to this: positions by a broadcast sum


def rows(matrix: np.ndarray) -> np.ndarray:
    """A C-contiguous 2-D uint8 array as one void item per row: selecting rows by a mask
    is then one 1-D copy, several times faster than 2-D boolean indexing."""
    return matrix.view(f"V{matrix.shape[1]}").reshape(len(matrix))


def unpack_bits(buf: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Arrow's LSB-first bitmap bits ``offset:offset+n`` as bools."""
    if n == 0:
        return np.empty(0, np.bool_)
    first, last = offset // 8, (offset + n + 7) // 8
    raw = np.frombuffer(buf, np.uint8, count=last - first, offset=first)
    shift = offset % 8
    return np.unpackbits(raw, bitorder="little")[shift : shift + n].view(np.bool_)


def exclusive_cumsum(lens: np.ndarray) -> np.ndarray:
    """``starts`` of back-to-back pieces of ``lens`` (int64, starting at 0)."""
    out = np.empty(len(lens), np.int64)
    if len(lens):
        out[0] = 0
        np.cumsum(lens[:-1], out=out[1:])
    return out


def range_index(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] + 0 .. lens[i] - 1`` for each ``i``, back to back."""
    lens = lens.astype(np.int64, copy=False)
    total = int(lens.sum())
    shift = np.repeat(starts.astype(np.int64, copy=False) - exclusive_cumsum(lens), lens)
    return shift + np.arange(total, dtype=np.int64)


def range_mask(starts: np.ndarray, lens: np.ndarray, size: int) -> np.ndarray:
    """A bool mask of ``size`` True exactly in the ranges, which must be sorted and
    disjoint (as each level of the nested encoding lays them): a ValueError otherwise."""
    keep = lens > 0
    starts = starts[keep].astype(np.int64, copy=False)
    lens = lens[keep].astype(np.int64, copy=False)
    n = len(starts)
    if n == 0:
        return np.zeros(size, np.bool_)
    ends = starts + lens
    counts = np.empty(2 * n + 1, np.int64)
    counts[0] = starts[0]
    counts[2:-1:2] = starts[1:] - ends[:-1]  # the gaps
    counts[1::2] = lens
    counts[-1] = size - ends[-1]
    if (counts < 0).any():
        raise ValueError("byte ranges overlap, run backwards or past the buffer")
    pattern = np.zeros(2 * n + 1, np.bool_)
    pattern[1::2] = True
    return np.repeat(pattern, counts)


def _use_mask(total: int, size: int) -> bool:
    return total * _MASK_SHARE >= size


def _one_width(lens: np.ndarray) -> int | None:
    """The width of every non-empty range when they share one up to ``_BROADCAST``
    (validity bytes, counts, fixed-width values): their positions are then one broadcast
    sum, no per-range repeat."""
    widths = lens[lens > 0]
    if len(widths) == 0 or widths[0] > _BROADCAST or not (widths == widths[0]).all():
        return None
    return int(widths[0])


def positions(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The buffer positions of the ranges' bytes, back to back (int64)."""
    width = _one_width(lens)
    if width is None:
        return range_index(starts, lens)
    at = starts[lens > 0].astype(np.int64, copy=False)
    return at if width == 1 else (at[:, None] + np.arange(width)).reshape(-1)


def _contiguous(starts: np.ndarray, lens: np.ndarray) -> int | None:
    """The first byte when the (sorted, disjoint) ranges leave no gap, else None."""
    keep = lens > 0
    at, lens = starts[keep], lens[keep]
    if len(at) == 0 or not (at[1:] == at[:-1] + lens[:-1]).all():
        return None
    return int(at[0])


def take_ranges(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The bytes of the (sorted, disjoint) ranges of ``buf``, back to back."""
    total = int(lens.sum()) if len(lens) else 0
    if total == 0:
        return np.empty(0, buf.dtype)
    first = _contiguous(starts, lens)
    if first is not None:
        return buf[first : first + total]
    if _one_width(lens) is None and _use_mask(total, len(buf)):
        return buf[range_mask(starts, lens, len(buf))]
    return buf[positions(starts, lens)]


def interleave(streams: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(lens, bytes)`` of elements made of one piece of each stream, in stream order.

    Stream ``s`` is ``(lens_s, data_s)``: element ``i``'s piece is ``lens_s[i]`` bytes,
    the pieces back to back in ``data_s``. Element ``i`` is piece ``i`` of stream 0, then
    of stream 1, ...; ``lens`` are the elements' sizes. Every stream but one is written at
    its positions; that one (the largest of varying widths, whose positions cost most)
    fills what is left, in one masked copy."""
    lens = np.zeros(len(streams[0][0]), np.int64)
    for piece_lens, _ in streams:
        lens += piece_lens
    out = np.empty(int(lens.sum()), np.uint8)
    varying = [_one_width(piece_lens) is None for piece_lens, _ in streams]
    filler = max(range(len(streams)), key=lambda s: (varying[s], len(streams[s][1])))
    left = np.ones(len(out), np.bool_)
    at = exclusive_cumsum(lens)
    for s, (piece_lens, data) in enumerate(streams):
        if s != filler and len(data):
            where = positions(at, piece_lens)
            out[where] = data
            left[where] = False
        at = at + piece_lens
    out[left] = streams[filler][1]
    return lens, out
