"""The bytes :mod:`.nested` describes back to Arrow arrays, one nesting level at a time.

A level knows where each of its elements starts and how many bytes it has (the row's range
at the top; the sizes its parent wrote, or the static size of the type, below). It reads its
validity bytes, counts and child sizes with one gather each, computes every child's start
with cumulative sums, and hands the children to the level below as whole arrays: numpy
over whole buffers, no loop over rows. Elements under a null parent are not *present*: they
are never read, and come back null.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .dtypes import is_varlen, offsets_dtype, storage_dtype
from .nested import SIZE, children, element_of, is_nested, leaf_type, static_size
from .ranges import exclusive_cumsum, rows, take_ranges

_U8 = np.uint8


def restore(column: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A large_binary ``column`` of ``E`` rows back as the nested ``type_``, chunk for chunk."""
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([restore(c, type_) for c in column.chunks], type_)
    n, bufs = len(column), column.buffers()
    if n == 0:
        return pa.array([], type_)
    offsets = np.frombuffer(bufs[1], np.int64, n + 1, column.offset * 8)
    data = np.frombuffer(bufs[2], _U8) if bufs[2] is not None else np.empty(0, _U8)
    present = np.asarray(column.is_valid())
    return decode_elements(type_, data, offsets[:-1], np.diff(offsets), present)


def decode_elements(
    type_: pa.DataType, buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, present: np.ndarray
) -> pa.Array:
    """Elements of ``type_`` whose ``E`` is at ``buf[starts:starts + lens]`` where
    ``present``; the others null, not read."""
    size = static_size(type_)
    n = len(starts)
    if size is not None and n and _tiled(starts, lens, size):
        first = int(starts[0])
        matrix = buf[first : first + n * size].reshape(n, size)
        if not present.all():
            matrix = matrix.copy()
            matrix[~present] = 0  # zeros decode as nulls
        return decode_static(type_, matrix)
    valid = np.zeros(len(starts), np.bool_)
    if present.any():
        valid[present] = buf[starts[present]] != 0
    return _body(type_, buf, starts + 1, lens - 1, valid)


def _tiled(starts: np.ndarray, lens: np.ndarray, size: int) -> bool:
    """Whether the elements lie back to back, ``size`` bytes each."""
    return bool((lens == size).all() and (np.diff(starts) == size).all())


def decode_static(type_: pa.DataType, matrix: np.ndarray) -> pa.Array:
    """Elements of a static ``type_`` from their ``E``, one row of ``matrix`` each: a
    struct's fields and a fixed-size list's children are columns of it (zeros, so nulls,
    under a null), no gather at all."""
    n = len(matrix)
    if pa.types.is_null(type_):
        return pa.nulls(n)
    bitmap, nulls = _bitmap(matrix[:, 0] != 0)
    if pa.types.is_struct(type_):
        fields, at = [], 1
        for f in children(type_):
            width = static_size(f.type)
            fields.append(decode_static(f.type, matrix[:, at : at + width]))
            at += width
        return pa.Array.from_buffers(type_, n, [bitmap], nulls, children=fields)
    if pa.types.is_fixed_size_list(type_):
        k, width = type_.list_size, static_size(type_.value_type)
        child = decode_static(type_.value_type, matrix[:, 1:].reshape(n * k, width))
        return pa.Array.from_buffers(type_, n, [bitmap], nulls, children=[child])
    leaf = leaf_type(type_)
    values = np.ascontiguousarray(matrix[:, 1:])
    if pa.types.is_boolean(leaf):
        values = np.packbits(values.reshape(-1), bitorder="little")
    arr = pa.Array.from_buffers(leaf, n, [bitmap, pa.py_buffer(values)], nulls)
    return arr if leaf == type_ else arr.cast(type_)


