"""Nested Arrow arrays to the bytes :mod:`.nested` describes, one nesting level at a time.

Each level encodes its children first (all of them, whole arrays), then lays its own
elements out as *streams* (the validity bytes, the counts, the child sizes, the children's
bytes) interleaved by :func:`.ranges.interleave`: numpy passes over whole buffers, none per
row. A slice at any level is read at its offset, and only the children of valid elements
are kept, which makes the bytes canonical.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .dtypes import is_varlen, offsets_dtype, storage_dtype
from .nested import SIZE, SIZE_MAX, is_nested, leaf_type, static_size
from .ranges import interleave, rows, take_ranges, unpack_bits

_U8 = np.uint8
Stream = tuple[np.ndarray, np.ndarray]  # (bytes of each element's piece, the pieces)


def hold(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A nested ``column`` as large_binary, one ``E`` per row, chunk for chunk."""
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([hold(c) for c in column.chunks], pa.large_binary())
    lens, data = encode_elements(column)
    valid = validity(column)
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    nulls = len(valid) - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        pa.large_binary(),
        len(lens),
        [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls,
    )


def validity(arr: pa.Array) -> np.ndarray:
    """The array's own validity (a struct's, not its children's), True = valid."""
    n = len(arr)
    if pa.types.is_null(arr.type):
        return np.zeros(n, np.bool_)
    if arr.null_count == 0:
        return np.ones(n, np.bool_)
    return unpack_bits(arr.buffers()[0], arr.offset, n)


def encode_elements(arr: pa.Array) -> Stream:
    """``(lens, bytes)``: ``E`` of each element of ``arr`` (read at its offset), back to back."""
    type_, n = arr.type, len(arr)
    size = static_size(type_)
    if n == 0:
        return np.zeros(0, np.int64), np.empty(0, _U8)
    valid = validity(arr)
    if pa.types.is_struct(type_):
        return _struct(arr, valid, size)
    if pa.types.is_fixed_size_list(type_):
        k = type_.list_size
        return _children(type_, arr.values.slice(arr.offset * k, n * k), valid, None, size)
    if is_nested(type_):  # list, large_list, map: .offsets is at the slice, .values is not
        offsets = np.asarray(arr.offsets).astype(np.int64)
        child = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        return _children(type_, child, valid, np.diff(offsets), size)
    if pa.types.is_null(type_):
        return _static(np.zeros((n, 1), _U8))
    leaf = leaf_type(type_)
    return _leaf(arr if leaf == type_ else arr.cast(leaf), valid)


def _static(matrix: np.ndarray) -> Stream:
    n, size = matrix.shape
    return np.full(n, size, np.int64), matrix.reshape(-1)


def _validity_stream(valid: np.ndarray) -> Stream:
    return np.ones(len(valid), np.int64), valid.view(_U8)


def _sizes(values: np.ndarray, what: pa.DataType) -> np.ndarray:
    """Counts or sizes as u32 bytes; an OverflowError past u32."""
    if len(values) and int(values.max()) > SIZE_MAX:
        raise OverflowError(f"an element of {what} needs a count or size above {SIZE_MAX}")
    return values.astype(SIZE).view(_U8)


def _kept(lens: np.ndarray, data: np.ndarray, keep: np.ndarray) -> Stream:
    """The elements ``keep`` says as a stream, the others as empty pieces."""
    if keep.all():
        return lens, data
    return np.where(keep, lens, 0), data[np.repeat(keep, lens)]


