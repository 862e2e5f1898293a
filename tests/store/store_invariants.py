"""The reference store's own invariant: each piece of state agrees with its one owner.

Read from the store's internals (this is the reference's test, not the contract): a
record's tier (written only by the accounting) agrees with what its proxy's state holds
and with the recency queue its unit sits in; each total equals the sum over what it
counts; device bytes equal the device ledger's. Nothing here unspills or touches recency.
"""

from __future__ import annotations

from typing import Any

from reference_impl.store import state_of
from reference_impl.store.recency import DEVICE, HOST, NONE

QUEUE_OF_TIER = {"device": DEVICE, "host": HOST, "disk": NONE}


def check_store(store: Any, ledger_bytes: int | None = None) -> None:
    """Raise AssertionError naming the first disagreement; ``ledger_bytes`` is the device
    ledger's count of this store's allocations, where the caller knows it."""
    if store.closed:
        return
    with store._lock:
        store._tracker.drain()  # what a store call would do first
        accounting, index, recency = store._accounting, store._index, store._recency
        host = disk = 0
        allocs: dict[int, int] = {}
        n_queued = {DEVICE: 0, HOST: 0}
        for pid, rec in index.records.items():
            assert rec.pid == pid, f"record {pid} says pid {rec.pid}"
            name = index.key_name(rec)
            proxy = rec()
            if proxy is not None:
                state = state_of(proxy)
                assert state.tier == rec.tier, (
                    f"{name}: the record says {rec.tier}, its proxy holds {state.tier}"
                )
                assert state.rec is rec, f"{name}: the proxy points at another record"
            if rec.tier == "device":
                assert rec.held_nbytes == 0, f"{name}: on device yet holds {rec.held_nbytes} off it"
                for aid, nbytes in rec.allocs.items():
                    holders = index.alloc_pids.get(aid)
                    assert holders == pid or (type(holders) is set and pid in holders), (
                        f"{name}: allocation {aid} is not in the table"
                    )
                    allocs[aid] = nbytes
            else:
                assert not rec.allocs, f"{name}: on {rec.tier} yet holds device allocations"
                if rec.tier == "host":
                    host += rec.held_nbytes
                else:
                    disk += rec.held_nbytes
            if rec.external:
                assert rec.lru == QUEUE_OF_TIER[rec.tier], (
                    f"external {pid} on {rec.tier} sits in queue {rec.lru}"
                )
                n_queued[DEVICE] += rec.lru == DEVICE
                n_queued[HOST] += rec.lru == HOST
            else:
                assert rec.lru == NONE, f"{name}: a keyed record sits in a queue of its own"
        for key, entry in index.entries.items():
            tier = index.tier(entry)
            if entry.is_host_value:
                if entry.file is not None:
                    assert entry.value is None, f"{key!r}: on disk yet holds its value"
                    disk += entry.file.nbytes
                else:
                    host += entry.leaf_nbytes
            elif entry.pids:
                tiers = {index.records[p].tier for p in entry.pids if p in index.records}
                assert len(tiers) <= 1, f"{key!r}: its proxies are split over {sorted(tiers)}"
            assert entry.lru == QUEUE_OF_TIER[tier], f"{key!r} on {tier} sits in queue {entry.lru}"
            n_queued[DEVICE] += entry.lru == DEVICE
            n_queued[HOST] += entry.lru == HOST
        assert set(allocs) == set(index.alloc_pids), "the allocation table holds stale entries"
        device = sum(allocs.values())
        totals = (accounting.device_bytes, accounting.host_bytes, accounting.disk_bytes)
        assert totals == (device, host, disk), (
            f"totals (device, host, disk) {totals} != the sums over records {(device, host, disk)}"
        )
        public = (store.device_bytes, store.host_bytes)
        assert public == (device, host), f"the O(1) counters {public} != the sums {(device, host)}"
        if ledger_bytes is not None:
            assert device == ledger_bytes, f"device bytes {device:,} != the ledger's {ledger_bytes:,}"
        assert (recency.n_device, recency.n_host) == (n_queued[DEVICE], n_queued[HOST]), (
            f"recency counts {(recency.n_device, recency.n_host)} != units queued "
            f"{(n_queued[DEVICE], n_queued[HOST])}"
        )
        assert index.links == index.count_links(), "the link count drifted"