def _bitmap(valid: np.ndarray) -> tuple[pa.Buffer | None, int]:
    nulls = len(valid) - int(np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def _offsets(counts: np.ndarray, dtype: np.dtype, type_: pa.DataType) -> pa.Buffer:
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    if offsets[-1] > np.iinfo(dtype).max:
        raise OverflowError(f"{offsets[-1]} children do not fit {type_}'s {dtype} offsets")
    return pa.py_buffer(offsets.astype(dtype))


def _u32(buf: np.ndarray, starts: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``count[i]`` u32 at each ``starts[i]``, back to back, as int64."""
    raw = take_ranges(buf, starts, SIZE.itemsize * count.astype(np.int64))
    return raw.view(SIZE).astype(np.int64)


def _body(type_: pa.DataType, buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, valid: np.ndarray) -> pa.Array:
    n = len(valid)
    if pa.types.is_null(type_):
        return pa.nulls(n)
    bitmap, nulls = _bitmap(valid)
    if pa.types.is_struct(type_):
        fields = _struct_fields(type_, buf, starts[valid], valid)
        return pa.Array.from_buffers(type_, n, [bitmap], nulls, children=fields)
    if is_nested(type_):
        child, offsets = _list_children(type_, buf, starts, valid)
        buffers = [bitmap] if offsets is None else [bitmap, offsets]
        return pa.Array.from_buffers(type_, n, buffers, nulls, children=[child])
    leaf = leaf_type(type_)
    arr = _leaf(leaf, buf, starts[valid], lens[valid], valid, bitmap, nulls)
    return arr if leaf == type_ else arr.cast(type_)


def _leaf(type_, buf, starts, lens, valid, bitmap, nulls) -> pa.Array:
    n = len(valid)
    if is_varlen(type_):
        counts = np.zeros(n, np.int64)
        counts[valid] = lens
        offsets = _offsets(counts, offsets_dtype(type_), type_)
        data = pa.py_buffer(take_ranges(buf, starts, lens))
        return pa.Array.from_buffers(type_, n, [bitmap, offsets, data], nulls)
    width = 1 if pa.types.is_boolean(type_) else storage_dtype(type_).itemsize
    values = np.zeros((n, width), _U8)
    values[valid] = take_ranges(buf, starts, np.full(len(starts), width, np.int64)).reshape(-1, width)
    if pa.types.is_boolean(type_):
        values = np.packbits(values.reshape(-1), bitorder="little")
    return pa.Array.from_buffers(type_, n, [bitmap, pa.py_buffer(values)], nulls)


def _struct_fields(type_: pa.StructType, buf: np.ndarray, starts: np.ndarray, valid: np.ndarray) -> list[pa.Array]:
    """Each field of the valid structs (bodies at ``starts``): sizes from the header for
    dynamic fields, from the type for static ones."""
    fields = children(type_)
    nv = len(starts)
    static = [static_size(f.type) for f in fields]
    dynamic = [i for i, s in enumerate(static) if s is None]
    header = len(dynamic) * SIZE.itemsize
    sizes = np.empty((nv, len(fields)), np.int64)
    for i, s in enumerate(static):
        if s is not None:
            sizes[:, i] = s
    if dynamic:
        read = _u32(buf, starts, np.full(nv, len(dynamic)))
        sizes[:, dynamic] = read.reshape(nv, len(dynamic))
    at = (starts + header)[:, None] + np.cumsum(sizes, axis=1) - sizes
    out = []
    for i, f in enumerate(fields):
        if static[i] is not None:  # one row of a matrix per struct, zeros under a null
            matrix = np.zeros((len(valid), static[i]), _U8)
            rows(matrix)[valid] = rows(take_ranges(buf, at[:, i], sizes[:, i]).reshape(nv, static[i]))
            out.append(decode_static(f.type, matrix))
            continue
        fstarts = np.zeros(len(valid), np.int64)
        flens = np.zeros(len(valid), np.int64)
        fstarts[valid], flens[valid] = at[:, i], sizes[:, i]
        out.append(decode_elements(f.type, buf, fstarts, flens, valid))
    return out


def _list_children(
    type_: pa.DataType, buf: np.ndarray, starts: np.ndarray, valid: np.ndarray
) -> tuple[pa.Array, pa.Buffer | None]:
    """The children of a list-like level and its offsets buffer (None: fixed-size)."""
    n = len(valid)
    vstarts = starts[valid]
    child_type = element_of(type_)
    fixed = pa.types.is_fixed_size_list(type_)
    if fixed:
        vcounts = np.full(len(vstarts), type_.list_size, np.int64)
        region = vstarts
    else:
        vcounts = _u32(buf, vstarts, np.ones(len(vstarts), np.int64))
        region = vstarts + SIZE.itemsize
    size = static_size(child_type)
    m = int(vcounts.sum())
    if size is not None and not fixed:  # the children, back to back once the heads are gone
        cbytes = take_ranges(buf, region, size * vcounts)
        child = decode_static(child_type, cbytes.reshape(m, size))
        return child, _offsets(_scattered(vcounts, valid), _list_offsets(type_), type_)
    if size is None:
        csizes = _u32(buf, region, vcounts)
        region = region + SIZE.itemsize * vcounts
    else:
        csizes = np.full(m, size, np.int64)
    within = exclusive_cumsum(csizes)  # each child's start, all children back to back
    first = np.append(within, within[-1] + csizes[-1] if m else 0)[exclusive_cumsum(vcounts)]
    cstarts = np.repeat(region - first, vcounts) + within
    if fixed:  # list_size children for every element, null ones included (not present)
        k = type_.list_size
        present = np.repeat(valid, k)
        all_starts, all_sizes = np.zeros(n * k, np.int64), np.zeros(n * k, np.int64)
        all_starts[present], all_sizes[present] = cstarts, csizes
        return decode_elements(child_type, buf, all_starts, all_sizes, present), None
    child = decode_elements(child_type, buf, cstarts, csizes, np.ones(m, np.bool_))
    return child, _offsets(_scattered(vcounts, valid), _list_offsets(type_), type_)


def _scattered(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    out = np.zeros(len(valid), np.int64)
    out[valid] = values
    return out


def _list_offsets(type_: pa.DataType) -> np.dtype:
    return np.dtype(np.int64 if pa.types.is_large_list(type_) else np.int32)
