"""Column: one device buffer of values, an optional validity mask, and for
strings and binary Arrow's offsets + chars layout.

The validity mask is a **bool device array, one byte per row, True = valid**,
not Arrow's bitmap: the partition kernels take bool masks for null keys and
scatter 1-byte columns directly, slices at any row are zero-copy views (a
bitmap sliced at a row that is not a multiple of 8 needs a bit offset or a
copy), and ``take`` is a plain gather. It costs 7/8 of a byte per row more than
a bitmap; the bitmap is rebuilt (vectorised ``np.packbits``) only at the Arrow
boundary.

Strings and binary (one layout, :func:`.dtypes.is_varlen`): ``offsets`` (int32 for
utf8 and binary, int64 for large_utf8 and large_binary, ``len + 1`` entries) index
into ``data``, the uint8 chars buffer. Like Arrow, a sliced
column keeps the whole chars buffer and offsets that need not start at 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from . import devops
from .dtypes import arrow_type_of, check_arrow_type, is_varlen, offsets_dtype, storage_dtype


class Column:
    """A device column. Build one from device arrays (checked, nothing allocated)
    or with :meth:`Table.from_arrow`; columns are immutable once built."""

    __slots__ = ("device", "type", "data", "valid", "offsets", "nullable", "_range")

    def __init__(
        self,
        data: Any,
        valid: Any = None,
        *,
        offsets: Any = None,
        type: pa.DataType | None = None,  # noqa: A002 - the Arrow name
        device: Any = None,
        nullable: bool = True,
        name: str | None = None,
    ) -> None:
        """``data``: the values (or the uint8 chars when ``offsets`` is given);
        ``valid``: bool mask, True = valid; ``type``: the Arrow type, inferred
        from the dtypes when omitted (``timestamp`` with a time zone must be given);
        ``name`` only labels error messages."""
        device = _resolve_device(device, data, name)
        type_ = _validate(device, data, valid, offsets, type, name)
        self._set(device, type_, data, valid, offsets, nullable)

    @classmethod
    def trusted(
        cls,
        device: Any,
        type_: pa.DataType,
        data: Any,
        valid: Any = None,
        offsets: Any = None,
        nullable: bool = True,
    ) -> Column:
        """The fast path: a column over buffers the caller built and checked itself.

        Nothing is validated or copied (``Column(...)`` checks dtypes, lengths and the
        device); for code that assembles columns from its own frames, such as the
        shuffle's unpack. Wrong buffers here give wrong tables, not errors."""
        col = cls.__new__(cls)
        col._set(device, type_, data, valid, offsets, nullable)
        return col

    def _set(
        self, device: Any, type_: pa.DataType, data: Any, valid: Any, offsets: Any, nullable: bool
    ) -> None:
        self.device = device
        self.type = type_
        self.data = data
        self.valid = valid
        self.offsets = offsets
        self.nullable = bool(nullable)
        self._range: tuple[int, int] | None = None

    # --- shape and sizes -----------------------------------------------------
    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.offsets is not None else len(self.data)

    @property
    def is_varlen(self) -> bool:
        """Whether the column has the offsets + bytes layout (strings and binary alike)."""
        return self.offsets is not None

    @property
    def dtype(self) -> np.dtype:
        """The device dtype of the values (uint8 for the chars of strings)."""
        return self.data.dtype

    def chars_range(self) -> tuple[int, int]:
        """``(offsets[0], offsets[-1])``: the chars this (maybe sliced) column uses."""
        if self._range is None:
            if self.offsets is None:
                raise TypeError(f"a {self.type} column has no chars")
            off = self.offsets
            self._range = (devops.to_int(off[0]), devops.to_int(off[-1]))
        return self._range

    @property
    def nbytes(self) -> int:
        """Device bytes the column's views cover; for strings only the chars in use.

        For a column built by :meth:`Table.from_arrow` (or any exact-size buffers)
        this is exactly what the device ledger counts for it.
        """
        total = 0 if self.valid is None else int(self.valid.nbytes)
        if self.offsets is None:
            return total + int(self.data.nbytes)
        start, stop = self.chars_range()
        return total + int(self.offsets.nbytes) + (stop - start)

    @property
    def null_count(self) -> int:
        if self.valid is None:
            return 0
        xp = devops.namespace(self.device)
        return len(self) - int(xp.count_nonzero(devops.readable(self.device, self.valid)))

    def buffers(self) -> list[Any]:
        """The device arrays behind the column: data (or chars), then mask, then offsets."""
        return [b for b in (self.data, self.valid, self.offsets) if b is not None]

    # --- zero-copy views ----------------------------------------------------
    def slice(self, start: int, stop: int) -> Column:
        """Rows ``start:stop`` (already normalised by the table) as views."""
        valid = None if self.valid is None else self.valid[start:stop]
        if self.offsets is not None:
            return Column.trusted(
                self.device,
                self.type,
                self.data,
                valid,
                self.offsets[start : stop + 1],
                self.nullable,
            )
        return Column.trusted(
            self.device, self.type, self.data[start:stop], valid, None, self.nullable
        )

    def __repr__(self) -> str:
        nulls = "" if self.valid is None else " masked"
        return f"<Column {self.type} rows={len(self)}{nulls} nbytes={self.nbytes}>"


