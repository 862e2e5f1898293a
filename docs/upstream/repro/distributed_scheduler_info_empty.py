"""Client.scheduler_info() can list no workers while workers run: it returns the client's
cache, which the periodic refresh (n_workers=0) may have overwritten after this call's own
fetch of every worker. A 1 ms refresh interval makes the race frequent; at the default (2 s)
it is rare, but a loop that divides by the number of workers fails on it."""

import dask
import distributed


def main(calls: int = 2000) -> None:
    with (
        dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}),
        distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        client.wait_for_workers(2)
        empty = sum(1 for _ in range(calls) if not client.scheduler_info()["workers"])
        print(f"distributed {distributed.__version__}: scheduler_info() listed no workers "
              f"in {empty} of {calls} calls (2 workers running)")


if __name__ == "__main__":
    main()
