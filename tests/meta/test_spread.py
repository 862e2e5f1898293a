"""The built-in shuffle adapters place their inputs over the workers the scheduler has, not
over the client's cache of them (issue 23, part 5).

``client.scheduler_info()`` refreshes a cache and returns it; the client's periodic refresh
(``n_workers=0``) can replace it with one that lists no workers in between. The tests make
every refresh land that way, which is what happened under load: the round-robin divided by
zero (2 in about 40 suite runs on a loaded machine, once on the bug-free control).
"""

from __future__ import annotations

import distributed
import pytest
from distributed.objects import SchedulerInfo

from conformance.adapters._spread import spread, workers
from conformance.api import ShuffleEnv


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        host="127.0.0.1",
        protocol="tcp",
        dashboard_address=None,
    ) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=30)
        yield c


@pytest.fixture
def empty_cache(client, monkeypatch):
    """Every refresh of the client's cache lands as the periodic one can: no workers."""

    async def refresh(n_workers=0):
        client._scheduler_identity = SchedulerInfo(
            {"type": "Scheduler", "workers": {}, "n_workers": 2}
        )

    monkeypatch.setattr(client, "_update_scheduler_info", refresh)
    assert client.scheduler_info(n_workers=-1)["workers"] == {}  # the cache is empty now


def _env(client, n_workers=2) -> ShuffleEnv:
    return ShuffleEnv(client=client, n_workers=n_workers, spill_dir="")


def _double(x: int) -> int:
    return 2 * x


def test_workers_come_from_the_scheduler_not_the_cache(client, empty_cache):
    assert workers(_env(client)) == sorted(client.cluster.scheduler.workers)


def test_spread_uses_both_workers_when_the_cache_is_empty(client, empty_cache):
    futures = spread(_env(client), _double, range(4))
    assert client.gather(futures) == [0, 2, 4, 6]
    held = {w for ws in client.who_has(futures).values() for w in ws}
    assert len(held) == 2, held


def test_fewer_workers_than_expected_spreads_over_those_there_are(client):
    found = workers(_env(client, n_workers=3), timeout=0.5)
    assert len(found) == 2, found