def _leaf(arr: pa.Array, valid: np.ndarray) -> Stream:
    """Fixed-width values: one matrix, zeros under nulls; varlen: validity then bytes."""
    type_, n, bufs = arr.type, len(arr), arr.buffers()
    if is_varlen(type_):
        odt = offsets_dtype(type_)
        offsets = np.frombuffer(bufs[1], odt, n + 1, arr.offset * odt.itemsize).astype(np.int64)
        lens = np.where(valid, np.diff(offsets), 0)
        chars = np.frombuffer(bufs[2], _U8) if bufs[2] is not None else np.empty(0, _U8)
        return interleave([_validity_stream(valid), (lens, take_ranges(chars, offsets[:-1], lens))])
    if pa.types.is_boolean(type_):
        values = unpack_bits(bufs[1], arr.offset, n).view(_U8).reshape(n, 1)
    else:
        width = storage_dtype(type_).itemsize
        values = np.frombuffer(bufs[1], _U8, n * width, arr.offset * width).reshape(n, width)
    matrix = np.empty((n, 1 + values.shape[1]), _U8)
    matrix[:, 0] = valid
    matrix[:, 1:] = values
    return _static(_zero_nulls(matrix, valid))


def _zero_nulls(matrix: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """A static type's null is all zeros, whatever lay under it (canonical bytes)."""
    if not valid.all():
        matrix[~valid] = 0
    return matrix


def _struct(arr: pa.StructArray, valid: np.ndarray, size: int | None) -> Stream:
    n = len(arr)
    types = [arr.type.field(i).type for i in range(arr.type.num_fields)]
    fields = [encode_elements(arr.field(i)) for i in range(len(types))]  # .field is at the slice
    if size is not None:  # every field static: side by side, a null all zeros
        matrix = np.empty((n, size), _U8)
        matrix[:, 0] = valid
        at = 1
        for type_, (_, data) in zip(types, fields, strict=True):
            width = static_size(type_)
            matrix[:, at : at + width] = data.reshape(n, width)
            at += width
        return _static(_zero_nulls(matrix, valid))
    dynamic = [lens[valid] for t, (lens, _) in zip(types, fields, strict=True) if static_size(t) is None]
    header = np.stack(dynamic, axis=1).reshape(-1)
    streams = [
        _validity_stream(valid),
        (np.where(valid, SIZE.itemsize * len(dynamic), 0), _sizes(header, arr.type)),
    ]
    streams += [_kept(lens, data, valid) for lens, data in fields]
    return interleave(streams)


def _children(
    type_: pa.DataType, child: pa.Array, valid: np.ndarray, counts: np.ndarray | None, size: int | None
) -> Stream:
    """A list's elements (``counts`` children each) or a fixed-size list's (``counts``
    None: ``list_size`` each), from their children."""
    n = len(valid)
    clens, cdata = encode_elements(child)
    if size is not None:  # a fixed-size list of a static type: one matrix
        matrix = np.empty((n, size), _U8)
        matrix[:, 0] = valid
        matrix[:, 1:] = cdata.reshape(n, size - 1)
        return _static(_zero_nulls(matrix, valid))
    streams = [_validity_stream(valid)]
    if counts is None:
        counts = np.full(n, type_.list_size, np.int64)
    else:
        streams.append((np.where(valid, SIZE.itemsize, 0), _sizes(counts[valid], type_)))
    kept = np.where(valid, counts, 0)
    dropped = not (kept == counts).all()  # children under a null: not written
    keep = np.repeat(valid, counts) if dropped else None
    child_size = static_size(child.type)
    if child_size is not None:  # no sizes; a row's bytes are its count times the size
        data = rows(cdata.reshape(-1, child_size))[keep].view(_U8) if dropped else cdata
        streams.append((child_size * kept, data))
        return interleave(streams)
    streams.append((SIZE.itemsize * kept, _sizes(clens[keep] if dropped else clens, type_)))
    ends = np.zeros(len(clens) + 1, np.int64)
    np.cumsum(clens, out=ends[1:])
    bounds = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    row_bytes = ends[bounds[1:]] - ends[bounds[:-1]]
    data = cdata[np.repeat(keep, clens)] if dropped else cdata
    streams.append((np.where(valid, row_bytes, 0), data))
    return interleave(streams)
