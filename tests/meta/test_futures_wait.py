"""The suite's waits on futures leave dask's process-global config alone (issue 45).

``Client.as_current()`` enters ``dask.config.set(scheduler="dask.distributed")`` for the
whole process; two overlapping uses in two threads left it set, and SHUF-DASK-001's
``sort_values`` then failed with "no Client active". The waits must not enter it at all:
here ``as_current`` raises, so the old waits fail at once, deterministically.
"""

from __future__ import annotations

from concurrent.futures import CancelledError

import dask
import distributed
import pytest

from conformance.adapters._spread import _settle
from conformance.futures import settle, wait
from conformance.shuffle.calls import load_inputs


class _Loads:
    """An adapter whose inputs are futures already submitted."""

    def __init__(self, futures):
        self.futures = futures

    def load_inputs(self, tables, env):
        return list(self.futures)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture(autouse=True)
def no_as_current(monkeypatch):
    def refuse(self):
        raise AssertionError("Client.as_current() sets dask.config for the whole process")

    monkeypatch.setattr(distributed.Client, "as_current", refuse)


def _boom():
    raise ValueError("boom")


def test_the_waits_use_no_as_current_and_leave_the_config_alone(client):
    before = dask.config.get("scheduler", None)
    done = [client.submit(sum, [1, 2], pure=False), client.submit(_boom, pure=False)]
    settle(client, done, timeout=30)
    assert [f.status for f in done] == ["finished", "error"]
    _settle(client, done)
    wait(client, done[:1], timeout=30)
    assert load_inputs(_Loads(done[:1]), None, client, [], 30) == done[:1]
    assert dask.config.get("scheduler", None) == before


def test_wait_names_the_cancelled_futures_as_distributed_wait_does(client):
    gone = client.submit(sum, [3, 4], pure=False)
    gone.cancel()
    with pytest.raises(CancelledError, match=gone.key[:8]):
        wait(client, [gone], timeout=30)
    settle(client, [gone], timeout=30)  # settle judges nothing
