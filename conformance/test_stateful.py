"""The stateful machine: random programs of puts, aliases, gets, deletes, externals,
pressure and evictions, with every invariant checked after every step."""

from __future__ import annotations

from hypothesis.stateful import run_state_machine_as_test

from conformance import conformance_id, requires
from conformance.harness import LeakGuard
from conformance.machines import make_store_machine


@conformance_id("STORE-STATE-001", clause=("1.1", "1.2", "1.3", "3.1", "3.6", "4.1", "5.5", "7.3"))
@requires("store")
def test_store_state_machine(impl, device_kind, tmp_path, hyp_settings):
    guard = LeakGuard()
    machine = make_store_machine(impl.adapter, impl.capabilities, device_kind, tmp_path)
    run_state_machine_as_test(machine, settings=hyp_settings(heavy=True))
    guard.check()
