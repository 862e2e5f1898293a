"""What a value the store handed out says of itself, on every tier: a proxy answers some of it
(``len``) from what it noted when the value was stored, without bringing the value back."""

from __future__ import annotations

import numpy as np

from conformance import conformance_id, not_exercised, requires
from conformance.store.harness import LIMIT

# First and last dimensions differ: a len() taken from another axis shows.
SHAPES = {"rows3": ((3, 40), "u1"), "rows6": ((6, 2, 5), "<f8")}


def _stores(impl, make_store):
    """(tier name, harness): spilled values go to host (or straight to disk), then to disk."""
    out = [("host", make_store())]
    if {"store.limit.host", "store.spill.disk"} <= impl.capabilities:
        out.append(("disk", make_store(host_limit=0)))
    return out


def _len_wrong(values, where) -> list[str]:
    return [f"{k} {where}: len {len(v)}" for k, v in values.items() if len(v) != SHAPES[k][0][0]]


@conformance_id("STORE-VALUE-004", clause="2.1")
@requires("store")
def test_len_of_a_handed_out_value_on_every_tier(impl, make_store):
    """A 2-D and a 3-D array whose first and last dimensions differ are handed out, and the
    test holds them while they sit on the device, then on a lower tier (host, and disk where
    the store has one): len() of each must be its first dimension there, and again once it is
    read back. (A proxy answers len without bringing the value back; a mutant of the reference
    answered the last dimension, and every value the suite held was 1-D, where they agree.)"""
    wrong = []
    for tier, h in _stores(impl, make_store):
        s = h.store
        for i, (k, (shape, dt)) in enumerate(SHAPES.items()):
            s[k] = h.device.asarray(np.arange(np.prod(shape)).astype(dt).reshape(shape) + i)
        held = {k: s[k] for k in SHAPES}
        wrong += _len_wrong(held, "on the device")
        s["__pressure__"] = h.value(LIMIT, seed=1)  # every other value leaves the device
        tiers = h.snapshot().tiers  # the test holds values: no ledger check until dropped
        del s["__pressure__"]
        if any(tiers[k] == "device" for k in SHAPES):
            not_exercised(f"{tier}: a value of the limit left {dict(tiers)}")
        below = "/".join(sorted({tiers[k] for k in held}))
        wrong += _len_wrong(held, f"held on {below}")
        del held
        wrong += _len_wrong({k: s[k] for k in SHAPES}, f"read back from {below}")
        h.check(SHAPES)
    shapes = {k: shape for k, (shape, _dt) in SHAPES.items()}
    assert not wrong, f"len() of a handed-out value of shape {shapes} is wrong: " + "; ".join(wrong)