# --- construction checks (no allocation) -------------------------------------------
def _label(name: str | None) -> str:
    return f"column {name!r}" if name is not None else "column"


def _resolve_device(device: Any, data: Any, name: str | None) -> Any:
    if device is not None:
        return device
    found = getattr(data, "device", None)
    if getattr(found, "kind", None) == "sim":  # a SimArray knows its device
        return found
    raise TypeError(
        f"{_label(name)}: pass device= (the data is a {type(data).__name__}, which does not "
        "name one of this library's devices)"
    )


def _validate(
    device: Any, data: Any, valid: Any, offsets: Any, type_: pa.DataType | None, name: str | None
) -> pa.DataType:
    label = _label(name)
    strings = offsets is not None
    devops.check_device_array(device, data, f"{label} {'chars' if strings else 'data'}")
    if offsets is not None:
        devops.check_device_array(device, offsets, f"{label} offsets")
    if valid is not None:
        devops.check_device_array(device, valid, f"{label} validity mask")
    if strings:
        type_ = _string_type(label, data, offsets, type_, name)
        nrows = len(offsets) - 1
    else:
        inferred = arrow_type_of(name, data.dtype)
        if type_ is None:
            type_ = inferred
        else:
            check_arrow_type(name, type_)
            if is_varlen(type_) or storage_dtype(type_) != data.dtype:
                raise TypeError(
                    f"{label} has dtype {data.dtype}, which cannot hold {type_} "
                    f"(expected {_expected(type_)})"
                )
        nrows = len(data)
    if valid is not None:
        if valid.dtype != np.bool_:
            raise TypeError(
                f"{label} validity mask must be bool (True = valid), got dtype {valid.dtype}"
            )
        if len(valid) != nrows:
            raise ValueError(f"{label} validity mask has {len(valid)} rows, the column has {nrows}")
    if strings:
        _check_offsets(device, offsets, len(data), label)
    return type_


def _expected(type_: pa.DataType) -> str:
    if is_varlen(type_):
        return f"{offsets_dtype(type_)} offsets and uint8 chars"
    return str(storage_dtype(type_))


def _string_type(
    label: str, chars: Any, offsets: Any, type_: pa.DataType | None, name: str | None
) -> pa.DataType:
    if offsets.dtype not in (np.int32, np.int64):
        raise TypeError(
            f"{label} offsets must be int32 (utf8) or int64 (large_utf8), got dtype {offsets.dtype}"
        )
    if chars.dtype != np.uint8:
        raise TypeError(f"{label} chars must be uint8, got dtype {chars.dtype}")
    if len(offsets) < 1:
        raise ValueError(f"{label} offsets must hold at least one entry (rows + 1), got 0")
    inferred = pa.large_string() if offsets.dtype == np.int64 else pa.string()
    if type_ is None:
        return inferred  # text unless told: binary must be named
    check_arrow_type(name, type_)
    if not is_varlen(type_) or offsets_dtype(type_) != offsets.dtype:
        held = "large_string or large_binary" if offsets.dtype == np.int64 else "string or binary"
        raise TypeError(f"{label} has {offsets.dtype} offsets, which hold {held}, not {type_}")
    return type_


def _check_offsets(device: Any, offsets: Any, nchars: int, label: str) -> None:
    """Monotonic, non-negative and inside the chars buffer, read without allocating on sim."""
    xp = devops.namespace(device)
    off = devops.readable(device, offsets)
    first, last = devops.to_int(off[0]), devops.to_int(off[-1])
    if first < 0:
        raise ValueError(f"{label} offsets start at {first}, below 0")
    if len(off) > 1:
        bad = xp.flatnonzero(off[1:] < off[:-1])
        if len(bad):
            i = devops.to_int(bad[0])
            raise ValueError(
                f"{label} offsets are not monotonic: offsets[{i}] = {devops.to_int(off[i])} > "
                f"offsets[{i + 1}] = {devops.to_int(off[i + 1])}"
            )
    if last > nchars:
        raise ValueError(
            f"{label} offsets run past the chars buffer: offsets[-1] = {last} > {nchars} chars"
        )
