"""A transfer that fails returns its error and lets its inputs go at once (no collector).

The error that stops a transfer can live on elsewhere: ``run.check()`` raising on the event
loop inside a send puts it, through ``sync()``, in a cycle with the tornado future that
carried it. Its traceback ran through the transfer's frame, whose locals are the task's
inputs, so a client killed mid-shuffle left 4 inputs on a worker as store externals
until a garbage collection (1 run in 5-10 of ``test_shuffle_interrupt``). Here the send
keeps its exception alive the same way, and the input must still die when dropped.
"""

from __future__ import annotations

import contextlib
import gc
import weakref

import numpy as np
import pyarrow as pa

import reference_impl.shuffle.transfer as transfer_module
from reference_impl import get_device
from reference_impl.shuffle import ShuffleClosedError
from reference_impl.shuffle.spec import ShuffleSpec
from reference_impl.table import Table

KEPT: list[BaseException] = []  # what the event loop's cycle would hold


class _Run:
    id, run_id, worker, failure = "s1", 1, "tcp://me", None

    def check(self) -> None:
        pass

    def superseded(self, wait: float = 0.0) -> bool:
        return False


class _Comms:
    def send(self, run, address, source, batch) -> None:
        exc = ShuffleClosedError(run.id, "unpack", address, "closed while sending")
        KEPT.append(exc)
        raise exc

    def flush(self, run) -> None:
        pass


class _Ext:
    store = None

    def __init__(self) -> None:
        self.worker = type("W", (), {"address": "tcp://me"})()
        self.run = _Run()
        self.comms = _Comms()

    def get_run(self, shuffle_id: str, run_id: int, phase: str) -> _Run:
        return self.run

    def room(self, nbytes: int):
        return contextlib.nullcontext()

    def keep(self, run, output, row, frames) -> None:
        pass

    def failed(self, run, exc, phase="transfer"):
        return exc.copy()


def test_a_failed_transfer_keeps_no_input_alive(monkeypatch):
    ext = _Ext()
    monkeypatch.setattr(transfer_module.distributed, "get_worker", lambda: ext.worker)
    monkeypatch.setattr(transfer_module, "get_extension", lambda worker: ext)
    run_answer = {"status": "OK", "run_id": 1, "placement": ["tcp://me", "tcp://other"] * 2, "wanted": [0, 1, 2, 3]}
    monkeypatch.setattr(transfer_module, "ask", lambda worker, op, /, **kw: run_answer)
    dev = get_device("sim", "64 MiB")
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
