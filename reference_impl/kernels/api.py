"""Validation and dispatch for the partition kernels.

Everything is checked before the first allocation, so bad input raises
without leaving a byte on the device ledger.  Dispatch is on
``device.kind``: ``"sim"`` runs the CPU twins (``cpu.py``), ``"cuda"`` the
``numba.cuda`` kernels (``cuda.py``).  ``backend="cuda"`` on a sim device
runs the CUDA kernels on sim arrays, which is how the CUDA simulator tests
check that both twins agree.

Two entry points share the histogram / scan / scatter stages: :func:`partition`
computes each row's partition id by hashing its keys; :func:`partition_by_ids`
takes the ids as given (a destination column) and only counts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from . import hashing
from .strings import Strings

Backend = Literal["auto", "cpu", "cuda"]
Columns = Sequence[Any] | Mapping[str, Any]

_SCATTER_VIEW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
MAX_PARTITIONS = 2**31 - 1


@dataclass
class PartitionResult:
    """Output of :func:`partition` and :func:`partition_by_ids`; all arrays live on
    the input's device.

    ``ids``: int32 partition id of every input row (:func:`partition_by_ids`:
    the caller's ``ids`` array itself, in its own dtype).
    ``counts``: int64 rows per partition (length ``npartitions``).
    ``offsets``: int64 exclusive offsets, length ``npartitions + 1``;
    partition ``i`` is rows ``offsets[i]:offsets[i+1]`` of every column.
    ``columns``: keys first (none for :func:`partition_by_ids`), then payload, each one contiguous buffer in
    partition order, stable within a partition.  A string column comes back
    as ``Strings``: one offsets buffer (``nrows + 1`` entries, its input's
    dtype, starting at 0) and one chars buffer holding exactly the rows' bytes.
    ``names``: the column names (given, or ``"key0"``, ``"payload0"`` ...).
    """

    ids: Any
    counts: Any
    offsets: Any
    columns: list[Any]
    names: list[str]
    npartitions: int

    def bounds(self, i: int) -> tuple[int, int]:
        """``(start, stop)`` rows of partition ``i`` (reads two offsets to host)."""
        if not 0 <= i < self.npartitions:
            raise IndexError(f"partition {i} out of range for {self.npartitions} partitions")
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def slice(self, i: int, col: int | str) -> Any:
        """Zero-copy device view of column ``col`` (index or name) in partition ``i``.

        For a string column: ``Strings(offsets[start:stop+1], chars)``, the
        offsets not rebased (they index the shared chars buffer, as in an
        Arrow slice); the partition's bytes are ``chars[offsets[0]:offsets[-1]]``.
        """
        c = self.names.index(col) if isinstance(col, str) else col
        start, stop = self.bounds(i)
        return _rows(self.columns[c], start, stop)

    def split(self) -> list[list[Any]]:
        """Per-partition lists of zero-copy column views (one host read of offsets)."""
        off = [int(x) for x in self.offsets.tolist()]
        return [[_rows(c, off[i], off[i + 1]) for c in self.columns]
                for i in range(self.npartitions)]


def _rows(col: Any, start: int, stop: int) -> Any:
    return col.slice(start, stop) if isinstance(col, Strings) else col[start:stop]


# --- validation ---------------------------------------------------------------
def _named(cols: Columns, prefix: str) -> tuple[list[Any], list[str], list[str]]:
    """(arrays, names, labels for messages)."""
    if isinstance(cols, Mapping):
        names = [str(k) for k in cols]
        return list(cols.values()), names, [f"{prefix} column {n!r}" for n in names]
    arrays = list(cols)
    return arrays, [f"{prefix}{i}" for i in range(len(arrays))], [
        f"{prefix} column {i}" for i in range(len(arrays))]


def _check_array(device: Any, arr: Any, label: str) -> None:
    if not device.is_device_array(arr):
        raise TypeError(f"{label} is a {type(arr).__name__}, not an array of device "
                        f"{getattr(device, 'name', device)!r}; move it with device.asarray()")
    if arr.ndim != 1:
        raise ValueError(f"{label} must be 1-D, got shape {tuple(arr.shape)}")


def _check_strings(device: Any, col: Strings, label: str) -> None:
    """Types and shapes of a string column's two buffers (no data read)."""
    _check_array(device, col.offsets, f"offsets of {label}")
    _check_array(device, col.chars, f"chars of {label}")
    if col.offsets.dtype not in (np.int32, np.int64):
        raise TypeError(f"offsets of {label} must be int32 or int64, got {col.offsets.dtype}")
    if col.chars.dtype != np.uint8:
        raise TypeError(f"chars of {label} must be uint8, got {col.chars.dtype}")
    if not col.chars.flags.c_contiguous:
        raise ValueError(f"chars of {label} must be contiguous (rows are copied as byte runs)")
    if len(col.offsets) < 1:
        raise ValueError(f"offsets of {label} must have rows + 1 entries, got none")


def _string_bytes(device: Any, col: Strings, label: str) -> int:
    """Check a string column's offsets (reads them; allocates nothing on a sim
    device, 16 bytes of scratch on CUDA); return the bytes its rows span."""
    if device.kind == "cuda":
        from . import cuda

        bad = cuda.first_bad_offset(device, col.offsets)
    else:
        from . import cpu

        bad = cpu.first_bad_offset(col.offsets.view(np.ndarray))
    off = col.offsets
    if bad == -2:
        raise ValueError(f"{label} has a negative first offset ({int(off[0])})")
    if bad >= 0:
        raise ValueError(f"{label} has offsets that are not monotonic: offsets[{bad}] = "
                         f"{int(off[bad])} > offsets[{bad + 1}] = {int(off[bad + 1])}")
    first, last = int(off[0]), int(off[-1])
    if last > len(col.chars):
        raise ValueError(f"{label} has offsets that run past its chars buffer: "
                         f"offsets[{len(off) - 1}] = {last} > {len(col.chars)} bytes")
    return last - first


def _check_npartitions(npartitions: Any) -> int:
    if isinstance(npartitions, bool) or not isinstance(npartitions, (int, np.integer)):
        raise TypeError(f"npartitions must be an int, got {type(npartitions).__name__}")
    if not 1 <= npartitions <= MAX_PARTITIONS:
        raise ValueError(f"npartitions must be between 1 and {MAX_PARTITIONS}, got {npartitions}")
    return int(npartitions)


def _check_keys(device: Any, keys: Columns, valid: Sequence[Any] | None):
    arrays, names, labels = _named(keys, "key")
    if not arrays:
        raise ValueError("at least one key column is required")
    kinds = []
    for arr, label in zip(arrays, labels, strict=True):
        if isinstance(arr, Strings):
            _check_strings(device, arr, label)
            kinds.append(("s", None))
            continue
        _check_array(device, arr, label)
        kv = hashing.key_kind(arr.dtype)
        if kv is None:
            raise TypeError(
                f"{label} has unsupported dtype {arr.dtype}; keys must be bool, int8-64, "
                "uint8-64, float32/64, datetime64, timedelta64 or Strings")
        kinds.append(kv)
    if valid is None:
        valids: list[Any] = [None] * len(arrays)
    else:
        valids = list(valid)
        if len(valids) != len(arrays):
            raise ValueError(f"valid has {len(valids)} entries for {len(arrays)} key columns")
        for m, label in zip(valids, labels, strict=True):
            if m is None:
                continue
            _check_array(device, m, f"validity mask of {label}")
            if m.dtype != np.bool_:
                raise TypeError(f"validity mask of {label} must be bool, got {m.dtype}")
    return arrays, names, labels, kinds, valids


def _check_payload(device: Any, payload: Columns):
    arrays, names, labels = _named(payload, "payload")
    for arr, label in zip(arrays, labels, strict=True):
        if isinstance(arr, Strings):
            _check_strings(device, arr, label)
            continue
        _check_array(device, arr, label)
        if arr.dtype.hasobject or arr.dtype.kind in "OSUV" or arr.dtype.itemsize not in _SCATTER_VIEW:
            raise TypeError(f"{label} has unsupported dtype {arr.dtype}; payload columns must "
                            "be fixed-width with an itemsize of 1, 2, 4 or 8 bytes, or Strings")
    return arrays, names, labels


def _check_lengths(arrays: Sequence[Any], labels: Sequence[str]) -> int:
    nrows = len(arrays[0])
    for arr, label in zip(arrays, labels, strict=True):
        if len(arr) != nrows:
            raise ValueError(f"{label} has {len(arr)} rows, expected {nrows} "
                             "(all columns and masks must have the same length)")
    return nrows


def _backend_for(device: Any, backend: Backend):
    if backend not in ("auto", "cpu", "cuda"):
        raise ValueError(f"backend must be 'auto', 'cpu' or 'cuda', got {backend!r}")
    if backend == "auto":
        backend = "cuda" if device.kind == "cuda" else "cpu"
    if backend == "cpu" and device.kind != "sim":
        raise ValueError(f"the cpu kernels need host-addressable arrays; device kind is "
                         f"{device.kind!r}")
    if backend == "cuda":
        from . import cuda

        return cuda.Driver(device)
    from . import cpu

    return cpu.Driver(device)


def _check_string_data(device: Any, arrays: Sequence[Any], labels: Sequence[str]) -> dict[int, int]:
    """Offsets of every string column checked; ``{index: bytes its rows span}``."""
    return {i: _string_bytes(device, a, lb) for i, (a, lb) in enumerate(zip(arrays, labels,
                                                                          strict=True))
            if isinstance(a, Strings)}


def _prepare(keys, kinds, valids):
    """Re-view keys (zero-copy) so kernels see integers; masks as uint8."""
    cols = [k if view is None else k.view(view) for k, (_, view) in zip(keys, kinds, strict=True)]
    masks = [None if m is None else m.view(np.uint8) for m in valids]
    return cols, [kind for kind, _ in kinds], masks


def _check_out(device: Any, out: Sequence[Any] | None, ids_out: Any, columns: Sequence[Any],
               labels: Sequence[str], nrows: int, string_bytes: Mapping[int, int],
               what: str = "keys then payload", also_read: Sequence[Any] = ()) -> list[Any] | None:
    """Validate caller-supplied output buffers (before any allocation).  ``also_read``:
    input arrays besides ``columns`` (the given ids) that no buffer may share memory with."""
    if out is None and ids_out is None:
        return None
    inputs = {device.allocation_of(a)[0] for a in also_read}
    for c in columns:
        for a in ((c.offsets, c.chars) if isinstance(c, Strings) else (c,)):
            inputs.add(device.allocation_of(a)[0])
    seen: dict[int, str] = {}

    def check(buf: Any, label: str, dtype: Any, size: int = nrows, unit: str = "rows") -> None:
        if not device.is_device_array(buf):
            raise ValueError(f"{label} is a {type(buf).__name__}, not an array of device "
                             f"{getattr(device, 'name', device)!r}")
        if buf.ndim != 1 or len(buf) != size:
            raise ValueError(f"{label} must be 1-D with {size} {unit}, got shape "
                             f"{tuple(buf.shape)}")
        if buf.dtype != dtype:
            raise ValueError(f"{label} has dtype {buf.dtype}, expected {np.dtype(dtype)}")
        if not buf.flags.c_contiguous:
            raise ValueError(f"{label} must be contiguous")
        alloc = device.allocation_of(buf)[0]
        if alloc in inputs:
            raise ValueError(f"{label} shares memory with an input column")
        if alloc in seen:
            raise ValueError(f"{label} shares memory with {seen[alloc]}")
        seen[alloc] = label

    if ids_out is not None:
        check(ids_out, "ids_out", np.int32)
    if out is None:
        return None
    if isinstance(out, Mapping) or not isinstance(out, Sequence):
        raise ValueError(f"out must be a sequence of {len(columns)} arrays ({what}), "
                         f"got {type(out).__name__}")
    out = list(out)
    if len(out) != len(columns):
        raise ValueError(f"out has {len(out)} arrays for {len(columns)} columns ({what})")
    for k, (buf, col, label) in enumerate(zip(out, columns, labels, strict=True)):
        if isinstance(col, Strings):
            if not isinstance(buf, Strings):
                raise ValueError(f"out for {label} must be Strings(offsets, chars), got "
                                 f"{type(buf).__name__}")
            check(buf.offsets, f"offsets out for {label}", col.offsets.dtype, nrows + 1,
                  "entries")
            check(buf.chars, f"chars out for {label}", np.uint8, string_bytes[k], "bytes")
        else:
            check(buf, f"out for {label}", col.dtype)
    return out


#: Zero-copy view the kernels read given ids through, by itemsize.  Checked ids lie in
#: ``[0, npartitions)``, ``npartitions < 2**31``, so every view keeps every value: a
#: non-negative int8/int16 reads the same as uint8/uint16, and a uint32/uint64 below
#: ``2**31`` the same as int32/int64.  Four dtypes, not eight, reach the kernels, and int32
#: ids (what ``partition`` computes) run the very kernels the hash path runs.
_IDS_VIEW = {1: np.uint8, 2: np.uint16, 4: np.int32, 8: np.int64}


def _check_ids_array(device: Any, ids: Any, label: str) -> None:
    if isinstance(ids, Strings):
        raise TypeError(f"{label} must be an integer array, got Strings")
    _check_array(device, ids, label)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{label} must be an integer array (any int or uint dtype), got "
                        f"dtype {ids.dtype}")


