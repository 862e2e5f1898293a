"""reference_impl.table: device tables with nulls and strings.

Importing this package registers :class:`Table` with the store (one proxy per
table) and with dask's serialization (it stays on its device through comms; one held in a
worker's store travels as host frames and lands in the receiving store, see
reference_impl/store/comms.py).
"""

from __future__ import annotations

from .column import Column
from .comms import register_dask_serializers
from .errors import ColumnNotFoundError, SchemaMismatchError
from .spill import register as _register_with_store
from .table import Table

_register_with_store()
register_dask_serializers()

__all__ = ["Column", "ColumnNotFoundError", "SchemaMismatchError", "Table"]
