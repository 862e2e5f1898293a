"""distributed's ``Client.as_current()`` is documented as "Thread-local, Task-local", but it
also sets ``dask.config`` ``scheduler="dask.distributed"``, which is process-global. Two threads
in ``as_current()`` of a client made with ``set_as_default=False`` that leave in the order they
entered (not nested) leave ``scheduler="dask.distributed"`` set for the whole process: every
later ``compute()`` on the default scheduler, in any thread, then fails with "Requested
dask.distributed scheduler but no Client active". Deterministic (events order the exits).
Run: .venv/bin/python docs/findings/dask-tasks-repro/as_current_leaks_scheduler.py"""

import threading

import dask
import distributed

if __name__ == "__main__":
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        client = distributed.Client(cluster, set_as_default=False)
        a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

        def first():
            with client.as_current():
                a_in.set()
                b_in.wait()
            a_out.set()  # leaves first: restores scheduler=None

        def second():
            a_in.wait()
            with client.as_current():  # saved scheduler="dask.distributed" (the first's)
                b_in.set()
                a_out.wait()
            # leaves last: restores "dask.distributed"

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("dask.config scheduler after both left:", dask.config.get("scheduler", None))
        try:
            print(dask.delayed(sum)([1, 2]).compute())
            print("OK")
        except RuntimeError as exc:
            print("LEAKED:", exc)
        client.close()
