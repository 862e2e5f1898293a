"""Modules that moved when the suite was split into ``runner``, ``store`` and ``shuffle``:
the old name still imports, with a DeprecationWarning naming the new place."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "loader": "runner.loader", "manifest": "runner.manifests", "report": "runner.report",
    "profiles": "runner.profiles", "shrink": "runner.shrink", "hints": "runner.hints",
    "gitinfo": "runner.gitinfo", "links": "runner.links",
    "harness": "store.harness", "store_model": "store.model", "machines": "store.machines",
    "world": "store.world", "strategies": "store.strategies", "probes": "store.probes",
    "scheduler": "store.scheduler", "blame": "store.blame",
    "shuffle_harness": "shuffle.harness", "shuffle_oracle": "shuffle.oracle",
    "shuffle_judge": "shuffle.judge", "shuffle_machine": "shuffle.machine",
    "shuffle_faults": "shuffle.faults", "tables": "shuffle.tables",
    "rich_tables": "shuffle.rich_tables", "nested_tables": "shuffle.nested_tables",
    "frames": "shuffle.frames",
}  # fmt: skip


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import conformance.<old>`` gives the module at its new place, with a warning."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name, path=None, target=None):
        prefix, _, leaf = name.rpartition(".")
        if prefix != self.package or leaf not in MOVED:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        new = f"{self.package}.{MOVED[spec.name.rpartition('.')[2]]}"
        warnings.warn(f"{spec.name} moved to {new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        """The module at its new place is already executed."""


def install(package: str) -> None:
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder(package))
