"""reference_impl.table: device tables with nulls and strings.

Importing this package registers nothing: ``reference_impl.register()`` teaches the
store that a Table is one proxy (``spill.py``) and dask's serialization and sizeof
that it stays on its device through comms (``comms.py``; one held in a worker's store
travels as host frames and lands in the receiving store, see reference_impl/store/comms.py).
"""

from __future__ import annotations

from .column import Column
from .errors import ColumnNotFoundError, SchemaMismatchError
from .table import Table

__all__ = ["Column", "ColumnNotFoundError", "SchemaMismatchError", "Table"]