def _check_ids_range(device: Any, ids: Any, n: int, label: str) -> None:
    """``ValueError`` naming ``label``, the first id outside ``[0, n)`` and its row.
    Reads the ids; allocates nothing on a sim device, 8 bytes of scratch on CUDA."""
    info = np.iinfo(ids.dtype)
    if info.min >= 0 and info.max < n:
        return  # every value of the dtype is a valid id (say uint8 ids, 256+ partitions)
    # On the unsigned view a negative id reads as a huge one: one compare with ``hi`` tests
    # both ends of the range.
    unsigned = _SCATTER_VIEW[ids.dtype.itemsize]
    hi = unsigned(min(n - 1, info.max))
    if device.kind == "cuda":
        from . import cuda

        bad = cuda.first_bad_id(device, ids.view(unsigned), hi)
    else:
        from . import cpu

        bad = cpu.first_bad_id(ids.view(np.ndarray).view(unsigned), hi)
    if bad >= 0:
        raise ValueError(f"{label} holds {int(ids[bad])} at row {bad}, outside [0, {n}) "
                         f"for {n} partitions")


# --- public API -----------------------------------------------------------------
def hash_columns(device: Any, keys: Columns, valid: Sequence[Any] | None = None, *,
                 backend: Backend = "auto") -> Any:
    """uint64 row hash of the key columns (spec in ``hashing``), on ``device``.

    The hash is what makes CPU and GPU agree: both compile the same element
    functions, so this equals :func:`hashing.hash_numpy` bit for bit.
    """
    arrays, _, labels, kinds, valids = _check_keys(device, keys, valid)
    _check_lengths(arrays + [m for m in valids if m is not None],
                   labels + [f"validity mask of {lb}" for lb, m in zip(labels, valids, strict=True)
                             if m is not None])
    _check_string_data(device, arrays, labels)
    driver = _backend_for(device, backend)
    return driver.hash_columns(*_prepare(arrays, kinds, valids))


