"""Errors raised by the device layer."""

from __future__ import annotations


class DeviceOutOfMemoryError(MemoryError):
    """An allocation did not fit even after every OOM handler had its turn.

    A ``MemoryError`` subclass so code written for RMM/CuPy OOMs catches it too.
    """

    def __init__(self, requested: int, in_use: int, capacity: int, device: str = "device"):
        self.requested = requested
        self.in_use = in_use
        self.capacity = capacity
        super().__init__(
            f"{device}: cannot allocate {requested:,} bytes: {in_use:,} bytes in use "
            f"of a {capacity:,}-byte capacity ({capacity - in_use:,} free)"
        )


class DeviceUnavailableError(RuntimeError):
    """The requested device cannot be used on this machine (no CuPy, no GPU, ...)."""
