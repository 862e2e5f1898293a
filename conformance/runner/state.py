"""What one conformance run knows, kept on ``config.stash``: options, loaded
implementations, manifests and results."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest

from .loader import ImplError, LoadedImpl, load_all
from .profiles import DEFAULT_PROFILE, ENV_VAR
from .report import Results
from .shrink import default_mode as default_shrink

SUITE_DIR = Path(__file__).resolve().parent.parent  # the conformance package

# Set on an item whose call failed (or failed under an xfail): its fixtures skip their
# cleanup checks, which would only repeat the failure.
CALL_FAILED = pytest.StashKey[bool]()


class RunState:
    """The run's options and what they loaded; one per ``pytest.Config``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.impl_specs: list[str] = list(config.getoption("conformance_impl") or [])
        self.device_kind: str = config.getoption("conformance_device")
        self.profile: str = config.getoption("conformance_profile") or os.environ.get(
            ENV_VAR, DEFAULT_PROFILE
        )
        self.shrink: str = config.getoption("conformance_shrink") or default_shrink(self.profile)
        self.impls: list[LoadedImpl] | None = None
        self.load_error: str | None = None
        self.manifests: dict[str, dict] = {}
        self.results = Results()
        self.active = bool(self.impl_specs)
        self.started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        self.commit: tuple[str | None, bool] | None = None

    def load(self) -> list[LoadedImpl]:
        """The implementations under test, loaded once; a bad ``--impl`` sets ``load_error``."""
        if self.impls is None and self.load_error is None:
            try:
                # The invocation folder and rootdir: `pytest` (unlike `python -m pytest`) does
                # not put the current folder on sys.path, yet --impl=my_adapter:adapter there
                # must load either way.
                search = (self.config.invocation_params.dir, self.config.rootpath)
                self.impls = load_all(self.impl_specs or ["reference"], search)
            except ImplError as exc:
                self.load_error = str(exc)
        return self.impls or []


KEY = pytest.StashKey[RunState]()


def run_state(config: pytest.Config) -> RunState | None:
    """The run's state, or None before ``pytest_configure`` (or without the plugin)."""
    return config.stash.get(KEY, None)