def partition_ids(device: Any, keys: Columns, npartitions: int,
                  valid: Sequence[Any] | None = None, *, backend: Backend = "auto") -> Any:
    """int32 partition id of every row: ``pid(hash_columns(keys), npartitions)``."""
    n = _check_npartitions(npartitions)
    arrays, _, labels, kinds, valids = _check_keys(device, keys, valid)
    _check_lengths(arrays + [m for m in valids if m is not None],
                   labels + [f"validity mask of {lb}" for lb, m in zip(labels, valids, strict=True)
                             if m is not None])
    _check_string_data(device, arrays, labels)
    driver = _backend_for(device, backend)
    return driver.ids(*_prepare(arrays, kinds, valids), n)


def partition(device: Any, keys: Columns, payload: Columns = (), npartitions: int = 1, *,
              valid: Sequence[Any] | None = None, backend: Backend = "auto",
              out: Sequence[Any] | None = None, ids_out: Any = None) -> PartitionResult:
    """Hash-partition rows: ids, counts, offsets and every column scattered,
    stably, into one contiguous partition-ordered buffer.

    ``keys``/``payload`` are sequences of 1-D device arrays or ``Strings``,
    or mappings of name -> column (names then appear in error messages and
    ``result.names``).  A string column is scattered with one pass over its
    offsets and one over its chars, into one offsets and one chars buffer.
    ``valid`` gives an optional bool mask per key column (True = valid); a
    null key hashes to a fixed value.  The masks themselves are not carried:
    pass them as payload columns to keep them.

    ``out`` (optional) reuses caller-owned buffers for ``result.columns``: one
    contiguous 1-D array per column (keys then payload) of the same device,
    length and dtype, sharing no memory with the inputs or with each other;
    for a string column, ``Strings`` of ``nrows + 1`` offsets of its offset
    dtype and exactly ``offsets[-1] - offsets[0]`` chars.
    ``ids_out`` likewise reuses an int32 buffer for ``result.ids``.  Passing
    them skips allocating (and first-touching) the large outputs on every
    call; a bad buffer raises ``ValueError`` naming the column, before
    anything is allocated.
    """
    n = _check_npartitions(npartitions)
    karr, knames, klabels, kinds, valids = _check_keys(device, keys, valid)
    parr, pnames, plabels = _check_payload(device, payload)
    masks = [m for m in valids if m is not None]
    mlabels = [f"validity mask of {lb}" for lb, m in zip(klabels, valids, strict=True)
               if m is not None]
    nrows = _check_lengths(karr + parr + masks, klabels + plabels + mlabels)
    string_bytes = _check_string_data(device, karr + parr, klabels + plabels)
    out = _check_out(device, out, ids_out, karr + parr, klabels + plabels, nrows, string_bytes)
    driver = _backend_for(device, backend)
    cols, kind_names, kmasks = _prepare(karr, kinds, valids)
    ids, counts, offsets, out = driver.partition(cols, kind_names, kmasks, karr + parr, n,
                                                 out=out, ids_out=ids_out,
                                                 string_bytes=string_bytes)
    return PartitionResult(ids=ids, counts=counts, offsets=offsets, columns=out,
                           names=knames + pnames, npartitions=n)


