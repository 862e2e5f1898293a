"""Nested Arrow types (list, large_list, fixed_size_list, struct, map), held as large_binary.

The Table's layouts are flat, so a nested column travels as one self-delimiting byte string
per row, which every Table path (gather, concat, partition, pack, spill) already moves, and
which hashes as bytes when the column is a shuffle key. An element of type T encodes as
``E(T)``: a validity byte (1 valid, 0 null), then when valid its body:

==============================  ===========================================================
T                               body
==============================  ===========================================================
fixed-width (bool, ints, ...)   the value's little-endian bytes (bool: one byte, 0 or 1)
utf8, binary                    the bytes (their length is the element's, which the
                                parent records)
list, large_list, map           u32 count, [u32 size of each child], the children's ``E``
fixed_size_list                 [u32 size of each child], the children's ``E``
struct                          [u32 size of each field], each field's ``E``
==============================  ===========================================================

Bracketed sizes are written only for a *dynamic* child type. A *static* type (fixed-width
values, and fixed-size lists and structs of static types) has one size for every element:
its null is the byte 0 then zeros, so the size holds. A dynamic type's null is the single
byte 0. A row holds ``E`` of its value (its Arrow validity says null too, so a null key
hashes as every null does).

Canonical: nothing under a null, nothing a slice leaves out and no padding is written, so
equal values give equal bytes, whichever arrays and offsets hold them (a nested key
co-locates equal values). Floats are bits: -0.0 and 0.0, and NaNs of other payloads, are
different values here, as the exact round trip needs.

Both ways run a nesting *level* at a time with numpy over whole buffers (:mod:`.ranges`):
no loop over rows or elements. Logical leaves (decimal, date, time, halffloat) are encoded
as the type the Table holds them as and cast back; a dictionary inside is refused, naming
the column and the field's path.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .dtypes import SUPPORTED, check_arrow_type, is_varlen, storage_dtype
from .scalars import scalar_held

SIZE = np.dtype("<u4")  # counts and sizes
SIZE_MAX = 2**32 - 1


# --- types -------------------------------------------------------------------------
def is_nested(type_: pa.DataType) -> bool:
    """A type this module holds."""
    return (
        pa.types.is_list(type_)
        or pa.types.is_large_list(type_)
        or pa.types.is_fixed_size_list(type_)
        or pa.types.is_struct(type_)
        or pa.types.is_map(type_)
    )


def children(type_: pa.DataType) -> list[pa.Field]:
    """The child fields of a nested type (a map's: its key and item)."""
    if pa.types.is_map(type_):
        return [type_.key_field, type_.item_field]
    if pa.types.is_struct(type_):
        return [type_.field(i) for i in range(type_.num_fields)]
    return [type_.value_field]


def entries(type_: pa.MapType) -> pa.DataType:
    """A map's child: the struct of its key and item fields."""
    return pa.struct([type_.key_field, type_.item_field])


def leaf_type(type_: pa.DataType) -> pa.DataType:
    """The Table type a leaf is encoded as (a logical one's held type)."""
    return scalar_held(type_) or type_


def check(name: str | None, type_: pa.DataType) -> None:
    """A TypeError naming the column and the path of the field a nested ``type_`` holds
    that cannot be encoded; nothing when all of it can."""
    _check(f"column {name!r}" if name is not None else "column", type_, type_, "")


def _check(label: str, top: pa.DataType, type_: pa.DataType, path: str) -> None:
    for field in children(type_):
        where = f"{path}.{field.name}" if path else field.name
        child = field.type
        if pa.types.is_dictionary(child):
            raise TypeError(
                f"{label} holds a dictionary at field {where!r} ({child}): a list or struct "
                "cannot hold one; cast it to its values first"
            )
        if is_nested(child):
            _check(label, top, child, where)
        elif not pa.types.is_null(child):
            try:
                check_arrow_type(None, leaf_type(child))
            except TypeError:
                raise TypeError(
                    f"{label} has unsupported type {top} (field {where!r} is {child}); "
                    f"supported: {SUPPORTED}"
                ) from None


def static_size(type_: pa.DataType) -> int | None:
    """Bytes of every ``E`` of ``type_`` when they are all one size, else None."""
    if pa.types.is_null(type_):
        return 1
    if pa.types.is_struct(type_):
        sizes = [static_size(f.type) for f in children(type_)]
        return None if None in sizes else 1 + sum(sizes)  # type: ignore[arg-type]
    if pa.types.is_fixed_size_list(type_):
        size = static_size(type_.value_type)
        return None if size is None else 1 + type_.list_size * size
    if is_nested(type_):
        return None
    leaf = leaf_type(type_)
    return None if is_varlen(leaf) else 1 + storage_dtype(leaf).itemsize


def element_of(type_: pa.DataType) -> pa.DataType:
    """The type of a list-like's children (a map's: the struct of its key and item)."""
    return entries(type_) if pa.types.is_map(type_) else type_.value_type


