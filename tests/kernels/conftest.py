"""Shared fixtures for the partition-kernel tests."""

from __future__ import annotations

import gc

import pytest

from reference_impl.device import SimDevice


@pytest.fixture
def dev():
    """A fresh sim device; the test fails if it leaves bytes on the ledger."""
    device = SimDevice("256 MiB")
    yield device
    gc.collect()
