"""The generative state machines: random programs over every mapping method, rich values
and rich keys, with the model, the device ledger, the device's peak and the files on disk
checked after every step."""

from __future__ import annotations

from hypothesis.stateful import run_state_machine_as_test

from conformance import conformance_id, requires
from conformance.harness import LeakGuard
from conformance.machines import StoreMachine


def _run(impl, device_kind, tmp_path, settings, **kw) -> None:
    guard = LeakGuard()
    machine = StoreMachine.configure(impl.adapter, impl.capabilities, device_kind, tmp_path, **kw)
    run_state_machine_as_test(machine, settings=settings)
    guard.check()


@conformance_id(
    "STORE-STATE-001",
    clause=(
        "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.14", "1.15",
        "2.1", "2.2", "2.3", "2.4", "2.6", "3.1", "3.2", "3.3", "3.5", "3.6", "3.7",
        "4.1", "4.2", "4.4", "4.7", "5.1", "5.2", "5.3", "5.4", "5.5", "6.1", "6.2",
        "7.1", "7.2", "7.3", "7.4", "8.1", "9.1", "9.2", "11.1", "11.2", "11.3",
        "13.1", "13.2",
    ),
)  # fmt: skip
@requires("store")
def test_store_state_machine(impl, device_kind, tmp_path, hyp_settings):
    """String keys (paths, collisions, long ones), every value shape, every method."""
    _run(impl, device_kind, tmp_path, hyp_settings(heavy=True))


@conformance_id("STORE-STATE-002", clause=("1.11", "1.12", "1.13", "9.2"))
@requires("store")
def test_store_state_machine_any_keys(impl, device_kind, tmp_path, hyp_settings):
    """The same machine over any hashable key dask uses: 1, 1.0 and True are one key."""
    _run(impl, device_kind, tmp_path, hyp_settings(heavy=True), any_keys=True)
