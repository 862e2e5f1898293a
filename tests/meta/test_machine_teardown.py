"""The store machine's teardown closes every store before it judges the values it read.

A mismatch raised with the stores still open left their spill files behind; hypothesis's
replay of the example then failed earlier on those files and reported
``FlakyStrategyDefinition`` with a stray-files message instead of the real failure
(issue 23, section 4). The store here spills with a serializer that drops the byte order
(``broken_data.ByteOrderLost``), so the first and only failure is ``dtype <i8 != >i8``.
"""

from __future__ import annotations

import gc

import pytest
from broken_data import ByteOrderLost

from conformance.store import strategies as S
from conformance.store.harness import files_under


@pytest.fixture
def byte_order_lost():
    from reference_impl import SimArray
    from reference_impl.store import dispatch

    adapter = ByteOrderLost()  # registers its serializer process-wide
    try:
        yield adapter
    finally:
        dispatch._registry.pop(SimArray, None)


def test_teardown_closes_the_stores_before_it_reports_a_wrong_value(byte_order_lost, tmp_path):
    """Clauses 2.1 and 11.3: the reported failure is the value, and nothing stays open."""
    from conformance.store.machines import StoreMachine

    cls = StoreMachine.configure(byte_order_lost, byte_order_lost.capabilities, "sim", tmp_path)
    m = cls()
    m.start(host_limit=None, n_stores=1)
    m.put(side=0, key="a", spec=S.ArraySpec(">i8", 1024, 1, "none", 1))
    m.evict(side=0, frac=2.0)  # spilled: it comes back through the broken serializer
    side = m.sides[0]
    device, baseline, spill_dir = m.device, m.baseline, side.h.env.spill_dir
    assert files_under(spill_dir) or side.h.snapshot().tiers["a"] == "host"
    with pytest.raises(AssertionError, match=r"dtype <i8 != >i8"):
        m.teardown()
    gc.collect()
    assert side.h.closed, "teardown raised with the store still open"
    assert not files_under(spill_dir), "teardown raised with spill files left behind"
    assert device.bytes_in_use() == baseline
