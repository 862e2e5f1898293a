"""The reference store's own invariant: each piece of state agrees with its one owner.

Read from the store's internals (this is the reference's test, not the contract): a
record's tier (written only by the accounting) agrees with what its proxy's state holds
and with the recency queue its unit sits in; each total equals the sum over what it
counts; device bytes equal the device ledger's. Clean copies (``ProxyState.clean``, sized
in ``Record.clean_nbytes``) belong to immutable values in memory only, share no memory with
a mutable object, and count in ``disk_bytes``; the files in the spill directory are exactly the ones the store knows, and
their sizes add up to ``disk_bytes``. Nothing here unspills or touches recency.
"""

from __future__ import annotations

import os
from typing import Any

from reference_impl.store import state_of
from reference_impl.store.disk import SpillFile
from reference_impl.store.dispatch import is_immutable
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
        host = disk = clean = 0
        allocs: dict[int, int] = {}
        n_queued = {DEVICE: 0, HOST: 0}
        files: dict[str, int] = {}  # path -> size of every file the store knows
        dead = False  # a proxy died since the drain: its file's path is unknown
        mutable: set[int] = set()  # pids of live records of a mutable type
        for pid, rec in index.records.items():
            assert rec.pid == pid, f"record {pid} says pid {rec.pid}"
            name = index.key_name(rec)
            proxy = rec()
            dead = dead or proxy is None
            if proxy is not None:
                state = state_of(proxy)
                assert state.tier == rec.tier, (
                    f"{name}: the record says {rec.tier}, its proxy holds {state.tier}"
                )
                assert state.rec is rec, f"{name}: the proxy points at another record"
                if type(state.held) is SpillFile:
                    _known(files, state.held, name)
                if not is_immutable(state.handler):
                    mutable.add(pid)
                    assert state.clean is None, f"{name}: a mutable value keeps a clean copy"
                if state.clean is not None:
                    _known(files, state.clean, name)
                    assert state.clean.nbytes == rec.clean_nbytes, (
                        f"{name}: its clean copy has {state.clean.nbytes:,} bytes, the record "
                        f"says {rec.clean_nbytes:,}"
                    )
                else:
                    assert not rec.clean_nbytes, f"{name}: counts a clean copy it does not hold"
            if rec.clean_nbytes:
                assert rec.tier in ("device", "host"), f"{name}: on {rec.tier} with a clean copy"
                disk += rec.clean_nbytes
                clean += rec.clean_nbytes
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
            if entry.is_host_value and entry.peers and entry.peers[0] is not entry:
                owner = entry.peers[0]  # one object under several keys: counted once, its owner's
                assert entry in owner.peers and owner.key in index.entries, f"{key!r}: a stale peer"
                assert entry.value is owner.value and entry.file is owner.file, (
                    f"{key!r} and its peer {owner.key!r} hold different copies"
                )
            elif entry.is_host_value:
                if entry.file is not None:
                    assert entry.value is None, f"{key!r}: on disk yet holds its value"
                    disk += entry.file.nbytes
                    _known(files, entry.file, repr(key))
                else:
                    host += entry.leaf_nbytes
                    holder = index.host_objects.get(id(entry.value))
                    assert holder is entry, f"{key!r}: its object is not findable for a peer"
            elif entry.pids:
                tiers = {index.records[p].tier for p in entry.pids if p in index.records}
                assert len(tiers) <= 1, f"{key!r}: its proxies are split over {sorted(tiers)}"
            assert entry.lru == QUEUE_OF_TIER[tier], f"{key!r} on {tier} sits in queue {entry.lru}"
            n_queued[DEVICE] += entry.lru == DEVICE
            n_queued[HOST] += entry.lru == HOST
        assert set(allocs) == set(index.alloc_pids), "the allocation table holds stale entries"
        for aid, holders in index.alloc_pids.items():  # a write through a mutable sharer
            if type(holders) is set and holders & mutable:  # would make a clean copy stale
                for p in holders:
                    rec = index.records.get(p)
                    assert rec is None or not rec.clean_nbytes, (
                        f"{index.key_name(rec)}: keeps a clean copy, yet allocation {aid} is "
                        "shared with a mutable object"
                    )
        assert accounting.clean_bytes == clean, (
            f"clean_bytes {accounting.clean_bytes:,} != the clean copies' {clean:,}"
        )
        if not dead:  # the ground truth: the directory holds exactly the files counted
            here = store.spill_dir
            names = os.listdir(here) if os.path.isdir(here) else []  # removed by the world
            on_disk = {os.path.join(here, f): os.path.getsize(os.path.join(here, f)) for f in names}
            assert on_disk == files, (
                f"spill_dir holds {sorted(on_disk)}, the store knows {sorted(files)}"
            )
            assert sum(files.values()) == accounting.disk_bytes, (
                f"disk_bytes {accounting.disk_bytes:,} != {sum(files.values()):,} bytes of files"
            )
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
        for oid, holder in index.host_objects.items():  # no deleted key or spilled value kept
            assert index.entries.get(holder.key) is holder and id(holder.value) == oid, (
                f"{holder.key!r}: a stale entry in the host-object lookup"
            )


def _known(files: dict[str, int], file: SpillFile, name: str) -> None:
    """Note ``file`` (held by ``name``); one file held twice would be removed twice."""
    assert file.path not in files, f"{name}: file {file.path} is held twice"
    files[file.path] = file.nbytes
