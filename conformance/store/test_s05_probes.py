"""Looking at a value the store handed out is not using it: the probes libraries make to tell
what a value is (here CUDA's ``__cuda_array_interface__``) leave its tier and recency alone."""

from __future__ import annotations

from conformance import conformance_id, requires
from conformance.store.harness import seed_digest, value_digest
from conformance.store.probes import state_of
from conformance.store.tiers import N, spilled_value


@conformance_id("STORE-USE-005", clause="5.3")
@requires("store", "store.evict.manual")
def test_probing_for_the_cuda_array_interface(impl, harness):
    """CUDA libraries probe ``hasattr(v, "__cuda_array_interface__")`` to tell device arrays
    apart. On a handed-out value, spilled and on the device, the probe must answer as on the
    value itself; where that is no CUDA array (sim) it must change no tier, recency, byte count,
    file or the ledger. (The reference brought the value back to answer no, and so did a mutant
    of it, which survived for that reason.)"""
    h = harness
    v, tier = spilled_value(impl, h)
    h.store["b"] = h.value(N, seed=2)
    w = h.store["b"]
    h.store["c"] = h.value(N, seed=3)  # b is on the device, not the most recent
    cuda = hasattr(h.value(8), "__cuda_array_interface__")
    probed = {}
    for what, x in ((f"a value on {tier}", v), ("a value on the device", w)):
        before = state_of(h)
        probed[what] = hasattr(x, "__cuda_array_interface__")
        changed = before.diff(state_of(h))
        assert cuda or not changed, f"probing {what} (no CUDA array) changed the store: {changed}"
    assert set(probed.values()) == {cuda}, f"the value itself answers {cuda}; probes: {probed}"
    if cuda:  # a CUDA array's interface points at its device memory: a use, allowed
        assert v.__cuda_array_interface__["shape"] == (N,)
    assert value_digest(h.device, v) == seed_digest(1, N)
    del v, w
    h.check({"a", "b", "c"})
