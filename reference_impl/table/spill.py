"""Teach the store that a Table is one device object (one proxy, one unit).

Registered in the store's type registry (``register_device_type``), so the
store never imports the table: data flows device -> store -> table.
"""

from __future__ import annotations

from typing import Any

from reference_impl.store import serialize
from reference_impl.store.dispatch import register_device_type
from reference_impl.store.serialize import Payload

from . import devops
from .frames import device_for, device_header, encode
from .table import Table


class TableType:
    """A Table moves between tiers whole: every column, mask and offsets buffer."""

    # A Table has no mutating API: its columns are immutable once built (``Column``), and
    # every operation returns a new table. So the file a table was read back from stays
    # exact while the table lives, and the store keeps it as a clean copy: evicting the
    # table again reuses that file instead of serializing and writing it once more.
    immutable = True

    def allocations(self, obj: Table, device: Any) -> list[tuple[int, int]]:
        """Each distinct base allocation once (columns sharing one count once)."""
        if obj.device is not device:
            raise TypeError(
                f"this Table lives on {devops.device_name(obj.device)}, not on the store's "
                f"device {devops.device_name(device)}"
            )
        return obj.allocations()

    def to_host(self, obj: Table, device: Any) -> Payload:
        """Host frames (the d2h copies) kept out of band by pickle 5: no further copy."""
        return serialize.dumps(encode(obj))

    def to_device(self, payload: Payload, device: Any) -> Table:
        header, frames = serialize.loads(payload)
        return Table._from_frames(header, frames, device)

    def metadata(self, obj: Table) -> dict[str, Any]:
        return {
            "nbytes": obj.nbytes,
            "num_rows": obj.num_rows,
            "num_columns": obj.num_columns,
            "column_names": obj.column_names,
            "schema": obj.schema,
            "__len__": obj.num_rows,
            "device_spec": device_header(obj.device),
        }

    def default_device(self, meta: dict[str, Any]) -> Any:
        """Where a spilled Table proxy pickled to another process unspills: the same
        sim device if it lives there, else that process's default (see ``frames``)."""
        return device_for(meta.get("device_spec") or {"kind": "sim", "token": None})


TABLE = TableType()


def register() -> None:
    """Idempotent: a Table stored in any ProxifyHostFile becomes one proxy."""
    register_device_type(Table, TABLE)
