"""A transfer that fails returns its error and lets its inputs go at once (no collector).

The error that stops a transfer can live on elsewhere: ``run.check()`` raising on the event
loop inside a send puts it, through ``sync()``, in a cycle with the tornado future that
carried it. Its traceback ran through the transfer's frame, whose locals are the task's
inputs, so a client killed mid-shuffle left 4 inputs on a worker as store externals
until a garbage collection (1 run in 5-10 of ``test_shuffle_interrupt``). Here the send
keeps its exception alive the same way, and the input must still die when dropped.
"""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pyarrow as pa

import reference_impl.shuffle.transfer as transfer_module
from reference_impl import get_device
from reference_impl.shuffle import ShuffleClosedError
from reference_impl.shuffle.limiter import DeviceRoom, HostBudget
from reference_impl.shuffle.run import RunContext, ShuffleRun
from reference_impl.shuffle.spec import RunSpec, ShuffleSpec
from reference_impl.table import Table

KEPT: list[BaseException] = []  # what the event loop's cycle would hold


class _Run(ShuffleRun):
    """A run whose sends fail as a closed receiver's would, the error kept elsewhere."""

    def _send(self, address, source, batch) -> None:
        exc = ShuffleClosedError(self.id, "unpack", address, "closed while sending")
        KEPT.append(exc)
        raise exc

    def cancel(self) -> None:
        pass


class _Ext:
    def __init__(self, device, directory: str) -> None:
        self.worker = type("W", (), {"address": "tcp://me"})()
        context = RunContext(
            worker="tcp://me",
            transport=None,
            room=DeviceRoom(lambda: None),
            budget=HostBudget(lambda: None),
            device=lambda: device,
            device_limit=lambda: None,
            directory=lambda name: os.path.join(directory, name),
        )
        self.run = _Run("s1", 1, context)

    def join(self, spec):
        answer = {"run_id": 1, "placement": ["tcp://me", "tcp://other"] * 2, "wanted": [0, 1, 2, 3]}
        return self.run, RunSpec.from_coordinator(spec, answer)

    def collect_at_next_close(self, shuffle_id: str) -> None:
        pass


def test_a_failed_transfer_keeps_no_input_alive(monkeypatch, tmp_path):
    dev = get_device("sim", "64 MiB")
    ext = _Ext(dev, str(tmp_path))
    monkeypatch.setattr(transfer_module.distributed, "get_worker", lambda: ext.worker)
    monkeypatch.setattr(transfer_module, "get_extension", lambda worker: ext)
    table = Table.from_arrow(pa.table({"k": np.arange(1000), "v": np.arange(1000)}), dev)
    alive = weakref.ref(table)
    spec = ShuffleSpec("s1", ("k",), 4, table.schema)
    gc.collect()
    gc.disable()
    try:
        result = transfer_module.transfer(spec, [0], table)
        assert KEPT, "the send never raised: the failure was not exercised"
        del table
        assert alive() is None, (
            "the input outlived the failed transfer: the kept exception's traceback holds it"
        )
    finally:
        gc.enable()
        KEPT.clear()
    assert isinstance(result["error"], ShuffleClosedError) and "rows" not in result
