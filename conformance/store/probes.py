"""Probes the property tests share: the device's peak during one call, a device that records
its OOM handlers, and a before/after picture of everything a store's state is made of.

All of them read the suite's own ground truth (the device ledger, the files under
``spill_dir``) or the adapter's ``inspect``; none reaches into a store.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .harness import files_under


# --------------------------------------------------------------------------- files
def tree(directory: str | Path) -> tuple[dict[str, int], set[str]]:
    """``({file: size}, {directory})`` of everything below ``directory`` (itself excluded)."""
    dirs = set()
    for root, subdirs, _files in os.walk(directory):
        dirs.update(os.path.join(root, d) for d in subdirs)
    return files_under(directory), dirs


# --------------------------------------------------------------------------- state
@dataclass(frozen=True)
class StoreState:
    """Everything an operation that must change nothing could change, as seen from outside."""

    tiers: dict
    lru: tuple | None
    device_bytes: int
    host_bytes: int
    disk_bytes: int
    ledger: int
    files: dict

    def diff(self, other: StoreState) -> list[str]:
        out = []
        for name in ("tiers", "lru", "device_bytes", "host_bytes", "disk_bytes", "ledger"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                out.append(f"{name}: {a!r} -> {b!r}")
        if self.files != other.files:
            gone = sorted(os.path.basename(f) for f in set(self.files) - set(other.files))
            new = sorted(os.path.basename(f) for f in set(other.files) - set(self.files))
            resized = sorted(
                os.path.basename(f)
                for f in set(self.files) & set(other.files)
                if self.files[f] != other.files[f]
            )
            out.append(f"files under spill_dir: removed {gone}, created {new}, resized {resized}")
        return out


def state_of(h: Any) -> StoreState:
    gc.collect()
    snap = h.snapshot()
    return StoreState(
        tiers=dict(snap.tiers),
        lru=tuple(snap.lru) if snap.lru is not None else None,
        device_bytes=snap.device_bytes,
        host_bytes=snap.host_bytes,
        disk_bytes=snap.disk_bytes,
        ledger=h.ledger(),
        files=files_under(h.env.spill_dir),
    )


# --------------------------------------------------------------------------- peak
def peak_during(h: Any, op: Callable[[], Any]) -> tuple[Any, int]:
    """Run ``op``; return its result and the device's peak during it (above the baseline)."""
    gc.collect()  # garbage from earlier steps must not be freed (or counted) inside the window
    h.device.reset_peak()
    result = op()
    return result, h.device.peak_bytes() - h.baseline


# --------------------------------------------------------------------------- OOM handlers
@dataclass
class HandlerCall:
    handler: str
    shortfall: int
    result: Any  # the handler's return value, or "raised <exc>"
    before: int  # ledger bytes in use when the call started
    after: int  # ... and when it returned
    peak: int  # the device's peak during the call

    def __repr__(self) -> str:
        return (
            f"<call shortfall={self.shortfall:,} -> {self.result!r}, ledger {self.before:,} -> "
            f"{self.after:,}>"
        )


def recording_device(capacity: int, *, measure_peak: bool = False) -> Any:
    """A sim device that records every call of every OOM handler registered on it.

    ``device.calls`` lists :class:`HandlerCall`; ``device.registered()`` names the
    handlers still registered. With ``measure_peak`` each call also records the
    device's peak during the call (this resets the device's peak).
    """
    from reference_impl import SimDevice

    class RecordingDevice(SimDevice):
        def __init__(self, capacity: int) -> None:
            super().__init__(capacity)
            self.wrappers: dict[int, tuple[Any, Any]] = {}  # id(handler) -> (handler, wrapper)
            self.calls: list[HandlerCall] = []

        def add_oom_handler(self, handler):
            def wrapper(shortfall, _h=handler):
                before = self.bytes_in_use()
                if measure_peak:
                    self.reset_peak()
                try:
                    result = _h(shortfall)
                except BaseException as exc:
                    result = f"raised {type(exc).__name__}: {exc}"
                    raise
                finally:
                    self.calls.append(
                        HandlerCall(
                            repr(_h),
                            shortfall,
                            result,
                            before,
                            self.bytes_in_use(),
                            self.peak_bytes() if measure_peak else -1,
                        )
                    )
                return result

            self.wrappers[id(handler)] = (handler, wrapper)
            super().add_oom_handler(wrapper)

        def remove_oom_handler(self, handler):
            _h, wrapper = self.wrappers.pop(id(handler), (None, handler))
            super().remove_oom_handler(wrapper)

        def registered(self) -> list[str]:
            return [repr(hd) for hd, _w in self.wrappers.values()]

    return RecordingDevice(capacity)
