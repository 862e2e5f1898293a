"""What the machine checks inside a rule: the device's peak during the operation, the value
that comes back, and that read-only or rejected operations change nothing."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from .. import strategies as S
from .base import Side


class Checks:
    """The checks rules make around and after the store's operations."""

    @contextmanager
    def _window(self, side: Side, what: str, extra: int = 0, held: int = 0) -> Iterator[None]:
        """Clause 4.2: the device's own peak during the operation stays within the limit.

        The bound is the larger of what the device held on entry and the limit (plus
        the other store and ``extra``: an over-limit value used transiently, or what
        the test itself allocates inside the window). ``held`` is what the test built
        before the window and keeps outside the store: it is in ``entry`` already, and
        the limit side must count it too (clause 4.2 subtracts what the caller holds).
        What the environment holds on the device (conformance.store.world) is held too.
        """
        dev = self.device
        dev.reset_peak()
        self.world_reset_peak()
        entry = dev.bytes_in_use()
        yield
        peak = dev.peak_bytes()
        others = self._others_device(side)
        held += self.world_peak_held()
        bound = max(entry, self.baseline + others + held + self.limit) + extra
        assert peak <= bound, (
            f"{what}: the device peaked at {peak - self.baseline:,} bytes in use; the bound is "
            f"{bound - self.baseline:,} (limit {self.limit:,}, entry {entry - self.baseline:,}, "
            f"other store {others:,}, held by the test {held:,}, allowance {extra:,})"
        )

    def _check_value(self, side: Side, key: Hashable, got: Any) -> None:
        """Clauses 2.1 and 2.2: a value comes back exactly (dtype, byte order, shape, layout, bits)."""
        why = S.mismatch(self.device, got, side.model.held(key).expected)
        assert why is None, f"store[{key!r}] came back wrong: {why}"

    def _unchanged(self, side: Side, before, what: str) -> None:
        """Clauses 5.3 and 1.15: a read-only or rejected operation changes nothing."""
        after = side.h.snapshot()
        assert dict(after.tiers) == dict(before.tiers), (
            f"{what} changed tiers: {dict(before.tiers)} -> {dict(after.tiers)}"
        )
        if before.lru is not None and self.has("store.lru.strict"):
            assert list(after.lru) == list(before.lru), (
                f"{what} changed recency: {list(before.lru)} -> {list(after.lru)}"
            )
        for name in ("device_bytes", "host_bytes", "disk_bytes"):
            assert getattr(after, name) == getattr(before, name), (
                f"{what} changed {name}: {getattr(before, name):,} -> {getattr(after, name):,}"
            )

    def _minimal_applies(self, side: Side) -> bool:
        """Whether clause 4.9 is judged here: the environment's allocations make spill on
        demand legitimate, and with externals the value moved last is not certain."""
        return not (self.world or side.proxies) and self.has("store.lru.strict")

    def _minimal(
        self, side: Side, before, what: str, evicted: int | None = None, set_key: Any = None
    ) -> None:
        """Clause 4.9: of what ``what`` moved off the device, the most recently used was
        needed: it does not fit beside what stayed (or, for ``evict(n)``, the bytes freed
        without it fall short of ``n``)."""
        if before is None:
            return
        after = side.h.snapshot()
        was = {k: t for k, t in before.tiers.items() if set_key is None or k != set_key}
        last = side.model.last_moved_off(was, after.tiers, self.limit)
        if last is None:
            return
        key, size = last
        if evicted is None:
            assert after.device_bytes + size > self.limit, (
                f"{what} moved {key!r} ({size:,} bytes) off the device, yet it fits beside what "
                f"stayed ({after.device_bytes:,} of {self.limit:,}): only the least recently "
                f"used values the operation needs room from may move"
            )
        else:
            freed = before.device_bytes - after.device_bytes
            assert freed - size < evicted, (
                f"{what} freed {freed:,} bytes, {freed - size:,} of them without {key!r}: "
                f"moving it ({size:,} bytes) was not needed"
            )

    def _missing(self, side: Side, key: Hashable, op: str) -> None:
        """Clauses 1.2 and 1.15: ``op`` of a missing key raises KeyError, changing nothing."""
        before = side.h.snapshot()
        store = side.h.store
        try:
            if op == "get":
                store[key]
            elif op == "del":
                del store[key]
            else:
                store.pop(key)
        except KeyError:
            pass
        else:
            raise AssertionError(f"{op} of missing key {key!r} did not raise KeyError")
        self._unchanged(side, before, f"{op} of a missing key")
