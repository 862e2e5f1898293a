"""What a client is told when the only copy of scattered data is lost with its worker:
distributed alone, no shuffle. The figures behind "SHUF-FAULT-006" in
docs/findings/dask-tasks.md and docs/findings/distributed-p2p.md.

A table is scattered to worker B (the client holds its future), a task made from it runs
there, and B is SIGKILLed (its nanny restarts it). The scheduler logs the worker and the lost
key ("caused the cluster to lose scattered data, which can't be recovered") and forgets the
key with its dependents. The client's future of the task is cancelled with a reason that
names neither: "unknown" here, and "already forgotten" for the outputs of the suite's
shuffles. A dask shuffle whose inputs depend on such data (P2P's or the task shuffle) fails
the same way, before any of its own code can say more.

Run: .venv/bin/python docs/findings/dask-tasks-repro/lost_scattered_input.py
"""

from __future__ import annotations

import logging
import os
import signal
import time

import distributed
import pandas as pd


def double(frame: pd.DataFrame) -> pd.DataFrame:
    return frame * 2


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> None:
    records = Records()
    logging.getLogger("distributed.scheduler").addHandler(records)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as client,
    ):
        _a, b = sorted(client.run(os.getpid))  # the workers, asked of them (not a cache)
        data = client.scatter(pd.DataFrame({"x": range(1000)}), workers=[b])
        made = client.submit(double, data, workers=[b], pure=False)
        distributed.wait(made)
        (pid,) = client.run(os.getpid, workers=[b]).values()
        os.kill(pid, signal.SIGKILL)
        try:
            made.result(timeout=60)
            print("the task's result came back (unexpected)")
        except Exception as exc:  # noqa: BLE001 - the point is what it says
            print(f"the client got: {type(exc).__name__}: {exc}")
            print(f"  names the lost worker {b}: {b.rsplit('//', 1)[-1] in str(exc)}")
            print(f"  names the lost key {data.key}: {str(data.key) in str(exc)}")
        time.sleep(0.5)
    lost = [m for m in records.messages if "scattered" in m]
    print(f"the scheduler logged: {lost[0] if lost else '(nothing)'}")


if __name__ == "__main__":  # the cluster's workers are spawned processes
    main()
