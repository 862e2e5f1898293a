"""The store's internal invariant under the conformance suite's own state machines.

The suite judges what any store shows (SPEC.md sections 1-15); this adds, after every
step, what only the reference can be asked (``store_invariants.check_store``): a
record's tier, its proxy's state and its recency queue agree, and the accounting's
totals equal the sums over what they count. The machines' own ``check_all`` ties those
totals to the device ledger and the files on disk (clauses 3.1 and 3.5).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant, run_state_machine_as_test
from store_invariants import check_store

from conformance.runner.loader import load_all
from conformance.store.machines import StoreMachine

REFERENCE = load_all(["reference"])[0]
SETTINGS = settings(
    max_examples=12,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


class _Checked:
    @invariant()
    def each_piece_of_state_agrees_with_its_owner(self):
        for side in self.sides:
            if not side.h.closed:
                check_store(side.h.store)


@pytest.mark.parametrize(
    "kw", [{}, {"any_keys": True}, {"world": True}], ids=["strings", "any-keys", "world"]
)
def test_invariant_holds_under_the_machines(kw, tmp_path):
    base = StoreMachine.configure(
        REFERENCE.adapter, REFERENCE.capabilities, "sim", tmp_path, **kw
    )
    # The base's name keeps the suite's own seed; another seed reaches two open findings about
    # over-limit values (docs/findings/reference.md), which this test does not judge.
    machine = type(base.__name__, (_Checked, base), {})
    run_state_machine_as_test(machine, settings=SETTINGS)


def test_check_store_names_a_counter_that_drifted(tmp_path):
    """The check can fail: a host total one byte off, and a record whose proxy moved alone."""
    from reference_impl import ProxifyHostFile, SimDevice
    from reference_impl.store import state_of

    device = SimDevice(capacity=1 << 20)
    with ProxifyHostFile(
        device=device, device_memory_limit=1000, local_directory=str(tmp_path)
    ) as store:
        store["a"] = device.zeros(100, "u1")
        store["b"] = device.zeros(100, "u1")
        store.evict(100)  # "a" to host
        check_store(store)
        store._accounting.host_bytes += 1
        with pytest.raises(AssertionError, match=r"totals \(device, host, disk\)"):
            check_store(store)
        store._accounting.host_bytes -= 1
        proxy = store["b"]
        state = state_of(proxy)
        state.held, held = None, state.held  # the proxy lost its object behind the record's back
        with pytest.raises(AssertionError, match="the record says device, its proxy holds gone"):
            check_store(store)
        state.held = held
        check_store(store)
