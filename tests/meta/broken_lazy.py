"""Deliberately broken lazy front ends: the reference under dask's API (``reference-in-dask``)
with ONE bug in how its dask shuffle moves frames, each caught by a clause of 14.26-14.28
(or 14.22's keys).

Each adapter runs dask's shuffles under its own ``shuffle_method`` name, lowered to a
subclass of the reference's ``DeviceShuffle`` that carries the bug (dask offers no registry
of methods: ``Shuffle._lower`` is wrapped once more, in the suite's process only).
``control`` is the same wrapper without a bug. ``EXPECTED`` maps each to the conformance ID
that must catch it in the ``ci`` profile; ``violates`` names the clauses it breaks. Loaded as
``--impl=broken_lazy:<attr>`` (``tests/meta`` is on the subprocess' ``PYTHONPATH``, which the
workers inherit, so they unpickle this module's task functions by name).
"""

from __future__ import annotations

from typing import Any

from broken_base import PatchesProcess

from conformance.adapters.reference_in_dask import ReferenceInDask

DESTINATION = "_partitions"


# --------------------------------------------------------------------------- tasks
def _off_by_one(df: Any, n: int) -> Any:
    """Every row's destination plus one (modulo n): an off-by-one in the front end."""
    df = df.copy()
    df[DESTINATION] = (df[DESTINATION] + 1) % n
    return df


def _clipped(df: Any, n: int) -> Any:
    """Bad destinations made good instead of refused: nulls as 0, the rest clipped into
    range and truncated to integers."""
    df = df.copy()
    df[DESTINATION] = df[DESTINATION].fillna(0).clip(0, n - 1).astype("int64")
    return df


def _rehashed(df: Any, n: int) -> Any:
    """The destinations hashed again, as if they were keys: a front end that takes dask's
    ``_partitions`` for a key column."""
    import pandas as pd

    df = df.copy()
    df[DESTINATION] = (pd.util.hash_pandas_object(df[DESTINATION], index=False) % n).astype("int64")
    return df


def _arrow_to_numpy(frame: Any) -> Any:
    """An output with every Arrow-backed column as object: meta's dtype dropped, as a
    ``to_pandas()`` without a types mapper leaves strings and decimals."""
    import pandas as pd

    arrow = [c for c, d in frame.dtypes.items() if isinstance(d, pd.ArrowDtype)]
    return frame.astype({c: object for c in arrow}) if arrow else frame


def _index_unnamed(frame: Any) -> Any:
    """An output whose index lost its name, as ``pd.concat`` of pieces named differently
    leaves it. (Columns reordered instead would be no bug through dask's API: dask projects
    meta's columns after every shuffle it lowers, which puts them back in meta's order.)"""
    return frame.rename_axis(None)


def _unpack_then(post: Any, spec: Any, output: int, meta: Any) -> Any:
    from reference_impl.shuffle.in_dask import unpack_frame

    return post(unpack_frame(spec, output, meta))


# --------------------------------------------------------------------------- lowering
_BROKEN: dict[str, type] = {}  # shuffle_method name -> the DeviceShuffle subclass with the bug


def _install() -> None:
    """Wrap ``Shuffle._lower`` once more: a broken method lowers to its subclass."""
    from dask.dataframe.dask_expr._shuffle import Shuffle
    from dask.utils import get_default_shuffle_method

    from reference_impl.shuffle import in_dask

    if getattr(Shuffle._lower, "_broken_lazy", False):
        return
    original = Shuffle._lower

    def _lower(self: Any) -> Any:
        cls = _BROKEN.get(self.method or get_default_shuffle_method())
        if cls is None:
            return original(self)
        check = in_dask._check_hashable_keys
        if cls.skips_key_check:  # restored at once: the lowering runs in this thread
            in_dask._check_hashable_keys = lambda keys, meta: None
        try:
            return cls(*in_dask._lowered(self).operands)
        finally:
            in_dask._check_hashable_keys = check

    _lower._broken_lazy = True
    Shuffle._lower = _lower


def _device_shuffle(
    name: str, pre: Any = None, post: Any = None, skips_key_check: bool = False, stable_id: bool = False
) -> type:
    """A DeviceShuffle whose inputs go through ``pre(df, npartitions)`` before the transfer
    and whose outputs go through ``post(frame)`` after the unpack; ``skips_key_check``: its
    lowering does not check that dask can hash the keys (the mutant of ``in_dask`` that
    survived before SHUF-DTYPE-004); ``stable_id``: its shuffle id is the collection's token
    alone, the same every time the collection is computed (P2P's choice, without P2P's run
    counter across computes)."""
    from dask._task_spec import Task

    from reference_impl.shuffle import in_dask
    from reference_impl.shuffle.in_dask import DeviceShuffle, _Unfused, unpack_frame

    class Broken(DeviceShuffle):
        def _input(self, i: int) -> Any:
            inner = super()._input(i)
            if pre is None:
                return inner
            return Task(f"{self._name}-broken-{i}", pre, inner, self.npartitions_out)

        def _layer(self) -> dict:
            if stable_id:  # restored at once: the graph is built in this thread
                fresh = in_dask.new_shuffle_id
                in_dask.new_shuffle_id = lambda token=None: fresh(token)[:-12] + "0" * 12
                try:
                    dsk = super()._layer()
                finally:
                    in_dask.new_shuffle_id = fresh
            else:
                dsk = super()._layer()
            if post is None:
                return dsk
            for key, task in list(dsk.items()):
                if getattr(task, "func", None) is unpack_frame:
                    dsk[key] = _Unfused(key, _unpack_then, post, *task.args)
            return dsk

    Broken.__name__ = f"Broken{name}"
    Broken.skips_key_check = skips_key_check
    return Broken


