"""A Table crosses distributed's comms as a Table and lands on the receiving device."""

from __future__ import annotations

import distributed
import numpy as np
import pyarrow as pa
from distributed.protocol import deserialize, serialize

from conformance.shuffle.harness import worker_addresses
from reference_impl import Table
from reference_impl.device import default_sim_device


def arrow_data() -> pa.Table:
    return pa.table(
        {
            "k": pa.array(np.arange(1000) % 7, mask=np.arange(1000) % 11 == 0),
            "s": pa.array([f"é{i}" for i in range(1000)]),
            "f": pa.array(np.linspace(-1, 1, 1000)),
        }
    )


def test_dask_family_round_trip_lands_on_the_same_device(dev):
    t = Table.from_arrow(arrow_data(), dev)
    d2h = dev.d2h_bytes
    header, frames = serialize(t, serializers=("dask",), on_error="raise")
    assert header["serializer"] == "dask" and len(frames) == 5
    assert dev.d2h_bytes - d2h == t.nbytes  # the frames are one counted d2h copy
    back = deserialize(header, frames)
    assert type(back) is Table and back.device is dev and back.equals(t)
    assert not set(back.allocations()) & set(t.allocations())
    assert dev.bytes_in_use() == 2 * t.nbytes


def test_unknown_device_lands_on_the_default_device(dev):
    header, frames = serialize(Table.from_arrow(arrow_data(), dev), serializers=("dask",))
    header["sub-header"]["device"]["token"] = "sim-not-in-this-process"
    back = deserialize(header, frames)
    assert back.device is default_sim_device()
    assert back.to_arrow().equals(arrow_data())


def _make_table() -> Table:
    return Table.from_arrow(arrow_data(), default_sim_device())


def _receive(t: Table) -> dict:
    dev = default_sim_device()  # this worker process's device
    return {
        "type": type(t).__name__,
        "on_this_device": t.device is dev,
        "token": dev.token,
        "counted": dev.bytes_in_use() >= t.nbytes > 0,
        "equal": t.to_arrow().equals(arrow_data()),
    }


def _token() -> str:
    return default_sim_device().token


def test_table_sent_between_two_workers_arrives_on_the_receivers_device():
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        a, b = worker_addresses(client)
        tokens = client.run(_token)
        made = client.submit(_make_table, workers=[a], allow_other_workers=False, pure=False)
        got = client.submit(_receive, made, workers=[b], allow_other_workers=False).result(60)
        assert got == {
            "type": "Table",
            "on_this_device": True,
            "token": tokens[b],
            "counted": True,
            "equal": True,
        }
        assert tokens[a] != tokens[b]
