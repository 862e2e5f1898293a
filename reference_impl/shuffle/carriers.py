"""Carriers: a frame dtype a Table cannot hold, moved as one it can and restored from meta.

The device Table keeps its own small type set (:mod:`reference_impl.table.dtypes`); the
lazy shuffle (:mod:`.in_dask`) moves a few more frame dtypes by carrying each, losslessly,
as a type the Table holds, and casting back to ``meta``'s exact dtype on the way out:

=====================================  ===========================  ==========================
frame dtype (in ``meta``)              carried as                   restored
=====================================  ===========================  ==========================
category, known categories             its codes in meta's          ``from_codes`` with meta's
                                       categories (int8..int64,     dtype: exactly meta's
                                       -1 for null)                 categories, order, ordered
category, dask's unknown categories    its values, large_utf8       categories of the values
(``UNKNOWN_CATEGORIES``), unordered                                 present (dask's unknown
                                                                    semantics), sorted
float16 (numpy)                        float32                      ``astype(float16)``
halffloat[pyarrow]                     float32                      Arrow cast back
date32[day][pyarrow]                   int32 (days since epoch)     Arrow cast back
date64[ms][pyarrow]                    int64 (ms since epoch)       Arrow cast back
time32[s/ms][pyarrow]                  int32 (since midnight)       Arrow cast back, its unit
time64[us/ns][pyarrow]                 int64 (since midnight)       Arrow cast back, its unit
decimal32/64/128/256(p, s)[pyarrow]    utf8, its exact digits       Arrow cast back to (p, s)
=====================================  ===========================  ==========================

Every carry is exact (float16 widens; dates and times travel as their own integers; a
decimal's string has all its digits), and nulls travel as Arrow nulls (category codes as
-1). Unknown categories are carried only when they are strings and unordered: their order
is not in ``meta``, so an ordered one cannot be restored. A value outside meta's known categories is an error, never a silent null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from dask.dataframe.utils import UNKNOWN_CATEGORIES


class CarryError(ValueError):
    """A partition's values cannot be carried as meta's dtype (the caller names where)."""


@dataclass(frozen=True)
class Carrier:
    """How one frame dtype travels: the carry (a partition's values, cast to meta's dtype,
    as something ``pa.Table.from_pandas`` turns into the carried type exactly; also run on
    ``meta`` itself, which gives the schema) and the restore (to meta's exact dtype)."""

    matches: Callable[[Any], bool]
    carry: Callable[[pd.Series, Any], Any]
    restore: Callable[[pa.ChunkedArray, Any], Any]
    refuse: Callable[[Any], str | None] = lambda dtype: None  # why meta's dtype can't go


def carrier_for(dtype: Any) -> Carrier | None:
    """The carrier of a frame dtype, or None when the Table holds it (or nothing carries it)."""
    return next((c for c in CARRIERS if c.matches(dtype)), None)


# categoricals


def _is_category(dtype: Any) -> bool:
    return isinstance(dtype, pd.CategoricalDtype)


def _known(dtype: Any) -> bool:
    """dask's ``has_known_categories``, for a dtype."""
    categories = dtype.categories if _is_category(dtype) else None
    return categories is not None and UNKNOWN_CATEGORIES not in categories


def _codes_type(dtype: pd.CategoricalDtype) -> pa.DataType:
    return pa.from_numpy_dtype(pd.Categorical([], dtype=dtype).codes.dtype)


def _carry_codes(values: pd.Series, dtype: pd.CategoricalDtype) -> np.ndarray:
    """Codes in meta's categories, whatever categories (if any) the partition has."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        # each partition code's meta code; a null's -1 picks the -1 appended last
        to_meta = np.append(dtype.categories.get_indexer(values.cat.categories), -1)
        codes = to_meta[values.cat.codes.to_numpy()]
    else:
        codes = dtype.categories.get_indexer(pd.Index(values))
    lost = (codes == -1) & values.notna().to_numpy()
    if lost.any():
        outside = pd.unique(values[lost].astype(object))[:5]
        raise CarryError(
            f"values {list(outside)} are not among meta's categories "
            f"{list(dtype.categories[:10])}{' ...' if len(dtype.categories) > 10 else ''}"
        )
    return codes.astype(_codes_type(dtype).to_pandas_dtype())


def _restore_codes(column: pa.ChunkedArray, dtype: pd.CategoricalDtype) -> pd.Categorical:
    return pd.Categorical.from_codes(column.to_numpy(), dtype=dtype)


def _carry_values(values: pd.Series, dtype: pd.CategoricalDtype) -> Any:
    categorical = isinstance(values.dtype, pd.CategoricalDtype)
    if categorical and values.cat.categories.inferred_type not in ("string", "empty"):
        raise CarryError(
            f"unknown categories are carried as strings, and these are "
            f"{values.cat.categories.dtype}: make them known first (.cat.as_known())"
        )
    try:
        arr = pa.array(values.to_numpy(dtype=object), type=pa.large_string(), from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise CarryError(f"unknown categories are carried as strings: {exc}") from None
    return pd.arrays.ArrowExtensionArray(arr)


def _restore_values(column: pa.ChunkedArray, dtype: pd.CategoricalDtype) -> pd.Categorical:
    """Unknown categories: those of the values in this output, sorted (what dask allows)."""
    return pd.Categorical(column.to_pandas(), ordered=False)


def _refuse_ordered_unknown(dtype: pd.CategoricalDtype) -> str | None:
    if dtype.ordered:
        return (
            "an ordered categorical with unknown categories: its order is not in meta; "
            "make its categories known first (.cat.as_known())"
        )
    return None


# Arrow-backed and numpy types, carried by Arrow casts


def _arrow(test: Callable[[pa.DataType], bool]) -> Callable[[Any], bool]:
    return lambda dtype: isinstance(dtype, pd.ArrowDtype) and test(dtype.pyarrow_dtype)


def _cast_carrier(test: Callable[[pa.DataType], bool], carried: pa.DataType) -> Carrier:
    """An ArrowDtype carried by an Arrow cast to ``carried`` and restored by one back."""

    def carry_(values: pd.Series, dtype: pd.ArrowDtype) -> Any:
        try:
            arr = pa.array(values, from_pandas=not isinstance(values.dtype, pd.ArrowDtype))
            arr = arr.cast(dtype.pyarrow_dtype).cast(carried)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise CarryError(str(exc)) from None
        return pd.arrays.ArrowExtensionArray(arr)

    def restore_(column: pa.ChunkedArray, dtype: pd.ArrowDtype) -> Any:
        return pd.arrays.ArrowExtensionArray(column.cast(dtype.pyarrow_dtype))

    return Carrier(_arrow(test), carry_, restore_)


def _is_decimal(type_: pa.DataType) -> bool:
    return pa.types.is_decimal(type_)  # 32, 64, 128 and 256 bits


def _carry_float16(values: pd.Series, dtype: np.dtype) -> np.ndarray:
    try:
        return values.to_numpy(dtype=np.float16).astype(np.float32)
    except (TypeError, ValueError) as exc:
        raise CarryError(str(exc)) from None


CARRIERS: tuple[Carrier, ...] = (
    Carrier(_known, _carry_codes, _restore_codes),
    Carrier(_is_category, _carry_values, _restore_values, _refuse_ordered_unknown),
    Carrier(
        lambda dtype: isinstance(dtype, np.dtype) and dtype == np.float16,
        _carry_float16,
        lambda column, dtype: column.to_numpy().astype(np.float16),
    ),
    _cast_carrier(pa.types.is_float16, pa.float32()),
    _cast_carrier(pa.types.is_date32, pa.int32()),
    _cast_carrier(pa.types.is_date64, pa.int64()),
    _cast_carrier(pa.types.is_time32, pa.int32()),
    _cast_carrier(pa.types.is_time64, pa.int64()),
    _cast_carrier(_is_decimal, pa.string()),
)
