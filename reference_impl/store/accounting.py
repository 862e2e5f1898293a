"""The store's byte totals per tier, and where each record is: one writer for both.

A record changes tier in one call that uncounts it where it was and counts it where
it lands, so the totals cannot drift from the records (the reviewer of issue 28 found
``host_bytes`` and ``disk_bytes`` written from three modules). Device bytes are
counted once per base allocation: the index's allocation table says when one is first
held and when its last holder lets go, and this object counts it.

A host value (a key's value without device objects) is counted by the size it has on
the tier it sits on: its deep ``sizeof`` in memory, its file's size on disk.
"""

from __future__ import annotations

from .records import Record

DEVICE, HOST, DISK = "device", "host", "disk"
GONE = "gone"  # a forgotten record's tier: counted nowhere


class Accounting:
    """Device, host and disk byte totals; the only writer of them and of ``Record.tier``."""

    __slots__ = ("device_bytes", "host_bytes", "disk_bytes")

    def __init__(self) -> None:
        self.device_bytes = 0
        self.host_bytes = 0
        self.disk_bytes = 0

    def clear(self) -> None:
        self.device_bytes = self.host_bytes = self.disk_bytes = 0

    # --- device allocations ------------------------------------------------------
    def allocated(self, nbytes: int) -> None:
        """A base allocation is held by the store for the first time."""
        self.device_bytes += nbytes

    def freed(self, nbytes: int) -> None:
        """The last holder of a base allocation let go of it."""
        self.device_bytes -= nbytes

    # --- records -------------------------------------------------------------------
    def move(self, rec: Record, dst: str, nbytes: int = 0) -> None:
        """``rec`` leaves its tier and holds ``nbytes`` on ``dst`` (0 on device, where its
        allocations are counted instead)."""
        src = rec.tier
        if src == HOST:
            self.host_bytes -= rec.held_nbytes
        elif src == DISK:
            self.disk_bytes -= rec.held_nbytes
        if dst == HOST:
            self.host_bytes += nbytes
        elif dst == DISK:
            self.disk_bytes += nbytes
        rec.tier = dst
        rec.held_nbytes = nbytes

    def resize(self, rec: Record, nbytes: int) -> None:
        """``rec`` stays on host or disk with a new size (an in-place change written back)."""
        self.move(rec, rec.tier, nbytes)

    def forget(self, rec: Record) -> None:
        """``rec`` leaves the store: its host or disk bytes go (device bytes go with its
        allocations, freed by the index)."""
        self.move(rec, GONE)

    # --- host values ---------------------------------------------------------------
    def add_value(self, tier: str, nbytes: int) -> None:
        """A host value of ``nbytes`` arrives on ``tier`` (host or disk)."""
        if tier == HOST:
            self.host_bytes += nbytes
        else:
            self.disk_bytes += nbytes

    def remove_value(self, tier: str, nbytes: int) -> None:
        """A host value of ``nbytes`` leaves ``tier``."""
        self.add_value(tier, -nbytes)

    def move_value(self, src: str, src_nbytes: int, dst: str, dst_nbytes: int) -> None:
        """A host value goes from memory to its file, or back."""
        self.add_value(src, -src_nbytes)
        self.add_value(dst, dst_nbytes)
