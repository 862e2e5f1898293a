"""A host object grown in place between its two sets: deleting the key it was counted by moves
the count to the other key's larger measure, and the delete runs no cascade, so host_bytes
ends over the host limit (outside the contract: how a changed object is counted is open).

Run from the repo root:
``.venv/bin/python docs/findings/reference-repro/host_peer_grown_between_sets.py``.
Prints the totals after each step; exits 1 while host_bytes ends over the limit, 0 otherwise.
"""

from __future__ import annotations

import sys
import tempfile

from reference_impl import ProxifyHostFile, get_device

LIMIT = 16_384
with tempfile.TemporaryDirectory() as root:
    store = ProxifyHostFile(
        device=get_device("sim"),
        device_memory_limit=1 << 20,
        memory_limit=LIMIT,
        local_directory=root,
    )
    x = bytearray(1000)
    store["first"] = x  # counted by its size now: 1,000 bytes and a header
    x.extend(bytes(2 * LIMIT))  # the caller grows it in place ...
    store["second"] = x  # ... and stores it again: one object, two keys, counted once
    del x
    print("after the two sets:", store.snapshot())
    del store["first"]  # the count moves to "second"'s measure (about 33 KB)
    snap = store.snapshot()
    print("after deleting 'first':", snap)
    store.close()
over = snap.host_bytes > LIMIT
print(f"host_bytes {snap.host_bytes:,} {'>' if over else '<='} host limit {LIMIT:,}")
sys.exit(1 if over else 0)
