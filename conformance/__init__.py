"""proxify-conformance: one suite that checks any spilling store (and, later, shuffle).

Run it with ``pytest conformance --impl=reference`` from the repository, or
``pytest --pyargs conformance --impl=module:attr`` anywhere it is installed.
The adapter protocol is in :mod:`conformance.api`.
"""

from __future__ import annotations

import pytest

SUITE_VERSION = "0.1.0"
SPEC_VERSION = "2026.1"


def conformance_id(cid: str):
    """Give a test its stable conformance ID (``AREA-TOPIC-NNN``), independent of its name."""
    return pytest.mark.conformance_id(cid)


def requires(*capabilities: str, without: str | None = None):
    """Declare the capabilities a test needs; undeclared ones make it N/A for that impl.

    ``without=cap``: the test checks how a missing feature must behave, so it is
    N/A for implementations that declare ``cap``.
    """
    if without is not None:
        return pytest.mark.requires(*capabilities, without=without)
    return pytest.mark.requires(*capabilities)


__all__ = ["SPEC_VERSION", "SUITE_VERSION", "conformance_id", "requires"]
