"""Putting a shuffle's input tables on the workers and reading its outputs back, as every
built-in shuffle adapter does, without inflating the workers' memory (issue 24).

- **Inputs never travel inside a task.** A task's arguments are part of its spec, which
  distributed keeps (on the scheduler and on the worker) while the key is in memory, and the
  caller holds the inputs until the shuffle returns: an input table submitted as an argument
  stays on its worker next to the converted input it became (about 256 MiB per worker at
  512 MiB of data). :func:`spread` hands each ``pyarrow.Table`` to the cluster's
  :class:`InputSource` (a scheduler plugin) instead; the task that converts it names only its
  key, fetches the table from the scheduler when it runs and drops it once converted. The
  table arrives with its chunks and offsets (``_layout``): an input that is a slice reaches
  the implementation as one. The
  source keeps the table while the scheduler knows the task, so an input lost with its worker
  is computed again elsewhere, as before; it forgets the table with the task. A future of a
  table already on the workers (made there: ``stress`` generates its inputs so) is converted
  on its holder and can be released by the caller at once.
- **Outputs are read in batches.** Reading every output in one request (``client.gather``
  of them all) makes each worker load every output it holds together, and Arrow's
  serialization adds a copy of each: 2,081 MiB per worker at 1 GiB of data, against 545 one
  output at a time. :func:`read_outputs` converts and fetches consecutive outputs whose sizes
  (as the scheduler knows them) add up to at most :func:`read_budget` bytes, the host limit
  (``READ_BUDGET_DEFAULT`` without one), and releases each batch before the next.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from conformance.adapters._layout import land, ship
from conformance.api import ShuffleEnv
from conformance.futures import settle
from conformance.shuffle.workers import poll_workers

WORKERS_TIMEOUT = 60.0  # seconds to wait for env.n_workers (a killed worker's nanny restarts it)
# Bytes of outputs read in one batch when the environment sets no host limit: 64 MiB, an
# eighth of the smallest worker the issue measured (512 MiB of data over 2 workers).
READ_BUDGET_DEFAULT = 64 * 2**20
SOURCE = "conformance-input-source"  # the scheduler plugin's name and its handler
FETCH_TIMEOUT = 60.0  # seconds a task waits for the scheduler to hand it its input


def workers(env: ShuffleEnv, timeout: float = WORKERS_TIMEOUT) -> list[str]:
    """The workers' addresses, sorted, asked of the scheduler itself
    (:func:`~conformance.shuffle.workers.poll_workers`) once ``env.n_workers`` of them run (or
    ``timeout`` passed, with at least one: spread over those there are)."""
    found, _ = poll_workers(env.client, env.n_workers, timeout)
    if not found:
        raise RuntimeError(f"the cluster has no workers after {timeout:.0f} s")
    return found


# --------------------------------------------------------------------------- inputs
class InputSource(SchedulerPlugin):
    """Scheduler plugin: the input tables of tasks that fetch them when they run.

    ``tables[key]`` is the table the task ``key`` converts; a handler of the same name hands
    it to the worker running that task. The entry goes when the scheduler forgets the task
    (its caller and every dependent released it): until then the task may run again.
    """

    name = SOURCE
    idempotent = True

    def __init__(self) -> None:
        self.tables: dict[str, Any] = {}

    async def start(self, scheduler: Any) -> None:
        scheduler.handlers[SOURCE] = self.fetch

    def fetch(self, key: str | None = None) -> Any:
        from distributed.protocol import to_serialize

        table, layout = ship(self.tables[key])
        return {"table": to_serialize(table), "layout": layout}

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish == "forgotten" and self.tables:
            self.tables.pop(key, None)


def _put(key: str, table: Any, dask_scheduler: Any = None) -> int:
    """On the scheduler: ``table`` is what the task ``key`` will fetch."""
    dask_scheduler.plugins[SOURCE].tables[key] = table
    return 1


def _source_size(dask_scheduler: Any = None) -> int:
    """On the scheduler: how many tables the source holds (tests)."""
    plugin = dask_scheduler.plugins.get(SOURCE)
    return len(plugin.tables) if plugin is not None else 0


def _from_source(fn: Callable[[Any], Any], key: str) -> Any:
    """Task: ``fn`` of the table the source holds for this task (``key``), fetched from the
    scheduler now; the table itself is dropped once ``fn`` returned."""
    import distributed
    from distributed.utils import sync

    worker = distributed.get_worker()
    fetch = getattr(worker.scheduler, SOURCE)
    got = sync(worker.loop, fetch, key=key, callback_timeout=FETCH_TIMEOUT)
    return fn(land((got["table"], got["layout"])))


def spread(env: ShuffleEnv, fn: Callable[[Any], Any], tables: Sequence[Any]) -> list[Any]:
    """``fn(table)`` as a task per input, round-robin over the workers and not pinned: pinned,
    an input lost with its worker would wait for that worker forever instead of being
    computed again elsewhere.

    A ``pyarrow.Table`` goes to the cluster's :class:`InputSource`, never into the task; a
    ``distributed.Future`` of one (made on the workers) is converted on the worker holding it.
    """
    import distributed

    client = env.client
    names = workers(env)
    futures = [t for t in tables if isinstance(t, distributed.Future)]
    holders = client.who_has(futures) if futures else {}
    if len(futures) < len(tables):
        client.register_plugin(InputSource())
    out = []
    for i, t in enumerate(tables):
        where = [names[i % len(names)]]
        if isinstance(t, distributed.Future):
            where = sorted(holders.get(t.key, ())) or where
            out.append(
                client.submit(fn, t, workers=where, allow_other_workers=True, pure=False)
            )
            continue
        key = f"{getattr(fn, '__name__', 'input')}-{uuid.uuid4().hex}"
        client.run_on_scheduler(_put, key, t)
        out.append(
            client.submit(
                _from_source, fn, key, key=key, workers=where, allow_other_workers=True,
                pure=False,
            )
        )
    return out


# --------------------------------------------------------------------------- outputs
def read_budget(env: ShuffleEnv) -> int:
    """Bytes of outputs one batch reads: the host limit, or READ_BUDGET_DEFAULT without one."""
    return int(env.host_limit) if env.host_limit else READ_BUDGET_DEFAULT


def _batches(sizes: Sequence[int], budget: int) -> list[range]:
    """Consecutive index ranges whose sizes add up to at most ``budget`` (at least one
    index each: an output larger than the budget is read alone)."""
    out, start, total = [], 0, 0
    for i, n in enumerate(sizes):
        if i > start and total + n > budget:
            out.append(range(start, i))
            start, total = i, 0
        total += n
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


_FAILED = ("error", "cancelled")


def _settle(client: Any, futures: list[Any]) -> None:
    """Wait until every future is done, failed or cancelled (each caller judges the cancelled
    ones itself), through no ``Client.as_current()``: reads run two at a time (issue 45)."""
    settle(client, futures)


def _failure(future: Any) -> BaseException:
    """The exception a failed or cancelled future raises."""
    try:
        future.result()
    except BaseException as exc:  # noqa: BLE001 - it is the value returned
        return exc
    raise AssertionError(f"{future.key} did not fail")


def _finished_sizes(client: Any, outputs: list[Any]) -> dict[Any, int]:
    """``{key: bytes}`` of the outputs that finished only: asking the scheduler for one it has
    forgotten (cancelled, or lost with its worker since) raises a bare KeyError there, hiding
    the real error, which the read of that output raises."""
    finished = [o.key for o in outputs if o.status == "finished"]
    try:
        return client.nbytes(finished, summary=False) if finished else {}
    except KeyError:
        return {}


def _read_batch(
    client: Any, batch: list[Any], read: Callable[..., Any], errors: str, kwargs: dict[str, Any]
) -> list[Any]:
    """``read(output, **kwargs)`` of each output of ``batch``, pinned to its holder, fetched;
    with ``errors="return"`` a failed read's exception in its slot. The reads are released
    on return, before the next batch is submitted."""
    holders = client.who_has(batch)
    reads = []
    for out in batch:
        where = sorted(holders.get(out.key, ())) or None
        reads.append(
            client.submit(
                read,
                out,
                workers=where,
                allow_other_workers=where is not None,  # (dask refuses it without workers)
                pure=False,
                **kwargs,
            )
        )
    if errors == "raise":
        return client.gather(reads)
    _settle(client, reads)
    ok = [r for r in reads if r.status not in _FAILED]
    fetched = iter(client.gather(ok))
    return [_failure(r) if r.status in _FAILED else next(fetched) for r in reads]


def read_outputs(
    env: ShuffleEnv,
    outputs: list[Any],
    read: Callable[..., Any],
    *,
    errors: str = "raise",
    budget: int | None = None,
    **kwargs: Any,
) -> list[Any]:
    """``read(output, **kwargs)`` computed on the worker holding each output and fetched, a
    batch of at most ``budget`` bytes of outputs (default :func:`read_budget`) at a time, in
    order; each slot of ``outputs`` is released (set to None) once its batch is read.

    A read that dask placed elsewhere would move the output between workers, and the suite
    measures the shuffle, not dask's transfers: reads go to the holder. Loosely: a holder
    killed by the suite strands a pinned read for good, while an implementation that
    recovers (14.5, 14.19) builds the output again elsewhere. Work stealing may still move
    a read (reads are short; it rarely does).
    A failed shuffle (an output erred or cancelled) raises its own error here, before anything
    is submitted: reads that depend on erred outputs, released at once by the raise, stayed
    wanted by the client on the scheduler (seen in the stress faults run). ``errors="return"``
    puts the exception of each output or read that failed in its slot instead, for a caller
    that looks at each one itself.
    """
    if errors not in ("raise", "return"):
        raise ValueError(f"errors={errors!r}: expected 'raise' or 'return'")
    client = env.client
    _settle(client, outputs)
    if errors == "raise":
        for out in outputs:
            if out.status in _FAILED:
                out.result()  # the future's own error (a cancelled one names its reason)
    known = _finished_sizes(client, outputs)
    results: list[Any] = [None] * len(outputs)
    for i, out in enumerate(outputs):
        if out.status in _FAILED:  # errors="return": nothing to read
            results[i], outputs[i] = _failure(out), None
    live = [i for i, out in enumerate(outputs) if out is not None]
    sizes = [int(known.get(outputs[i].key, 0)) for i in live]
    for positions in _batches(sizes, read_budget(env) if budget is None else budget):
        batch = [live[j] for j in positions]
        got = _read_batch(client, [outputs[i] for i in batch], read, errors, kwargs)
        for i, value in zip(batch, got, strict=True):
            results[i] = value
            outputs[i] = None
        del got
    return results
