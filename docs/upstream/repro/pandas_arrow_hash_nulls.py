import pandas as pd
import pyarrow as pa

hash_ = pd.util.hash_pandas_object


def first_hash(values, dtype):
    return hash_(pd.Series(values, dtype=dtype), index=False).iloc[0]


for dtype, value in [
    (pd.ArrowDtype(pa.bool_()), True),
    (pd.ArrowDtype(pa.int64()), 1),
    (pd.ArrowDtype(pa.float64()), 1.0),
    (pd.ArrowDtype(pa.string()), "a"),
    ("boolean", True),  # the masked dtypes, for comparison
    ("Int64", 1),
]:
    with_null = first_hash([value, None], dtype)  # the same value, in an array with a null
    without = first_hash([value, value], dtype)  # ... and in one without
    print(f"{str(dtype):15} {with_null:>20} {without:>20} {'same' if with_null == without else 'DIFFERENT'}")
