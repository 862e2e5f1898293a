"""The built-in shuffle adapters place their inputs over the workers the scheduler has, not
over the client's cache of them (issue 23, part 5).

``client.scheduler_info()`` refreshes a cache and returns it; the client's periodic refresh
(``n_workers=0``) can replace it with one that lists no workers in between. The tests make
every refresh land that way, which is what happened under load: the round-robin divided by
zero (2 in about 40 suite runs on a loaded machine, once on the bug-free control).

Issue 24, part 1: the inputs never travel inside their tasks (the scheduler's input source
hands each table to the task converting it, and forgets it with the task), and the outputs
are read a batch bounded by the host limit at a time, each batch released before the next.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import distributed
import pytest
from distributed.objects import SchedulerInfo

from conformance.adapters._spread import spread, workers
from conformance.api import ShuffleEnv
from conformance.shuffle.harness import worker_addresses


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


def test_worker_addresses_come_from_the_scheduler_not_the_cache(client, empty_cache):
    assert worker_addresses(client) == sorted(client.cluster.scheduler.workers)


CACHE_READ = re.compile(r"^(?!.*``).*\bscheduler_info\([^)]*\)\s*\[")  # not in ``docs``


def test_no_code_lists_workers_through_the_client_cache():
    """The CI failure of stop 41 (a test's round-robin divided by zero) came from a test helper
    the adapters' fix had not reached: every listing goes through ``worker_addresses``."""
    root = Path(__file__).resolve().parents[2]
    found = [
        f"{path.relative_to(root)}:{n}"
        for top in ("reference_impl", "conformance", "stress", "benchmarks", "tests", "docs", "ci")
        for path in (root / top).rglob("*.py")
        if path.name != Path(__file__).name and "upstream" not in path.parts  # reports show it
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if CACHE_READ.search(line)
    ]
    assert not found, f"read the client's cache of workers: {found}"


def test_fewer_workers_than_expected_spreads_over_those_there_are(client):
    found = workers(_env(client, n_workers=3), timeout=0.5)
    assert len(found) == 2, found


# ----------------------------------------------------------------------- issue 24, part 1
def _rows(table) -> int:
    return table.num_rows


def _fail_on_odd(x: int) -> int:
    if x % 2:
        raise ValueError(f"odd {x}")
    return x


def test_a_table_never_travels_inside_its_task(client):
    """The task that converts an input names only its key; the scheduler's input source hands
    the table over when the task runs and forgets it with the task."""
    import pickle

    import numpy as np
    import pyarrow as pa

    from conformance.adapters._spread import _source_size

    table = pa.table({"x": np.arange(2**17)})  # 1 MiB
    futures = spread(_env(client), _rows, [table, table.slice(0, 10)])
    assert client.gather(futures) == [2**17, 10]
    scheduler = client.cluster.scheduler
    for f in futures:
        spec = scheduler.tasks[f.key].run_spec
        assert len(pickle.dumps(spec)) < 10_000, f"{f.key}: the task carries its table"
    assert client.run_on_scheduler(_source_size) == 2
    del futures, f
    deadline = time.monotonic() + 10
    while client.run_on_scheduler(_source_size) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.run_on_scheduler(_source_size) == 0, "the source kept released inputs"


def test_futures_of_tables_are_converted_on_their_holders(client):
    import pyarrow as pa

    names = sorted(client.cluster.scheduler.workers)
    made = [
        client.submit(pa.table, {"x": list(range(i + 1))}, workers=[names[i % 2]], pure=False)
        for i in range(4)
    ]
    converted = spread(_env(client), _rows, made)
    assert client.gather(converted) == [1, 2, 3, 4]
    before = client.who_has(made)
    after = client.who_has(converted)
    assert [before[m.key] for m in made] == [after[c.key] for c in converted]


def test_outputs_are_read_in_batches_of_the_budget():
    from conformance.adapters._spread import _batches

    assert _batches([3, 3, 3, 3], 6) == [range(0, 2), range(2, 4)]
    assert _batches([10, 1, 1], 6) == [range(0, 1), range(1, 3)]  # too big: read alone
    assert _batches([0, 0], 0) == [range(0, 2)]  # sizes unknown to the scheduler: 0
    assert _batches([], 6) == []


def test_read_budget_is_the_host_limit_or_the_default(client):
    from conformance.adapters._spread import READ_BUDGET_DEFAULT, read_budget

    assert read_budget(ShuffleEnv(client=client, n_workers=2, spill_dir="", host_limit=5)) == 5
    assert read_budget(_env(client)) == READ_BUDGET_DEFAULT == 64 * 2**20


def test_read_outputs_releases_each_batch_and_keeps_the_order(client):
    from conformance.adapters._spread import read_outputs

    outputs = client.map(_double, range(6), pure=False)
    got = read_outputs(_env(client), outputs, _double, budget=1)
    assert got == [0, 4, 8, 12, 16, 20]
    assert outputs == [None] * 6  # every slot released


def test_read_outputs_errors(client):
    from conformance.adapters._spread import read_outputs

    outputs = client.map(_double, range(3), pure=False)
    with pytest.raises(ValueError, match=r"^errors='ignore': expected 'raise' or 'return'$"):
        read_outputs(_env(client), outputs, _fail_on_odd, errors="ignore")
    got = read_outputs(_env(client), list(outputs), _fail_on_odd, errors="return")
    assert got == [0, 2, 4]
    odd = client.map(_double, [0, 0.5, 1], pure=False)  # 0, 1.0, 2: the middle read fails
    got = read_outputs(_env(client), odd, _fail_on_odd, errors="return")
    assert got[0] == 0 and got[2] == 2 and isinstance(got[1], ValueError), got
    with pytest.raises(ValueError, match="odd 1.0"):
        read_outputs(_env(client), client.map(_double, [0.5], pure=False), _fail_on_odd)


def test_a_cancelled_output_raises_its_own_error_not_the_schedulers_keyerror(client):
    """An output the scheduler forgot (a worker died with its lost data) raised a bare
    KeyError from the scheduler's ``nbytes`` handler, hiding why: SHUF-FAULT-006's barrier
    case read it so on the zoo's skips_lost_inputs."""
    from concurrent.futures import CancelledError

    from conformance.adapters._spread import read_outputs

    outputs = client.map(_double, [10, 11], pure=False)
    client.gather(outputs)
    client.cancel(outputs[1], reason="lost with its worker")
    with pytest.raises(CancelledError, match="lost with its worker"):
        read_outputs(_env(client), list(outputs), _double)
    got = read_outputs(_env(client), list(outputs), _double, errors="return")
    assert got[0] == 40 and isinstance(got[1], CancelledError), got


# ------------------------------------------------- an input's layout survives the hop
def _layout_seen(table):
    from conformance.adapters._layout import layout_of

    return layout_of(table), table.to_pylist()


def _sliced_and_chunked():
    import pyarrow as pa

    whole = pa.table(
        {
            "k": pa.array([1, None, 3, 4, 5, None, 7, 8, 9, 10, 11, 12], pa.int64()),
            "s": pa.array(["a", "bb", None, "", "é", "x" * 30, "q", "r", "s", "t", "u", "v"]),
        }
    )
    sliced = whole.slice(3, 7)  # offset 3: validity bits start mid-byte
    chunked = pa.concat_tables([whole.slice(1, 4), whole.slice(9, 3)])  # 2 chunks, offsets 1, 9
    return sliced, chunked


def test_ipc_compacts_a_slice_which_is_why_the_layout_travels_apart(client):
    """The reason for ``_layout``: distributed's Arrow serializer hands a worker a slice at
    offset 0. If it ever keeps offsets, ``_layout`` becomes redundant, not wrong."""
    from distributed.protocol import deserialize, serialize

    sliced, _ = _sliced_and_chunked()
    back = deserialize(*serialize(sliced))
    assert sliced.column("k").chunk(0).offset == 3
    assert back.column("k").chunk(0).offset == 0


def test_a_sliced_or_chunked_input_reaches_the_worker_as_one(client):
    from conformance.adapters._layout import layout_of

    sliced, chunked = _sliced_and_chunked()
    seen = client.gather(spread(_env(client), _layout_seen, [sliced, chunked]))
    for table, (layout, rows) in zip((sliced, chunked), seen, strict=True):
        assert rows == table.to_pylist()
        assert layout == layout_of(table), (layout, layout_of(table))


def test_large_offsets_keep_their_kind_not_their_size():
    """An offset past MAX_PAD becomes 64 + offset % 8: non-zero, the same bit phase, and no
    more than 71 rows are added."""
    import pyarrow as pa

    from conformance.adapters._layout import MAX_PAD, layout_of, with_layout

    big = pa.table({"x": pa.array(range(1000), pa.int64())})
    far = big.slice(901, 50)
    rebuilt = with_layout(far.combine_chunks(), layout_of(far))
    assert rebuilt.equals(far)
    assert layout_of(rebuilt) == (((50, 64 + 901 % 8),),)
    near = big.slice(MAX_PAD, 5)
    assert layout_of(with_layout(near.combine_chunks(), layout_of(near))) == layout_of(near)
    short = big.slice(500, 3)  # shorter than its pad: its rows repeat
    rebuilt = with_layout(short.combine_chunks(), layout_of(short))
    assert rebuilt.equals(short) and layout_of(rebuilt) == (((3, 64 + 500 % 8),),)
    empty = big.slice(900, 0)  # nothing to pad with: offset 0
    assert layout_of(with_layout(empty.combine_chunks(), layout_of(empty))) == (((0, 0),),)


def test_a_layout_for_another_table_is_refused():
    import pyarrow as pa

    from conformance.adapters._layout import layout_of, with_layout

    table = pa.table({"x": [1, 2, 3]})
    with pytest.raises(ValueError, match=r"^layout of 2 columns for a table of 1$"):
        with_layout(table, (((3, 1),), ((3, 1),)))
    with pytest.raises(ValueError, match=r"^layout of column 'x' covers other rows than"):
        with_layout(table, (((2, 1),),))
    assert with_layout(table, layout_of(table)) is table


def test_the_wait_for_workers_ends_at_its_deadline_whatever_the_scheduler_does(monkeypatch):
    """Polled, never distributed's Cluster.wait_for_workers (which once sat past its own
    timeout on an RPC that never answered): a scheduler that never answers in time ends the
    wait at its deadline, naming it; one that answers with fewer workers is used as it is."""
    import time
    from types import SimpleNamespace

    from conformance.adapters import _spread
    from conformance.shuffle import workers

    env = SimpleNamespace(client=None, n_workers=2)

    def never(client):
        raise TimeoutError("no answer")

    monkeypatch.setattr(workers, "worker_addresses", never)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^the cluster has no workers after 0 s$"):
        _spread.workers(env, timeout=0.3)
    assert time.monotonic() - start < 5
    answers = iter([["tcp://a"], ["tcp://a", "tcp://b"]])
    monkeypatch.setattr(workers, "worker_addresses", lambda client: next(answers))
    assert _spread.workers(env, timeout=30) == ["tcp://a", "tcp://b"]
    monkeypatch.setattr(workers, "worker_addresses", lambda client: ["tcp://a"])
    assert _spread.workers(env, timeout=0.3) == ["tcp://a"]
