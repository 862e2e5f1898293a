"""Broken stores that only a moving world shows (STORE-STATE-003, conformance/store/world.py).

Each is the reference with one ordering bug on a path that runs only when the environment
misbehaves: a deserialization that raises, a device that is full when a value comes back.
"""

from __future__ import annotations

from broken_base import Patching


class HostLoadRemovesFileFirst(Patching):
    """Reading a host value back from disk removes its file before the value is rebuilt:
    when its deserialization raises half-way, the value is gone."""

    name = "broken-host-load-removes-file-first"
    violates = ("13.5",)

    def patch(self):
        from reference_impl.store import serialize
        from reference_impl.store.mover import TierMover

        def load_host_value(self, entry):
            file = entry.file
            payload = self.disk.read(file, repr(entry.key))
            self.stats["disk_read_bytes"] += file.nbytes
            file.remove()  # the bug: the file goes before the value is back
            entry.file = None
            entry.value = serialize.loads(payload)
            self.accounting.move_value("disk", file.nbytes, "host", entry.leaf_nbytes)
            self.place(entry)

        self.set(TierMover, "load_host_value", load_host_value)


class UnspillConsumesFile(Patching):
    """An unspill reads a value's spill file and removes it at once, before the copy back to
    the device has succeeded: on a full device the read fails and the value is gone."""

    name = "broken-unspill-consumes-file"
    violates = ("6.5",)

    def patch(self):
        from reference_impl.store.disk import SpillDir

        read = SpillDir.read

        def consuming_read(self, file, key):
            payload = read(self, file, key)
            file.remove()  # the bug: read once, the file is gone
            return payload

        self.set(SpillDir, "read", consuming_read)


ZOO = {
    "host_load_removes_file_first": (HostLoadRemovesFileFirst, "STORE-STATE-003"),
    "unspill_consumes_file": (UnspillConsumesFile, "STORE-STATE-003"),
}
