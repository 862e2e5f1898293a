"""Under triage: three of dask's own tests hang on a distributed Client. dask's tasks
shuffle on a plain ``LocalCluster``: none of this project's code is involved.

    .venv/bin/python docs/findings/dask-tasks-repro/set_index_hangs_on_a_client.py

Each of ``test_set_index_sorts``, ``test_set_index_empty_partition`` and
``test_empty_partitions`` (dask/dataframe/tests/test_shuffle.py, dask 2026.8.0) passes
without a Client (``pytest``) and prints "HANGS" after 30 s with one (exit 3). The stack then:
``compute`` -> ``optimize`` -> ``SetIndex._lower`` -> ``_calculate_divisions`` -> ``compute``
-> ``Client.get`` -> ``gather``, while the scheduler holds no task. A hand-written
``set_index`` of a concat with an empty frame did not hang, so the cause is not found and
nothing is reported upstream yet (ci/dask_suite/known.txt lists the three).
"""

import os
import sys
import threading
import time

import dask
import distributed

TESTS = ("test_set_index_sorts", "test_set_index_empty_partition", "test_empty_partitions")

if __name__ == "__main__":
    import dask.dataframe.tests.test_shuffle as dask_tests

    name = sys.argv[1] if len(sys.argv) > 1 else TESTS[0]
    test = getattr(dask_tests, name)
    # A Client first: dask-expr caches the divisions it computed, so a run without a Client
    # first would let the Client's run skip the computation that hangs.
    threading.Thread(target=lambda: (time.sleep(30), print(f"{name}: HANGS with a Client", flush=True), os._exit(3)), daemon=True).start()
    with (
        dask.config.set({"dataframe.shuffle.method": "tasks"}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        test()
        print(f"{name}: returned with a Client", flush=True)
