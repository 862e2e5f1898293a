"""Errors and warnings raised by the spilling store."""

from __future__ import annotations


class SpillIntegrityError(RuntimeError):
    """A spill file failed its MAC (keyed BLAKE3) or size check: it was tampered with or truncated.

    Raised *before* anything is deserialized, and names the key and the file.
    """


class SpillDirectoryError(OSError):
    """The spill directory cannot be created or written to."""


class StoreClosedError(RuntimeError):
    """The store was closed; its spilled data is gone."""


class SpillWarning(RuntimeWarning):
    """A spill to disk failed (full disk, unpicklable value); the value stayed in host memory."""
