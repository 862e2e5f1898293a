"""What holds after every step, on every store: the harness's store-wide invariants (the
model's keys, the ledger, the limits, the files), recency order and host payloads."""

from __future__ import annotations

import gc
import os

from hypothesis.stateful import invariant

from ..harness import files_under
from .base import Side


class Invariants:
    """Checked by hypothesis after every rule."""

    @invariant()
    def check_all(self):
        """Clauses 3.1, 3.5, 3.6, 3.7, 4.1, 4.4, 5.5, 9.2 after every step, on every store."""
        for s in self.sides:  # what each store says now; the ledger then checks the sum
            s.device_bytes = s.h.snapshot().device_bytes
        world = self.world_held()
        for s in self.sides:
            others = self._others_device(s) + world
            snap = s.h.check(s.model.keys, held=others, oversize=s.model.oversize(self.limit))
            s.device_bytes = snap.device_bytes
            self._check_recency(s, snap)
            self._check_host_payload(s, snap)
            if not s.model.keys and not s.proxies:
                gc.collect()
                snap = s.h.snapshot()
                assert (snap.device_bytes, snap.host_bytes, snap.disk_bytes) == (0, 0, 0), (
                    f"nothing is stored, yet the store accounts {snap}"
                )
                left = files_under(s.h.env.spill_dir)
                assert not left, f"nothing is stored, yet spill_dir holds {sorted(left)}"
        self._check_files_inside()

    def _check_files_inside(self) -> None:
        """Clause 9.2: whatever the key, spill files stay inside the store's directory."""
        if not self.sides:
            return
        own = tuple(os.path.join(s.h.env.spill_dir, "") for s in self.sides)
        stray = [p for p in files_under(self.here) if not p.startswith(own)]
        assert not stray, f"files outside every store's spill_dir: {stray}"

    def _check_host_payload(self, side: Side, snap) -> None:
        """Clause 3.7: host-only values are measured deeply, not by their outer object."""
        if not self.has("store.spill.host"):
            return
        floor = side.model.host_payload_floor(snap.tiers)
        assert snap.host_bytes >= floor, (
            f"host_bytes={snap.host_bytes:,} but host-only values in the host tier hold at "
            f"least {floor:,} bytes of buffers"
        )

    def _check_recency(self, side: Side, snap) -> None:
        """Clauses 5.4 and 5.5: the device holds the most recently used; host before disk."""
        if not self.has("store.lru.strict"):
            return
        cascade = (
            self.host_limit is not None
            and self.has("store.limit.host")
            and not self._disk_failed  # clause 9.6: the host limit no longer applies
        )
        why = side.model.recency_violation(snap.tiers, snap.lru, self.limit, cascade)
        assert why is None, why
