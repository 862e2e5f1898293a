"""The generative shuffle machine (``conformance/shuffle/machine/``): programs of
shuffles on one cluster, in any order, two at once, rejected, cancelled, and with the world
moving under them, every outcome judged against the whole of section 14."""

from __future__ import annotations

from hypothesis import settings

from conformance import conditions, conformance_id, requires
from conformance.shuffle.machine import run_shuffle_machine
from conformance.shuffle.tables import mixed_case

# (examples, steps per example) by profile. The first example hypothesis runs is the
# simplest (empty tables, one int8 key, every choice its first), so ci runs a second.
BUDGET = {"ci": (2, 8), "nightly": (40, 25), "stress": (300, 50)}
DEVICE_LIMIT = HOST_LIMIT = 256 * 2**10  # tight: a few hundred KiB of shards reach the disk


@conformance_id(
    "SHUF-STATE-001",
    clause=(
        "14.1", "14.2", "14.4", "14.5", "14.6", "14.7", "14.8", "14.9", "14.10", "14.11",
        "14.12", "14.14", "14.15", "14.16", "14.17", "14.18",
    ),
)  # fmt: skip
@requires("shuffle")
def test_shuffle_state_machine(
    impl, make_shuffle_cluster, hyp_settings, conformance_profile, record_detail, record_property
):
    cluster = make_shuffle_cluster(device_limit=DEVICE_LIMIT, host_limit=HOST_LIMIT)
    nulls = "shuffle.nulls" in impl.capabilities
    cluster.run(mixed_case(0, 2, 20, 2, nulls=nulls))  # what is installed once per cluster
    left = cluster.settled()
    assert left is None, "left behind by a first shuffle: " + "; ".join(left)
    cluster.mark_baseline()
    examples, steps = BUDGET.get(conformance_profile, BUDGET["ci"])
    with conditions.recording() as cells:
        world = run_shuffle_machine(
            cluster,
            impl.capabilities,
            settings(hyp_settings(shuffle=True), max_examples=examples, stateful_step_count=steps),
        )
    record_detail(world.summary())
    record_property("cells_fired", dict(cells))
    left = cluster.settled()
    assert left is None, "14.11: left behind after the machine: " + "; ".join(left)
