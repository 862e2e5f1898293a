"""What a wait that never returned was waiting on, read without waiting on anything.

A hung ``wait_for_workers`` (docs/findings/reference.md, SHUF-STATE-001) left no trace but a
stack in ``Event.wait``: which RPC did not answer, and whether the scheduler still saw the
killed worker, were lost. This report is taken when the suite's bound fires and goes into the
failure's message (hence the rerun note and the junit property). It touches only what can be
read from the test's own thread: frames, the client loop's task list and, for an in-process
scheduler, its worker table. No RPC, so it cannot hang the way the wait did.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from typing import Any

MAX_TASKS = 25
FRAMES = 6


def hang_report(client: Any, waiter: threading.Thread) -> str:
    """The waiter's stack, the client loop's pending tasks and the scheduler's workers."""
    parts = [
        "waiter: " + _thread_stack(waiter),
        "client loop: " + _loop_tasks(client),
        "scheduler: " + _scheduler_workers(client),
    ]
    return "\n".join(parts)


def _thread_stack(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return "no frame (the thread ended)"
    summary = traceback.extract_stack(frame)[-FRAMES:]
    return " <- ".join(f"{f.name} ({_short(f.filename)}:{f.lineno})" for f in reversed(summary))


def _loop_tasks(client: Any) -> str:
    loop = getattr(getattr(client, "loop", None), "asyncio_loop", None)
    if loop is None:
        return "no event loop on the client"
    try:
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    except RuntimeError as exc:  # the set changed while it was read, too often
        return f"task list unreadable ({exc})"
    lines = [_task_line(t) for t in tasks[:MAX_TASKS]]
    more = f" (+{len(tasks) - MAX_TASKS} more)" if len(tasks) > MAX_TASKS else ""
    return f"{len(tasks)} pending{more}" + "".join(f"\n  {line}" for line in sorted(lines))


def _task_line(task: asyncio.Task) -> str:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", type(coro).__name__)
    stack = task.get_stack(limit=None)
    where = f" at {_short(stack[-1].f_code.co_filename)}:{stack[-1].f_lineno}" if stack else ""
    return f"{name}{where}"


def _scheduler_workers(client: Any) -> str:
    scheduler = getattr(getattr(client, "cluster", None), "scheduler", None)
    workers = getattr(scheduler, "workers", None)
    if workers is None:
        return "not in this process"
    seen = ", ".join(f"{addr} {getattr(ws, 'status', '?')}" for addr, ws in list(workers.items()))
    return f"{len(workers)} worker(s): {seen or 'none'}"


def _short(path: str) -> str:
    for marker in ("site-packages/", "/conformance/", "/reference_impl/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path.rsplit("/", 1)[-1]
