"""proxify-conformance: one suite that checks any spilling store and any shuffle.

Run it with ``pytest conformance --impl=reference`` from the repository, or
``pytest --pyargs conformance --impl=module:attr`` anywhere it is installed.
The adapter protocol is in :mod:`conformance.api`.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

SUITE_VERSION = "0.1.0"
SPEC_VERSION = "2026.1"


def conformance_id(cid: str, clause: str | tuple[str, ...] | list[str] = ()):
    """Give a test its stable conformance ID (``AREA-TOPIC-NNN``), independent of its name.

    ``clause`` names the clause(s) of ``conformance/SPEC.md`` the test checks
    (``"3.2"`` or ``("3.2", "4.1")``); the report links each row to them.
    """
    clauses = (clause,) if isinstance(clause, str) else tuple(clause)
    return pytest.mark.conformance_id(cid, clause=clauses)


class NotExercised(pytest.skip.Exception):
    """Raised when the fault a test injects never fired: the row reads ``not exercised``.

    A skip subclass so pytest stops the test without failing it; the plugin tells
    it apart from a skip by the ``NOT_EXERCISED_PREFIX`` on its message.
    """


NOT_EXERCISED_PREFIX = "not exercised:"


def not_exercised(reason: str) -> NoReturn:
    """Stop the test: the fault it injects never fired, so it proved nothing."""
    raise NotExercised(f"{NOT_EXERCISED_PREFIX} {reason}", allow_module_level=False)


class EnvironmentFailure(RuntimeError):
    """The machine failed, not the implementation (a nanny that never brought a killed worker
    back, a port taken): the judged test runs once more, and the report names the first
    attempt's failure (``conformance.runner.environment``). Raise it only for what no
    implementation could cause."""


def requires(*capabilities: str, without: str | None = None):
    """Declare the capabilities a test needs; undeclared ones make it N/A for that impl.

    ``without=cap``: the test checks how a missing feature must behave, so it is
    N/A for implementations that declare ``cap``.
    """
    if without is not None:
        return pytest.mark.requires(*capabilities, without=without)
    return pytest.mark.requires(*capabilities)


__all__ = [
    "NOT_EXERCISED_PREFIX",
    "EnvironmentFailure",
    "SPEC_VERSION",
    "SUITE_VERSION",
    "NotExercised",
    "conformance_id",
    "not_exercised",
    "requires",
]

# The modules that moved into runner/, store/ and shuffle/ still import under their old
# names, with a DeprecationWarning naming the new place (conformance.moved).
from .moved import install as _install_moved  # noqa: E402

_install_moved(__name__)
