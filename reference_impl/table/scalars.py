"""The logical types held as one Table type each, value for value: a rule with no
dictionaries or nesting in it, so :mod:`.logical` and the nested encoding (which holds
these at its leaves) share it without importing each other."""

from __future__ import annotations

import pyarrow as pa


def scalar_held(type_: pa.DataType) -> pa.DataType | None:
    """The Table type a decimal, date, time or halffloat is held as (exactly: every digit,
    their own integers, every float16 value); None for any other type."""
    if pa.types.is_decimal(type_):
        return pa.string()  # every digit, negative scales too ("1.2E+2")
    if pa.types.is_date32(type_) or pa.types.is_time32(type_):
        return pa.int32()
    if pa.types.is_date64(type_) or pa.types.is_time64(type_):
        return pa.int64()
    if pa.types.is_float16(type_):
        return pa.float32()
    return None
