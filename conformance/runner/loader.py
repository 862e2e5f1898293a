"""Resolve ``--impl`` values to adapter objects and validate them against the protocol."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api import REQUIRED_METHODS, Unavailable
from ..capabilities import ALL_CAPABILITIES, removed_capabilities, unknown_capabilities
from .hints import did_you_mean

# Short names for the built-in adapters. A factory that cannot run here raises
# conformance.api.Unavailable, which becomes one clear usage error.
BUILTIN_IMPLS: dict[str, str] = {
    "reference": "conformance.adapters.reference:adapter",
    "zict": "conformance.adapters.zict_adapter:adapter",
    "distributed-spill": "conformance.adapters.distributed_spill:adapter",
    "dask-cuda": "conformance.adapters.dask_cuda:adapter",
    "dask-cuda-explicit-comms": "conformance.adapters.dask_cuda_explicit_comms:adapter",
    "distributed-p2p": "conformance.adapters.distributed_p2p:adapter",
    "dask-tasks": "conformance.adapters.dask_tasks:adapter",
    "reference-in-dask": "conformance.adapters.reference_in_dask:adapter",
}


class ImplError(Exception):
    """A bad ``--impl``; the plugin turns it into one pytest.UsageError."""


@dataclass
class LoadedImpl:
    spec: str  # what the user typed
    adapter: Any

    @property
    def name(self) -> str:
        return self.adapter.name

    @property
    def capabilities(self) -> frozenset[str]:
        return self.adapter.capabilities


def resolve(spec: str, search: Sequence[str | Path] = ()) -> Any:
    """``module:attr`` (``attr`` may be dotted) or a built-in short name -> adapter object.

    A module that ``sys.path`` does not hold is looked for in ``search`` (the plugin passes
    the invocation folder and pytest's rootdir): the ``pytest`` script, unlike ``python -m
    pytest``, does not put the current folder on the path."""
    target = BUILTIN_IMPLS.get(spec, spec)
    if ":" not in target:
        raise ImplError(
            f"--impl={spec!r}: expected 'module:attr' or one of {', '.join(BUILTIN_IMPLS)}"
            + did_you_mean(spec, BUILTIN_IMPLS)
        )
    modname, _, attr = target.partition(":")
    obj: Any = _import(spec, modname, search)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImplError(
                f"--impl={spec!r}: module {modname!r} has no attribute {attr!r}"
                + did_you_mean(part, [n for n in dir(obj) if not n.startswith("_")])
            ) from None
    if not _looks_like_adapter(obj) and callable(obj):
        try:
            obj = obj()
        except Unavailable as exc:
            raise ImplError(f"--impl={spec!r}: not available: {exc}") from exc
        except Exception as exc:
            raise ImplError(f"--impl={spec!r}: the factory {attr!r} raised {exc!r}") from exc
    validate(spec, obj)
    return obj


def _import(spec: str, modname: str, search: Sequence[str | Path]) -> Any:
    """Import ``modname``; when its top-level package is not on ``sys.path``, append the
    ``search`` folders (after everything installed, so a user's scratch file never shadows a
    library) and try again."""
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        top = modname.split(".")[0]
        if exc.name != top:  # the module exists, and something it imports does not
            raise ImplError(f"--impl={spec!r}: cannot import {modname!r}: {exc!r}") from exc
        added = [str(Path(d)) for d in dict.fromkeys(map(str, search)) if str(d) not in sys.path]
        if added:
            sys.path.extend(added)
            importlib.invalidate_caches()
            try:
                return importlib.import_module(modname)
            except ModuleNotFoundError as again:
                if again.name != top:
                    raise ImplError(
                        f"--impl={spec!r}: cannot import {modname!r}: {again!r}"
                    ) from again
            except Exception as again:
                raise ImplError(f"--impl={spec!r}: cannot import {modname!r}: {again!r}") from again
        where = ", ".join(map(str, dict.fromkeys(map(str, search))))
        looked = f" (looked on sys.path and in {where})" if where else ""
        nearby = [f.stem for d in dict.fromkeys(map(str, search)) for f in Path(d).glob("*.py")]
        raise ImplError(
            f"--impl={spec!r}: cannot import {modname!r}: no module named {top!r}{looked}"
            + (did_you_mean(top, nearby) or did_you_mean(spec, BUILTIN_IMPLS))
        ) from exc
    except Exception as exc:  # anything the module raises at import
        raise ImplError(f"--impl={spec!r}: cannot import {modname!r}: {exc!r}") from exc


def _looks_like_adapter(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("name", "version", "capabilities")) and not isinstance(
        obj, type
    )


def validate(spec: str, obj: Any) -> None:
    missing = [a for a in ("name", "version", "capabilities") if not hasattr(obj, a)]
    if missing:
        raise ImplError(
            f"--impl={spec!r}: {obj!r} lacks {', '.join(missing)} (see conformance.api)"
        )
    if not isinstance(obj.name, str) or not obj.name:
        raise ImplError(f"--impl={spec!r}: name must be a non-empty str, got {obj.name!r}")
    caps = obj.capabilities
    if isinstance(caps, str) or not all(isinstance(c, str) for c in caps):
        raise ImplError(f"--impl={spec!r}: capabilities must be a set of strings, got {caps!r}")
    gone = removed_capabilities(caps)
    if gone:
        raise ImplError(f"--impl={spec!r}: " + "; ".join(gone))
    bad = unknown_capabilities(caps)
    if bad:
        raise ImplError(
            f"--impl={spec!r}: unknown capabilit{'y' if len(bad) == 1 else 'ies'} "
            f"{', '.join(map(repr, bad))} (see conformance.capabilities)"
            + "".join(did_you_mean(b, ALL_CAPABILITIES, n=1) for b in bad[:1])
        )
    caps = frozenset(caps)
    for cap, methods in REQUIRED_METHODS.items():
        if cap in caps:
            lacking = [m for m in methods if not callable(getattr(obj, m, None))]
            if lacking:
                raise ImplError(
                    f"--impl={spec!r}: declares {cap!r} but lacks required method(s) "
                    f"{', '.join(lacking)}"
                )
    for c in caps:
        parent = c.rsplit(".", 1)[0] if "." in c else None
        while parent:
            if parent in ("store", "shuffle") and parent not in caps:
                raise ImplError(f"--impl={spec!r}: declares {c!r} without {parent!r}")
            parent = parent.rsplit(".", 1)[0] if "." in parent else None


def load_all(specs: list[str], search: Sequence[str | Path] = ()) -> list[LoadedImpl]:
    """Load every ``--impl``; collect every problem into one ImplError. ``search``: folders
    to look for a ``module:attr`` module in when ``sys.path`` lacks it (see :func:`resolve`)."""
    loaded, errors = [], []
    # The same spec given twice is one implementation (ci/conformance.sh always passes
    # --impl=reference); two different specs with one name are still an error below.
    for spec in dict.fromkeys(specs):
        try:
            loaded.append(LoadedImpl(spec, resolve(spec, search)))
        except ImplError as exc:
            errors.append(str(exc))
    names = [li.name for li in loaded]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        errors.append(f"--impl: implementation name(s) given twice: {', '.join(dups)}")
    if errors:
        raise ImplError("\n".join(errors))
    return loaded
