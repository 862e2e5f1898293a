"""A send that fails on the wire is tried again, and a batch that arrives twice counts once
(``shuffle/comms.py``, ``packed.latest``).

Two faults, injected in the sending worker's rpc and counted there, so each test proves it
fired: a connect that fails (nothing reached the receiver) and an answer that is lost after
the receiver kept the batch (the retry delivers it a second time). Both shuffles must come
back exact; with retries off, the first fails naming the peer and the phase.
"""

from __future__ import annotations

import dask
import distributed
import numpy as np
import pyarrow as pa
import pytest
from shuffle_helpers import assert_clean, check_shuffle, cluster, scatter_tables, worker_addresses

from reference_impl.shuffle import ShuffleError, shuffle

ROWS = 4_000


def tables(n: int, seed: int = 0) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    return [
        pa.table({"k": rng.integers(0, 200, ROWS), "rid": np.arange(i * ROWS, (i + 1) * ROWS)})
        for i in range(n)
    ]


class _FlakyPool:
    """The worker's connection pool, but the next ``state["left"]`` shard sends fail;
    everything else (gathers, heartbeats, ``.serializers``) goes to the real pool."""

    def __init__(self, real, mode: str, state: dict) -> None:
        self.real, self.mode, self.state = real, mode, state

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __call__(self, address):
        from reference_impl.shuffle.comms import RECEIVE_OP

        remote, mode, state = self.real(address), self.mode, self.state

        class _Remote:
            def __getattr__(self, name):
                call = getattr(remote, name)
                if name != RECEIVE_OP:
                    return call

                async def flaky(**kwargs):
                    if state["left"] <= 0:
                        return await call(**kwargs)
                    state["left"] -= 1
                    state["fired"] += 1
                    if mode == "answer":
                        await call(**kwargs)  # delivered and kept; the answer never comes
                    raise OSError(f"injected: {mode} lost")

                return flaky

        return _Remote()


def flaky_sends(mode: str, times: int, *, dask_worker) -> None:
    """The next ``times`` shard sends of this worker fail: ``connect`` before the receiver
    sees them, ``answer`` after it kept them (the acknowledgement is lost)."""
    state = {"left": times, "fired": 0}
    real = dask_worker.rpc
    dask_worker.rpc = _FlakyPool(real, mode, state)
    dask_worker._flaky = (real, state)


def heal(dask_worker) -> int:
    """Undo :func:`flaky_sends`; how many sends it failed."""
    real, state = getattr(dask_worker, "_flaky", (None, {"fired": 0}))
    if real is not None:
        dask_worker.rpc = real
        del dask_worker._flaky
    return state["fired"]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with (
        dask.config.set({"reference-impl.shuffle.send-retry.delay.min": "10ms"}),
        cluster(tmp_path_factory.mktemp("retry")) as c,
        distributed.Client(c) as client,
    ):
        warm = scatter_tables(client, tables(2, seed=9))
        client.gather(shuffle(client, warm, "k", 2))
        del warm
        yield client


def _first_worker(client) -> str:
    return worker_addresses(client)[0]


@pytest.mark.parametrize("mode", ["connect", "answer"])
def test_a_send_that_fails_on_the_wire_is_tried_again_and_counted_once(client, mode):
    data = tables(4, seed=1)
    inputs = scatter_tables(client, data)
    distributed.wait(inputs)
    sender = _first_worker(client)
    client.run(flaky_sends, mode, 2, workers=[sender])
    try:
        outputs = client.gather(shuffle(client, inputs, "k", 5))
    finally:
        fired = client.run(heal, workers=[sender])[sender]
    assert fired == 2, f"the fault fired {fired} times, not 2: not exercised"
    check_shuffle(data, outputs, "k", 5)  # every row once: a batch kept twice counts once
    del outputs, inputs
    assert_clean(client)


def test_without_retries_a_failed_connect_fails_the_shuffle_naming_the_peer(client):
    data = tables(4, seed=2)
    inputs = scatter_tables(client, data)
    distributed.wait(inputs)
    sender = _first_worker(client)
    client.run(flaky_sends, "connect", 1, workers=[sender])
    try:
        with dask.config.set({"reference-impl.shuffle.send-retry.count": 0}):
            # the workers read their own config: set it there too
            client.run(dask.config.set, {"reference-impl.shuffle.send-retry.count": 0})
            outs = shuffle(client, inputs, "k", 5)
            distributed.wait(outs, timeout=60)
            errors = [f.exception() for f in outs if f.status == "error"]
    finally:
        client.run(dask.config.set, {"reference-impl.shuffle.send-retry.count": 3})
        fired = client.run(heal, workers=[sender])[sender]
    assert fired == 1, "the fault did not fire: not exercised"
    assert errors and all(isinstance(e, ShuffleError) for e in errors), errors
    assert "failed in the transfer phase" in str(errors[0]), str(errors[0])
    assert "sending shards to it failed: OSError('injected: connect lost')" in str(errors[0])
    del outs, errors, inputs
    assert_clean(client)


@pytest.mark.parametrize("count", [-1, -2, 1.5, True])
def test_a_retry_count_that_is_not_an_int_from_zero_is_refused(count):
    """The config is read strictly (mutant ``04de636ac599``: ``count < -1`` let -1 through,
    which distributed's ``retry`` then treats as 0: a typo must fail, not pass as another
    setting)."""
    from reference_impl.shuffle.comms import send_retries

    key = "reference-impl.shuffle.send-retry.count"
    with dask.config.set({key: count}), pytest.raises(ValueError, match=r"send-retry.count must be an int >= 0"):
        send_retries()
    with dask.config.set({"reference-impl.shuffle.send-retry.count": 0}):
        assert send_retries()[0] == 0
