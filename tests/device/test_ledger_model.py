"""The sim ledger against a model, across random allocate/view/drop/gc/OOM sequences."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reference_impl.device import DeviceOutOfMemoryError, SimDevice

CAPACITY = 4096


class LedgerMachine(RuleBasedStateMachine):
    """Holds arrays on ``self``, drawing indices rather than arrays, so nothing in
    hypothesis keeps a dropped array alive."""

    def __init__(self) -> None:
        super().__init__()
        self.dev = SimDevice(CAPACITY)
        self.handles: list = []
        self.model_peak = 0
        self.handler_on = False
        self.handler_calls: list[tuple[int, int]] = []
        self.in_flight: list = []  # inputs of the op running now: alive even if dropped

    # --- model ------------------------------------------------------------
    def model_bytes(self) -> int:
        live = {self.dev.allocation_of(h) for h in self.handles + self.in_flight}
        return sum(nbytes for _, nbytes in live)

    def after_op(self) -> None:
        self.model_peak = max(self.model_peak, self.model_bytes())

    def oom_handler(self, shortfall: int) -> bool:
        # Called with exactly the shortfall of the allocation in flight.
        self.handler_calls.append((shortfall, self.model_bytes() + self.pending - CAPACITY))
        if not self.handles:
            return False
        self.handles.pop(0)  # may free nothing if a view keeps the base alive
        return True

    def allocate_with(self, nbytes: int, make) -> None:
        self.pending = nbytes
        fits_alone = nbytes <= CAPACITY
        try:
            self.handles.append(make())
        except DeviceOutOfMemoryError:
            assert not fits_alone or not self.handler_on or not self.handles
            assert self.model_bytes() + nbytes > CAPACITY
        self.after_op()

    # --- rules ------------------------------------------------------------
    @rule(nbytes=st.integers(0, CAPACITY + 64))
    def allocate(self, nbytes):
        self.allocate_with(nbytes, lambda: self.dev.empty(nbytes, "uint8"))

    @precondition(lambda self: self.handles)
    @rule(data=st.data(), kind=st.sampled_from(["slice", "step", "reshape", "np.reshape"]))
    def view(self, data, kind):
        base = self.handles[data.draw(st.integers(0, len(self.handles) - 1))]
        n = base.size
        make = {
            "slice": lambda: base[n // 3 :],
            "step": lambda: base[::2],
            "reshape": lambda: base.reshape(1, n),
            "np.reshape": lambda: np.reshape(base, (n, 1)),
        }[kind]
        self.handles.append(make())
        self.after_op()

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def compute(self, data):
        src = self.handles[data.draw(st.integers(0, len(self.handles) - 1))]
        self.in_flight = [src]
        self.allocate_with(src.nbytes, lambda: src + 1)
        self.in_flight = []

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def drop(self, data):
        self.handles.pop(data.draw(st.integers(0, len(self.handles) - 1)))

    @rule()
    def collect(self):
        gc.collect()

    @rule()
    def toggle_handler(self):
        if self.handler_on:
            self.dev.remove_oom_handler(self.oom_handler)
        else:
            self.dev.add_oom_handler(self.oom_handler)
        self.handler_on = not self.handler_on

    @rule()
    def reset_peak(self):
        self.dev.reset_peak()
        self.model_peak = self.model_bytes()

    # --- invariants -------------------------------------------------------
    @invariant()
    def ledger_equals_live_base_allocations(self):
        assert self.dev.bytes_in_use() == self.model_bytes()
        assert self.dev.live_allocations() == dict(
            {self.dev.allocation_of(h) for h in self.handles}
        )

    @invariant()
    def never_above_capacity(self):
        assert self.dev.bytes_in_use() <= CAPACITY
        assert self.dev.peak_bytes() <= CAPACITY

    @invariant()
    def peak_is_the_true_high_water_mark(self):
        assert self.dev.peak_bytes() == self.model_peak

    @invariant()
    def handlers_see_the_shortfall(self):
        for seen, expected in self.handler_calls:
            assert seen == expected > 0
        self.handler_calls.clear()

    def teardown(self):
        self.handles.clear()
        gc.collect()
        assert self.dev.bytes_in_use() == 0


TestLedgerModel = LedgerMachine.TestCase


# The machine's full collections (a rule, and every teardown) skip the heap that was there
# before it started (tests/conftest.py's frozen_heap): a gc pass over pytest's and
# hypothesis's objects cost about 90 ms, 30 of the test's 35 s.
pytestmark = pytest.mark.usefixtures("frozen_heap")
