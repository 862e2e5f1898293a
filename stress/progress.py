"""A rich progress bar on the terminal (stderr); silent when switched off or not a terminal."""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[status]}"),
                console=Console(stderr=True),
                transient=False,
            )
        self._task: Any = None

    def start(self, description: str, total: float | None) -> None:
        if self._bar is None:
            return
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task(description, total=total, status="")
        else:
            self._bar.update(self._task, description=description, total=total, completed=0)

    def advance(self, n: float = 1, status: str | None = None) -> None:
        if self._task is not None:
            self._bar.update(self._task, advance=n, **({"status": status} if status else {}))

    def status(self, text: str) -> None:
        if self._task is not None:
            self._bar.update(self._task, status=text)

    def stop(self) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.stop()
            self._task = None
