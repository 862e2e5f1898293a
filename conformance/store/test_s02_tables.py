"""Device tables: one value made of many device buffers (SPEC 2.7, 3.8).

The values a GPU dataframe system spills are tables: a dask-cudf partition is a cuDF DataFrame,
one object over many device buffers (values, validity masks, string offsets and chars). The
suite's table is the reference's public ``Table`` on the suite's device.
"""

from __future__ import annotations

import pyarrow as pa

from conformance import conformance_id, not_exercised, requires
from conformance.api import evict
from conformance.store.harness import LIMIT

ROWS = 600


def _arrow(seed: int) -> pa.Table:
    ints = [None if (i + seed) % 7 == 0 else i * (seed + 1) for i in range(ROWS)]
    return pa.table(
        {
            "k": pa.array(ints, pa.int64()),
            "x": pa.array([float(i) / (seed + 3) for i in range(ROWS)], pa.float64()),
            "s": pa.array([None if i % 11 == 0 else f"s{seed}-{i}" * (i % 4) for i in range(ROWS)]),
        }
    )


def _table(h, seed: int):
    from reference_impl import Table

    return Table.from_arrow(_arrow(seed), h.device)


def _allocs(t) -> int:
    return sum(n for _aid, n in t.allocations())


@conformance_id("STORE-TABLE-001", clause=("2.7", "3.8", "3.1"))
@requires("store", "store.table", "store.evict.manual")
def test_tables_come_back_from_every_tier_counted_once(impl, make_store):
    """Tables of int64 with nulls, float64 and strings with nulls are stored, spilled (to host,
    and to disk where the store has one) and read back equal. Each counts the sum of its distinct
    device allocations, and a zero-copy slice and a column selection of a stored table, stored
    under other keys, share its buffers: counted once (3.2)."""
    disk = {"store.limit.host", "store.spill.disk"} <= impl.capabilities
    h = make_store(host_limit=LIMIT // 2) if disk else make_store()
    s = h.store
    tables = {f"t{i}": _table(h, i) for i in range(3)}
    need = sum(_allocs(t) for t in tables.values())
    if need > h.limit:
        not_exercised(f"three tables need {need:,} device bytes, over the limit {h.limit:,}")
    for k in tables:
        s[k] = tables[k]
    s["t0-rows"] = tables["t0"].slice(100, 400)
    s["t1-cols"] = tables["t1"].select(["s", "k"])
    keys = set(tables) | {"t0-rows", "t1-cols"}
    snap = h.check(keys)
    assert snap.device_bytes == need, (
        f"three tables of {need:,} device bytes in all (a slice and a selection sharing their "
        f"buffers) are counted as {snap.device_bytes:,}"
    )
    expect = {k: _arrow(i) for i, k in enumerate(tables)}
    expect["t0-rows"] = expect["t0"].slice(100, 300)
    expect["t1-cols"] = expect["t1"].select(["s", "k"])
    del tables
    tiers_seen = set()
    for _round in range(2):
        evict(h.adapter, s, 4 * LIMIT)
        tiers_seen |= set(h.snapshot().tiers.values())
        h.check(keys)
        for k, want in expect.items():
            got = s[k].to_arrow()
            assert got.equals(want), f"table {k} came back different after a spill to {tiers_seen}"
        h.check(keys)
    if tiers_seen <= {"device"}:
        not_exercised("evict moved no table off the device")

