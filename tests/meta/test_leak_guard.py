"""The suite's leak guard (``conformance.store.harness.LeakGuard``) sees one file left open."""

from __future__ import annotations

import pytest

from conformance.store.harness import InvariantError, LeakGuard


def test_one_file_left_open_is_named(tmp_path):
    # The first descriptor opened after the baseline reuses the number the baseline's own
    # listing used: a baseline that kept that number hid exactly this file.
    guard = LeakGuard()
    left_open = r"file descriptors left open: \['\d+ -> .*left-open'\]"
    with open(tmp_path / "left-open", "w"), pytest.raises(InvariantError, match=left_open):
        guard.check()
    guard.check()
