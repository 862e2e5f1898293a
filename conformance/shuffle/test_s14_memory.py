"""Memory, measured by the suite (the devices' ledgers, or sampled RSS), never reported by
the shuffle: the peak per worker against the budget, with data several times the budget,
the spike of building outputs, and every worker's RSS against what it may hold in RAM (for
device implementations too: the ledger does not see host copies)."""

from __future__ import annotations

import pytest

from conformance import conformance_id, requires
from conformance.shuffle import oracle as oracle
from conformance.shuffle.rss import RSS_OVERHEAD, RSS_PARTITIONS, rss_bound
from conformance.shuffle.tables import ShuffleCase, uniform_case

FACTOR = 4  # data = FACTOR x the workers' aggregate budget
RSS_INPUTS = 12  # SHUF-BOUND-003: inputs (and outputs) of its case
MIB = 2**20


def _warm(cluster) -> None:
    """A small shuffle first: compiling kernels or importing modules is not the shuffle's
    memory (it is RSS, for host implementations)."""
    if not getattr(cluster, "warm", False):
        cluster.run(uniform_case(2, 100, 2))
        cluster.warm = True


def _nbytes(tables) -> int:
    return max((t.nbytes for t in tables), default=0)


def _big_case(cluster, n_inputs: int, npartitions: int) -> ShuffleCase:
    total = FACTOR * cluster.budget() * cluster.env.n_workers
    rows = total // n_inputs // 24  # three 8-byte columns
    return uniform_case(n_inputs, rows, npartitions, seed=7)


def _check_peaks(cluster, run, largest: int, factor: float, record_detail) -> None:
    budget = cluster.budget()
    worst = max((p - budget) / largest for p in run.peaks.values())
    what = "device peak" if cluster.on_device else "RSS growth"
    record_detail(f"{what} budget+{worst:.2f}x partition")
    over = {
        w: f"{p:,} bytes = budget {budget:,} + {(p - budget) / largest:.2f} x {largest:,}"
        for w, p in run.peaks.items()
        if p > budget + factor * largest
    }
    assert not over, (
        f"{what} above budget + {factor} x the largest partition ({largest:,} bytes): {over}"
    )


@conformance_id("SHUF-BOUND-001", clause="14.2")
@requires("shuffle", "shuffle.bounded")
@pytest.mark.parametrize("n_inputs, npartitions", [(16, 16), (48, 48)])
def test_peak_stays_within_budget_plus_two_partitions(
    tight_cluster, record_detail, n_inputs, npartitions
):
    """Partitions of 1/8 and 1/24 of the budget: many small pieces in flight at once must not
    add up above the bound."""
    _warm(tight_cluster)
    case = _big_case(tight_cluster, n_inputs=n_inputs, npartitions=npartitions)
    run = tight_cluster.run(case, measure=True)
    largest = max(_nbytes(case.tables), _nbytes(run.outputs))
    _check_peaks(tight_cluster, run, largest, 2.0, record_detail)


@conformance_id("SHUF-BOUND-002", clause="14.13")
@requires("shuffle", "shuffle.bounded")
def test_building_an_output_does_not_spike(tight_cluster, record_detail):
    """32 small inputs into one output per worker: the unpack phase dominates."""
    _warm(tight_cluster)
    case = _big_case(tight_cluster, n_inputs=32, npartitions=tight_cluster.env.n_workers)
    run = tight_cluster.run(case, measure=True)
    _check_peaks(tight_cluster, run, _nbytes(run.outputs), 1.5, record_detail)


@conformance_id("SHUF-SPILL-001", clause="14.3")
@requires("shuffle", "shuffle.spill")
def test_data_four_times_the_budget_arrives_whole(tight_cluster, record_detail):
    _warm(tight_cluster)
    case = _big_case(tight_cluster, n_inputs=16, npartitions=8)
    run = tight_cluster.run(case)
    total = sum(t.nbytes for t in case.tables)
    record_detail(f"{total / 2**20:.0f} MiB in {run.seconds:.1f} s")
    problems = oracle.row_ids_problems(case, run.outputs)
    assert not problems, "; ".join(problems)


@conformance_id("SHUF-BOUND-003", clause="14.20")
@requires("shuffle", "shuffle.bounded")
def test_rss_growth_stays_within_what_a_worker_may_hold(tight_cluster, record_detail):
    """Data FACTOR times the RAM the workers may hold together, after a warm-up shuffle of
    the same size: each worker's RSS growth within that RAM + twice the largest partition +
    the fixed overhead. Host copies of shards or outputs, serialization buffers and Arrow's
    pool count, whatever the device's ledger says."""
    cluster = tight_cluster
    allowance = cluster.rss_allowance()
    assert cluster.env.host_limit, "14.20 is judged on a cluster with a host limit"
    rows = FACTOR * allowance * cluster.env.n_workers // RSS_INPUTS // 24
    cluster.run(uniform_case(RSS_INPUTS, rows, RSS_INPUTS, seed=7))  # the warm-up
    case = uniform_case(RSS_INPUTS, rows, RSS_INPUTS, seed=8)
    run = cluster.run(case, measure=True)
    problems = oracle.row_ids_problems(case, run.outputs)
    assert not problems, "; ".join(problems)
    largest = max(_nbytes(case.tables), _nbytes(run.outputs))
    bound = rss_bound(allowance, largest)
    worst = max(run.rss.values())
    record_detail(f"RSS growth {worst / MIB:.1f} MiB of {bound / MIB:.1f}")
    over = {
        w: f"{g / MIB:.1f} MiB" for w, g in sorted(run.rss.items()) if g > bound
    }
    assert not over, (
        f"RSS growth above {bound / MIB:.1f} MiB = {allowance / MIB:.1f} MiB the worker may "
        f"hold in RAM + {RSS_PARTITIONS} x the largest partition ({largest / MIB:.2f} MiB) + "
        f"{RSS_OVERHEAD / MIB:.0f} MiB: {over}"
    )
