"""Row operations on columns: gather (take), concatenate and compare.

Written once against the array namespace of the device (numpy on sim, whose
SimArray results land on the ledger; CuPy on CUDA), vectorised over rows.
Variable-width gathers map every output char to its source char with one
``searchsorted`` over the new offsets, so no loop runs over rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from . import devops
from .column import Column

INT32_MAX = 2**31 - 1


def gather(col: Column, indices: Any) -> Column:
    """Rows ``indices`` (a checked, in-range device int array) as a new column."""
    valid = None if col.valid is None else col.valid[indices]
    if col.offsets is None:
        return Column.trusted(col.device, col.type, col.data[indices], valid, None, col.nullable)
    offsets, chars = _gather_strings(col.device, col.offsets, col.data, indices, col.type)
    return Column.trusted(col.device, col.type, chars, valid, offsets, col.nullable)


def _gather_strings(device: Any, offsets: Any, chars: Any, indices: Any, type_: Any):
    xp = devops.namespace(device)
    starts = offsets[indices].astype(np.int64)
    lens = offsets[indices + 1].astype(np.int64) - starts
    ends = xp.cumsum(lens)
    total = devops.to_int(ends[-1]) if len(ends) else 0
    odtype = offsets.dtype
    _check_fits(total, odtype, type_)
    new_offsets = devops.empty(device, len(lens) + 1, odtype)
    new_offsets[:1] = 0
    new_offsets[1:] = ends
    if total == 0:
        return new_offsets, devops.empty(device, 0, np.uint8)
    pos = devops.arange(device, total, np.int64)
    row = xp.searchsorted(ends, pos, side="right")  # the output row of each char
    src = pos - (ends[row] - lens[row]) + starts[row]
    return new_offsets, chars[src]


def _check_fits(total: int, odtype: Any, type_: Any) -> None:
    if np.dtype(odtype) == np.int32 and total > INT32_MAX:
        raise OverflowError(
            f"{total} chars do not fit {type_}'s int32 offsets; cast the column to "
            f"{'large_binary' if pa.types.is_binary(type_) else 'large_utf8'}"
        )


def concat(cols: Sequence[Column]) -> Column:
    """One column holding ``cols`` one after another (same type, same device)."""
    first = cols[0]
    device, xp = first.device, devops.namespace(first.device)
    nullable = any(c.nullable for c in cols)
    valid = None
    if any(c.valid is not None for c in cols):
        valid = xp.concatenate(
            [
                c.valid if c.valid is not None else devops.full(device, len(c), True, np.bool_)
                for c in cols
            ]
        )
    if first.offsets is None:
        data = xp.concatenate([c.data for c in cols])
        return Column.trusted(device, first.type, data, valid, None, nullable)
    odtype = first.offsets.dtype
    ranges = [c.chars_range() for c in cols]
    total = sum(stop - start for start, stop in ranges)
    _check_fits(total, odtype, first.type)
    parts, base = [], 0
    for c, (start, stop) in zip(cols, ranges, strict=True):
        parts.append(c.offsets[:-1] - odtype.type(start - base))
        base += stop - start
    parts.append(devops.full(device, 1, base, odtype))
    offsets = xp.concatenate(parts).astype(odtype, copy=False)
    chars = xp.concatenate(
        [c.data[start:stop] for c, (start, stop) in zip(cols, ranges, strict=True)]
    )
    return Column.trusted(device, first.type, chars, valid, offsets, nullable)


def equals(a: Column, b: Column) -> bool:
    """Same type, rows, nulls and values; nulls compare equal, NaN equals NaN."""
    if a.type != b.type or len(a) != len(b) or a.device is not b.device:
        return False
    n = len(a)
    if n == 0:
        return True
    xp = devops.namespace(a.device)
    va, vb = a.valid, b.valid
    if va is not None or vb is not None:
        if va is None or vb is None:
            only = va if vb is None else vb
            if not bool(xp.all(only)):
                return False
        elif not bool(xp.array_equal(va, vb)):
            return False
    valid = va if va is not None else vb
    if a.offsets is None:
        x, y = a.data, b.data
        if x.dtype.kind in "mM":
            x, y = x.view(np.int64), y.view(np.int64)
        same = x == y
        if x.dtype.kind == "f":
            same |= xp.isnan(x) & xp.isnan(y)
        if valid is not None:
            same |= ~valid
        return bool(xp.all(same))
    lens_a = xp.diff(a.offsets)
    lens_b = xp.diff(b.offsets)
    same = lens_a == lens_b
    if valid is not None:
        same |= ~valid
    if not bool(xp.all(same)):
        return False
    rows = xp.flatnonzero(valid) if valid is not None else devops.arange(a.device, n)
    _, chars_a = _gather_strings(a.device, a.offsets, a.data, rows, a.type)
    _, chars_b = _gather_strings(b.device, b.offsets, b.data, rows, b.type)
    return bool(xp.array_equal(chars_a, chars_b))
