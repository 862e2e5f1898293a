"""The reaper kills one worker at a time, only once the cluster has been whole for the
interval, never a pid it already killed, and records each kill."""

from __future__ import annotations

import signal
import time

import pytest

from conformance.shuffle import workers as workers_mod
from stress import reaper as reaping


class FakeClient:
    """A scheduler whose workers the test changes; records nothing else."""

    def __init__(self, workers: dict[str, tuple[int, str]]) -> None:
        self.workers = dict(workers)

    def run_on_scheduler(self, fn):
        return dict(self.workers)


@pytest.fixture(autouse=True)
def scheduler_listing(monkeypatch):
    """The reaper's wait for a whole cluster asks the fake scheduler's worker table."""
    monkeypatch.setattr(workers_mod, "worker_addresses", lambda client: sorted(client.workers))


def test_kills_one_at_a_time_and_only_a_whole_cluster(monkeypatch):
    killed: list[int] = []

    def kill(pid, sig):
        assert sig == signal.SIGKILL
        killed.append(pid)
        client.workers = {w: v for w, v in client.workers.items() if v[0] != pid}  # it leaves

    monkeypatch.setattr(reaping.os, "kill", kill)
    monkeypatch.setattr(reaping, "POLL", 0.01)
    client = FakeClient({"tcp://a": (1, "/d/worker-a"), "tcp://b": (2, "/d/worker-b")})
    r = reaping.Reaper(client, every=0.05, seed=0, n_workers=2)
    with r.armed() as period:
        deadline = time.monotonic() + 2
        while not killed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(killed) == 1
        time.sleep(0.3)  # one worker short: no second kill however long
        assert len(killed) == 1
        client.workers["tcp://c"] = (3, "/d/worker-c")  # the nanny's replacement
    assert len(killed) <= 2 and len(set(killed)) == len(killed)
    assert [k.pid for k in period] == killed and r.kills == period
    assert period[0].directory in ("/d/worker-a", "/d/worker-b")
    assert r.problems == []


def test_a_worker_not_brought_back_is_a_problem_not_a_crash(monkeypatch):
    monkeypatch.setattr(reaping.os, "kill", lambda pid, sig: client.workers.pop("tcp://a"))
    monkeypatch.setattr(reaping, "POLL", 0.01)
    monkeypatch.setattr(reaping, "BACK_TIMEOUT", 0.1)
    client = FakeClient({"tcp://a": (1, "/d/worker-a"), "tcp://b": (2, "/d/worker-b")})
    r = reaping.Reaper(client, every=0.02, seed=1, n_workers=2)
    monkeypatch.setattr(r._rng, "choice", lambda xs: "tcp://a")
    with r.armed():
        time.sleep(0.2)
    assert len(r.kills) == 1
    assert r.problems and "a nanny did not bring its worker back" in r.problems[0], r.problems


def test_a_killed_worker_still_listed_is_not_a_whole_cluster(monkeypatch):
    """The count is right but the dead worker is still there (the scheduler has not noticed):
    not whole; one reaper kill, its worker never replaced or removed, is a problem."""
    monkeypatch.setattr(reaping.os, "kill", lambda pid, sig: None)  # it dies, nobody notices
    monkeypatch.setattr(reaping, "POLL", 0.01)
    monkeypatch.setattr(reaping, "BACK_TIMEOUT", 0.1)
    client = FakeClient({"tcp://a": (1, "/d/worker-a"), "tcp://b": (2, "/d/worker-b")})
    r = reaping.Reaper(client, every=0.02, seed=1, n_workers=2)
    with r.armed():
        deadline = time.monotonic() + 2
        while not r.kills and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(r.kills) == 1
    assert "not whole" in r.problems[0] and r.kills[0].worker in r.problems[0], r.problems


def test_files_of_killed_workers_are_told_apart():
    kills = [reaping.Kill(1.0, "tcp://a", 1, "/x/dask-scratch-space/worker-abc")]
    left = ["file dask-scratch-space/worker-abc/proxify-spill-1/0.spill (10 bytes)",
            "file dask-scratch-space/worker-def/proxify-spill-2/0.spill (10 bytes)"]
    theirs, rest = reaping.killed_workers_files(left, kills)
    assert theirs == left[:1] and rest == left[1:]
