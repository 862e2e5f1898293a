"""Nothing outlives a shuffle: no files under the workers' directories, no tasks, and no
handler, extension or plugin beyond what the implementation installs once per cluster."""

from __future__ import annotations

import traceback

import pytest

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.tables import mixed_case


def _settled(cluster) -> None:
    left = cluster.settled(timeout=10.0)
    assert left is None, "left behind 10 s after the shuffle: " + "; ".join(left)


def _baseline(cluster, impl) -> None:
    """A first shuffle installs what is installed once; what is there then is the baseline."""
    nulls = "shuffle.nulls" in impl.capabilities
    cluster.run(mixed_case(0, 2, 20, 2, nulls=nulls))
    _settled(cluster)
    cluster.mark_baseline()


@conformance_id("SHUF-CLEAN-001", clause="14.11")
@requires("shuffle")
def test_nothing_left_after_a_shuffle(impl, tight_cluster):
    """Data four times the budget, so that shards spill to disk."""
    _baseline(tight_cluster, impl)
    nulls = "shuffle.nulls" in impl.capabilities
    rows = 4 * tight_cluster.budget() * tight_cluster.env.n_workers // 8 // 60
    case = mixed_case(2, n_inputs=8, rows_per_input=rows, npartitions=6, nulls=nulls)
    run = tight_cluster.run(case)
    assert not oracle.count_problems(run.outputs, case.npartitions)
    del run
    _settled(tight_cluster)


@conformance_id("SHUF-CLEAN-002", clause=("14.11", "14.12"))
@requires("shuffle", "shuffle.checks")
def test_nothing_left_after_a_failed_shuffle(impl, shuffle_cluster):
    _baseline(shuffle_cluster, impl)
    case = mixed_case(3, 4, 100, 3, nulls="shuffle.nulls" in impl.capabilities)
    inputs = shuffle_cluster.load(case.tables)
    with pytest.raises(Exception, match="no_such_column") as raised:
        shuffle_cluster.shuffle(inputs, ["no_such_column"], case.npartitions)
    # The traceback's frames hold the inputs; the test must not keep them alive itself.
    traceback.clear_frames(raised.tb)
    del inputs, raised
    _settled(shuffle_cluster)
