"""How long hypothesis may shrink a failure (``--conformance-shrink``).

A failing store machine shrinks for hypothesis's own cap, five minutes a test, so a newcomer's
first table took over ten. ``bounded`` (the default in the ``ci`` profile) stops shrinking
after ``BOUNDED_SECONDS`` and skips the explain phase: the failure is still the rule that
broke, with a longer program. ``full`` is hypothesis's own behaviour (the default in
``nightly`` and ``stress``); ``none`` reports the first failing example as drawn.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import Phase

MODES = ("bounded", "full", "none")
BOUNDED_SECONDS = 10


def default_mode(profile: str) -> str:
    return "bounded" if profile == "ci" else "full"


def phases(mode: str, parent: tuple) -> tuple:
    """The hypothesis phases a test runs under in ``mode``."""
    drop = {"none": (Phase.shrink, Phase.explain), "bounded": (Phase.explain,)}.get(mode, ())
    return tuple(p for p in parent if p not in drop)


@contextmanager
def limit(mode: str) -> Iterator[None]:
    """Hypothesis reads its shrink cap, a module constant, when a shrink starts; there is no
    setting for it. Bounded: lowered for the duration of one test, and restored."""
    if mode != "bounded":
        yield
        return
    from hypothesis.internal.conjecture import engine

    before = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = BOUNDED_SECONDS
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = before
