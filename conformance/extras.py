"""The suite's own optional dependencies (the ``shuffle`` extra).

An ID that builds pandas frames cannot run where pandas does not import; that is the
suite's environment, not the implementation's failure, so the row reads ``not exercised``
and names the extra to install, and collecting the suite never needs pandas.
"""

from __future__ import annotations

from types import ModuleType

from conformance import not_exercised
from conformance.api import SHUFFLE_EXTRA_HINT


def pandas() -> ModuleType:
    """pandas, or stop the test naming the extra that installs it."""
    try:
        import pandas as pd
    except ImportError as exc:
        not_exercised(f"this ID builds pandas frames and pandas does not import ({exc}); {SHUFFLE_EXTRA_HINT}")
    return pd


def frames() -> ModuleType:
    """:mod:`conformance.shuffle.frames` (pandas frames of every dtype), or stop naming the extra."""
    pandas()
    from conformance.shuffle import frames as module

    return module
