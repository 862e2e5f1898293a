"""The store's byte totals per tier, and where each record is: one writer for both.

A record changes tier in one call that uncounts it where it was and counts it where
it lands, so the totals cannot drift from the records (the reviewer of issue 28 found
``host_bytes`` and ``disk_bytes`` written from three modules). Device bytes are
counted once per base allocation: the index's allocation table says when one is first
held and when its last holder lets go, and this object counts it.

A host value (a key's value without device objects) is counted by the size it has on
the tier it sits on: its deep ``sizeof`` in memory, its file's size on disk.

A *clean copy* (``ProxyState.clean``: the spill file an immutable value was read back
from, kept while the value is on device or host; its size in ``Record.clean_nbytes``) is a
real file in the spill directory, so it is counted in ``disk_bytes`` for as long as it
exists ("disk_bytes == the sizes of the store's files", SPEC 3.5, keeps holding);
``clean_bytes`` says how much of ``disk_bytes`` it is. The file and its count change in one
call here (:meth:`keep_clean`, :meth:`reuse_clean`, :meth:`drop_clean`), so neither can be
left behind.
"""

from __future__ import annotations

from typing import Any

from .proxy import state_of
from .records import Record

DEVICE, HOST, DISK = "device", "host", "disk"
GONE = "gone"  # a forgotten record's tier: counted nowhere


class Accounting:
    """Device, host and disk byte totals; the only writer of them, of ``Record.tier`` and of
    a clean copy (``Record.clean_nbytes`` with ``ProxyState.clean``)."""

    __slots__ = ("device_bytes", "host_bytes", "disk_bytes", "clean_bytes")

    def __init__(self) -> None:
        self.device_bytes = 0
        self.host_bytes = 0
        self.disk_bytes = 0
        self.clean_bytes = 0  # the part of disk_bytes that is clean copies

    def clear(self) -> None:
        self.device_bytes = self.host_bytes = self.disk_bytes = self.clean_bytes = 0

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
        allocations, freed by the index), and its clean copy if it has one."""
        if rec.clean_nbytes:
            self.drop_clean(rec)
        self.move(rec, GONE)

    # --- clean copies ----------------------------------------------------------------
    def keep_clean(self, rec: Record, state: Any) -> None:
        """``rec`` comes back from disk to the device and keeps the file its proxy held
        (``state.held``, replaced next by the caller) as its clean copy: still on disk, so
        still counted in ``disk_bytes``."""
        file = state.held
        self.move(rec, DEVICE)
        state.clean = file
        rec.clean_nbytes = file.nbytes
        self.clean_bytes += file.nbytes
        self.disk_bytes += file.nbytes

    def reuse_clean(self, rec: Record, state: Any) -> Any:
        """``rec`` (on device or host) goes to disk on its clean copy: nothing is written.

        Returns the file, for the caller to make ``state.held``; it was counted already.
        """
        file, state.clean = state.clean, None
        nbytes = rec.clean_nbytes
        rec.clean_nbytes = 0
        self.clean_bytes -= nbytes
        self.disk_bytes -= nbytes  # counted again by the move, now as what rec holds
        self.move(rec, DISK, nbytes)
        return file

    def drop_clean(self, rec: Record) -> None:
        """``rec``'s clean copy is stale or no longer wanted: uncounted, and its file removed
        (a dead proxy's file died with it)."""
        nbytes = rec.clean_nbytes
        rec.clean_nbytes = 0
        self.clean_bytes -= nbytes
        self.disk_bytes -= nbytes
        proxy = rec()
        if proxy is not None:
            state = state_of(proxy)
            file, state.clean = state.clean, None
            if file is not None:
                file.remove()

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
