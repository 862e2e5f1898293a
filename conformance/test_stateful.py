"""The generative state machines: random programs over every mapping method, rich values
and rich keys, with the model, the device ledger, the device's peak and the files on disk
checked after every step."""

from __future__ import annotations

from hypothesis.stateful import run_state_machine_as_test

from conformance import conformance_id, requires
from conformance.harness import LeakGuard
from conformance.machines import make_store_machine


@conformance_id("STORE-STATE-001")
@requires("store")
def test_store_state_machine(impl, device_kind, tmp_path, hyp_settings):
    """String keys (paths, collisions, long ones), every value shape, every method."""
    guard = LeakGuard()
    machine = make_store_machine(impl.adapter, impl.capabilities, device_kind, tmp_path)
    run_state_machine_as_test(machine, settings=hyp_settings(heavy=True))
    guard.check()


@conformance_id("STORE-STATE-002")
@requires("store")
def test_store_state_machine_any_keys(impl, device_kind, tmp_path, hyp_settings):
    """The same machine over any hashable key dask uses: 1, 1.0 and True are one key."""
    guard = LeakGuard()
    machine = make_store_machine(
        impl.adapter, impl.capabilities, device_kind, tmp_path, any_keys=True
    )
    run_state_machine_as_test(machine, settings=hyp_settings(heavy=True))
    guard.check()
