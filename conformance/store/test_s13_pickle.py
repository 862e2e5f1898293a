"""Values handed out by the store pickle and unpickle correctly."""

from __future__ import annotations

import pickle

from conformance import conformance_id, requires
from conformance.store.harness import LIMIT, seed_digest, value_digest


@conformance_id("STORE-PICKLE-001", clause="13.2")
@requires("store", "store.pickle")
def test_values_pickle_round_trip(harness):
    h, s = harness, harness.store
    s["a"] = h.value(1000, seed=1)
    v = s["a"]
    w = pickle.loads(pickle.dumps(v))
    assert h.device.is_device_array(w) or isinstance(w, type(v)), f"unpickled to {type(w).__name__}"
    assert value_digest(h.device, w) == seed_digest(1, 1000)
    del v, w
    h.check({"a"})


@conformance_id("STORE-PICKLE-002", clause="13.2")
@requires("store", "store.pickle")
def test_spilled_and_nested_values_pickle(harness):
    h, s = harness, harness.store
    s["n"] = [h.value(500, seed=2), {"x": h.value(LIMIT // 3, seed=3)}]
    for i in range(4):
        s[f"f{i}"] = h.value(LIMIT // 3, seed=10 + i)
    v = s["n"]
    w = pickle.loads(pickle.dumps(v))
    assert value_digest(h.device, w[0]) == seed_digest(2, 500)
    assert value_digest(h.device, w[1]["x"]) == seed_digest(3, LIMIT // 3)
    del v, w
    h.check({"n"} | {f"f{i}" for i in range(4)})