# --------------------------------------------------------------------------- adapters
class _BrokenLazy(ReferenceInDask):
    """reference-in-dask under its own method name, lowered with ``pre``/``post``."""

    name = "wrapped-reference-in-dask"
    method = "device-control"
    violates: tuple[str, ...] = ()
    pre: Any = None
    post: Any = None
    skips_key_check = False
    stable_id = False

    def setup_cluster(self, env: Any) -> None:
        super().setup_cluster(env)
        _install()
        cls = type(self)
        _BROKEN[self.method] = _device_shuffle(
            cls.__name__, cls.pre, cls.post, cls.skips_key_check, cls.stable_id
        )


class control(_BrokenLazy):  # noqa: N801 - a factory name: --impl=broken_lazy:control
    """The wrapper without a bug: the lazy zoo's control."""


class OffByOneDestination(_BrokenLazy):
    name = "broken-lazy-off-by-one-destination"
    method = "device-off-by-one"
    violates = ("14.26", "14.28")
    pre = staticmethod(_off_by_one)


class ClipsBadDestinations(_BrokenLazy):
    name = "broken-lazy-clips-bad-destinations"
    method = "device-clips"
    violates = ("14.26",)
    pre = staticmethod(_clipped)


class DropsMetaDtype(_BrokenLazy):
    name = "broken-lazy-drops-meta-dtype"
    method = "device-drops-dtype"
    violates = ("14.27",)
    post = staticmethod(_arrow_to_numpy)


class DropsIndexName(_BrokenLazy):
    name = "broken-lazy-drops-index-name"
    method = "device-drops-index-name"
    violates = ("14.27",)
    post = staticmethod(_index_unnamed)


class RehashesDestinations(_BrokenLazy):
    name = "broken-lazy-rehashes-destinations"
    method = "device-rehashes"
    violates = ("14.28", "14.26")
    pre = staticmethod(_rehashed)


class SkipsKeyCheck(_BrokenLazy):
    """Shuffles by a list or struct column without first checking that dask can hash it:
    pandas' "unhashable type" from inside a task, naming no column."""

    name = "broken-lazy-skips-key-check"
    method = "device-skips-key-check"
    violates = ("14.22",)
    skips_key_check = True


class ReusesShuffleId(_BrokenLazy):
    """Names its shuffle by the collection's token alone: computed again, the collection meets
    its own closed run on the workers (14.29)."""

    name = "broken-lazy-reuses-shuffle-id"
    method = "device-reuses-shuffle-id"
    violates = ("14.29",)
    stable_id = True


class KeepsOrphanShuffles(PatchesProcess, _BrokenLazy):
    """Registers every shuffle a graph brings, even one whose outputs the scheduler already
    had from an earlier compute still running: its tasks are needed by nothing, never run and
    never forgotten (the reference before SHUF-RERUN-002). The coordinator runs in the suite's
    process (the scheduler's), so the patch is made there."""

    name = "broken-lazy-keeps-orphan-shuffles"
    method = "device-keeps-orphans"
    violates = ("14.29",)

    def patch(self) -> None:
        from reference_impl.shuffle import coordinator  # private: the scheduler plugin's

        self.set(coordinator, "_forget_orphans", lambda scheduler, spec: False)


EXPECTED: dict[str, tuple[type, str]] = {
    "off_by_one_destination": (OffByOneDestination, "SHUF-DEST-001"),
    "clips_bad_destinations": (ClipsBadDestinations, "SHUF-DEST-002"),
    "drops_meta_dtype": (DropsMetaDtype, "SHUF-META-001"),
    "drops_index_name": (DropsIndexName, "SHUF-META-001"),
    "rehashes_destinations": (RehashesDestinations, "SHUF-DASK-001"),
    "skips_key_check": (SkipsKeyCheck, "SHUF-DTYPE-004"),
    "reuses_shuffle_id": (ReusesShuffleId, "SHUF-RERUN-001"),
    "keeps_orphan_shuffles": (KeepsOrphanShuffles, "SHUF-RERUN-002"),
}

for _attr, (_cls, _cid) in EXPECTED.items():
    globals()[_attr] = _cls  # --impl=broken_lazy:<attr> (a zero-argument factory)