def partition_by_ids(device: Any, ids: Any, payload: Columns = (), npartitions: int = 1, *,
                     out: Sequence[Any] | None = None, backend: Backend = "auto",
                     label: str = "ids") -> PartitionResult:
    """Partition rows by given ids: row ``i`` goes to partition ``ids[i]``.

    :func:`partition` with the hashing replaced by a destination column (what
    dask computes for a hash shuffle, ``set_index`` and ``sort_values``): the
    ids are only counted, then the same scan and scatter place every payload
    column, stably, into one contiguous partition-ordered buffer.

    ``ids`` is a 1-D integer device array of any int or uint dtype, each value
    in ``[0, npartitions)``; else ``ValueError`` naming ``label``, the first
    bad value and its row, before anything is allocated.  Nulls are the
    caller's business (a null's stored value is used as it is).  The ids are
    not copied: ``result.ids`` is ``ids`` itself, in its own dtype.

    ``payload`` and ``out`` are as for :func:`partition` (``out``: one buffer
    per payload column, none of which may share memory with ``ids``).  To
    carry the ids along, pass them as a payload column too.
    """
    n = _check_npartitions(npartitions)
    _check_ids_array(device, ids, label)
    parr, pnames, plabels = _check_payload(device, payload)
    nrows = _check_lengths([ids] + parr, [label] + plabels)
    _check_ids_range(device, ids, n, label)
    string_bytes = _check_string_data(device, parr, plabels)
    out = _check_out(device, out, None, parr, plabels, nrows, string_bytes, what="payload",
                     also_read=[ids])
    driver = _backend_for(device, backend)
    view = ids.view(_IDS_VIEW[ids.dtype.itemsize])
    counts, offsets, out = driver.partition_by_ids(view, parr, n, out=out,
                                                   string_bytes=string_bytes)
    return PartitionResult(ids=ids, counts=counts, offsets=offsets, columns=out, names=pnames,
                           npartitions=n)
