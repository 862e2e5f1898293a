"""A task restricted *loosely* (``allow_other_workers=True``) to workers that have all left
waits in ``no-worker`` for good when new workers join (distributed 2026.8.0).

Deterministic: one in-process worker computes ``x``; it closes (``x`` is lost and must be
computed again; no worker is left, so ``x`` goes to ``no-worker``, and ``y`` is queued); a new worker joins. An
unrestricted ``y`` lost the same way runs on the new worker at once; ``x``, whose
restriction names only the gone worker, stays ``no-worker`` although its restriction is
loose. ``Scheduler.bulk_schedule_unrunnable_after_adding_worker`` picks the unrunnable tasks
that the new worker satisfies by ``valid_workers``, and for a loosely restricted task whose
workers are all gone ``valid_workers`` holds none: ``loose_restrictions`` is never read
there, while ``decide_worker`` reads it.

Run: ``.venv/bin/python docs/findings/distributed-p2p-repro/loose_restrictions_stranded.py``;
prints CONFIRMED (exit 0) or NOT REPRODUCED (exit 1).
"""

from __future__ import annotations

import asyncio
import sys

import distributed
from distributed import Client, Scheduler, Worker


def inc(i: int) -> int:
    return i + 1


async def main() -> int:
    async with (
        Scheduler(dashboard_address=":0", host="127.0.0.1") as s,
        Client(s.address, asynchronous=True) as c,
    ):
        a = await Worker(s.address, host="127.0.0.1", nthreads=1)
        x = c.submit(inc, 1, workers=[a.address], allow_other_workers=True, pure=False)
        y = c.submit(inc, 2, pure=False)
        await distributed.wait([x, y])
        await a.close()  # x and y are lost with it; nothing can run them now
        while s.tasks[x.key].state != "no-worker" or s.tasks[y.key].state not in ("no-worker", "queued"):
            await asyncio.sleep(0.05)  # (y, a root task, is queued)
        b = await Worker(s.address, host="127.0.0.1", nthreads=1)
        try:
            await asyncio.wait_for(y, timeout=10)  # unrestricted: runs on b
            for _ in range(100):  # 5 s: x would run at once, as y did
                if x.status == "finished":
                    break
                await asyncio.sleep(0.05)
            stranded = s.tasks[x.key].state == "no-worker"
            print(f"distributed {distributed.__version__}: unrestricted task -> {s.tasks[y.key].state}; "
                  f"loosely restricted task -> {s.tasks[x.key].state} "
                  f"(restricted to {sorted(s.tasks[x.key].worker_restrictions)}, loose="
                  f"{s.tasks[x.key].loose_restrictions}, new worker {b.address})")
        finally:
            await c.cancel([x])
            await b.close()
    print("CONFIRMED" if stranded else "NOT REPRODUCED")
    return 0 if stranded else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
