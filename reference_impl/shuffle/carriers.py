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
category, dask's unknown categories    tagged values, large_utf8    categories of the values
(``UNKNOWN_CATEGORIES``), unordered    (strings as themselves, any   present (dask's unknown
                                       other value pickled)          semantics), sorted
float16 (numpy)                        float32                      ``astype(float16)``
an ArrowDtype of a Table logical type  what the Table holds it as   the Table's own restore
(dictionary, decimal, date, time,      (``table.logical.held_as``)  (``restore_column``)
halffloat, list, struct, map)
=====================================  ===========================  ==========================

Every carry is exact (float16 widens; the Arrow types follow the Table's one rule), and
nulls travel as Arrow nulls (category codes as -1). Unknown categories are carried whatever
their type (``meta`` does not say it: a string carrier refused the int categories dask users
hold), and only unordered: their order is not in ``meta``, so an ordered one cannot be
restored. A value outside meta's known categories is an error, never a silent null.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from dask.dataframe.utils import UNKNOWN_CATEGORIES

from reference_impl.table.logical import held_as, hold, restore_column


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


_TEXT, _PICKLED = "s:", "p:"  # the tags of an unknown category's carried value


def _tag(value: Any) -> str:
    """One category as text, exactly: a string as itself, anything else pickled (ints,
    floats, timestamps with their zone: whatever a partition's categories hold)."""
    if isinstance(value, str):
        return _TEXT + value
    return _PICKLED + base64.b64encode(pickle.dumps(value, protocol=5)).decode("ascii")


def _untag(text: str) -> Any:
    if text.startswith(_TEXT):
        return text[len(_TEXT) :]
    return pickle.loads(base64.b64decode(text[len(_PICKLED) :]))


def _carry_values(values: pd.Series, dtype: pd.CategoricalDtype) -> Any:
    """Each row's category, tagged (:func:`_tag`), as large_utf8; one tag per distinct
    category, then a take by code (no loop over rows). meta's categories are unknown, so
    this cannot depend on their type."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        codes, categories = values.cat.codes.to_numpy(), values.cat.categories
    else:  # meta says category, the partition holds plain values
        codes, categories = pd.factorize(values, use_na_sentinel=True)
    try:
        tags = pa.array([_tag(c) for c in categories], type=pa.large_string())
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise CarryError(f"a category cannot be carried: {exc}") from None
    indices = pa.array(np.asarray(codes, dtype=np.int64), mask=np.asarray(codes) < 0)
    return pd.arrays.ArrowExtensionArray(tags.take(indices))


def _restore_values(column: pa.ChunkedArray, dtype: pd.CategoricalDtype) -> pd.Categorical:
    """Unknown categories: those of the values in this output, sorted where they sort (what
    dask allows), each back as the value it was."""
    encoded = column.combine_chunks().dictionary_encode() if len(column) else None
    if encoded is None:
        return pd.Categorical([], ordered=False)
    categories = pd.Index([_untag(t) for t in encoded.dictionary.to_pylist()])
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    out = pd.Categorical.from_codes(codes, categories=categories)
    try:
        return out.reorder_categories(categories.sort_values())
    except TypeError:  # categories of mixed types do not sort: first appearance
        return out


def _refuse_ordered_unknown(dtype: pd.CategoricalDtype) -> str | None:
    if dtype.ordered:
        return (
            "an ordered categorical with unknown categories: its order is not in meta; "
            "make its categories known first (.cat.as_known())"
        )
    return None


# Arrow-backed types: the Table's own logical types (reference_impl.table.logical)


def _is_logical(dtype: Any) -> bool:
    if not isinstance(dtype, pd.ArrowDtype):
        return False
    try:
        return held_as(None, dtype.pyarrow_dtype) is not None
    except TypeError:
        return True  # a logical type that cannot travel: refused by _refuse_logical


def _carry_logical(values: pd.Series, dtype: pd.ArrowDtype) -> Any:
    """As the Table holds it: a dictionary decoded, a decimal as its digits, a date or time
    as its integer, halffloat as float32, a list or struct as its bytes (so meta's schema,
    and pandas' metadata, describe a frame pandas can read back: it cannot parse an
    ArrowDtype of a dictionary)."""
    try:
        arr = pa.array(values, from_pandas=not isinstance(values.dtype, pd.ArrowDtype))
        if arr.type != dtype.pyarrow_dtype:  # never to its own type: pyarrow 26's cast of a
            arr = arr.cast(dtype.pyarrow_dtype)  # sliced struct with null-typed fields gives
        arr = hold(arr, dtype.pyarrow_dtype)  # an invalid array (SHUF-DTYPE-003 found it)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise CarryError(str(exc)) from None
    return pd.arrays.ArrowExtensionArray(arr)


def _restore_logical(column: pa.ChunkedArray, dtype: pd.ArrowDtype) -> Any:
    return pd.arrays.ArrowExtensionArray(restore_column(column, dtype.pyarrow_dtype))


def _refuse_logical(dtype: pd.ArrowDtype) -> str | None:
    try:
        held_as(None, dtype.pyarrow_dtype)
    except TypeError as exc:
        return "it " + str(exc).removeprefix("column ")  # the caller names the column
    return None


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
    Carrier(_is_logical, _carry_logical, _restore_logical, _refuse_logical),
)
