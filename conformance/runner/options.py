"""Options, start-up checks and the header: everything the run decides before collection.

A bad ``--impl``, ``--expected`` or ``--device=cuda`` without a GPU is one usage error at
start-up, never a FAIL row per test."""

from __future__ import annotations

import os

import pytest

from .. import SPEC_VERSION, SUITE_VERSION
from ..api import PROTOCOL_VERSION
from .manifests import ManifestError, default_path
from .manifests import load as load_manifest
from .profiles import DEFAULT_PROFILE, ENV_VAR, PROFILES, database_path, register_profiles
from .shrink import MODES as SHRINK_MODES
from .state import KEY, RunState, run_state

DEVICE_KINDS = ("sim", "cuda", "auto")


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("conformance", "proxify conformance suite")
    g.addoption(
        "--impl",
        action="append",
        dest="conformance_impl",
        default=[],
        metavar="MODULE:ATTR|NAME",
        help="implementation to check (repeatable): module:attr, or one of reference, zict, "
        "distributed-spill, dask-cuda, distributed-p2p, dask-tasks, reference-in-dask. Default: reference.",
    )
    g.addoption(
        "--device",
        dest="conformance_device",
        default="sim",
        choices=DEVICE_KINDS,
        help="device the conformance tests allocate on (default: sim)",
    )
    g.addoption(
        "--conformance-report",
        dest="conformance_report",
        default=None,
        metavar="DIR",
        help="write conformance.json and conformance.md to DIR",
    )
    g.addoption(
        "--expected",
        dest="conformance_expected",
        action="append",
        default=[],
        metavar="[IMPL=]FILE",
        help="expected-failure manifest (TOML) for an implementation",
    )
    g.addoption(
        "--conformance-profile",
        dest="conformance_profile",
        default=None,
        choices=PROFILES,
        help=f"hypothesis profile (default: ${ENV_VAR} or {DEFAULT_PROFILE})",
    )
    g.addoption(
        "--conformance-shrink",
        dest="conformance_shrink",
        default=None,
        choices=SHRINK_MODES,
        help="how long a failing generative test shrinks: bounded (10 s a test, the default in "
        "the ci profile), full (hypothesis's own 5 minutes, default in nightly and stress), "
        "none (the first failing example as drawn)",
    )
    g.addoption(
        "--conformance-ids",
        dest="conformance_ids",
        action="append",
        default=[],
        metavar="ID[,ID...]",
        help="run only these conformance IDs (fnmatch patterns, case-insensitive)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance_id(cid, clause=()): stable conformance ID and its SPEC.md clauses"
    )
    config.addinivalue_line("markers", "requires(*caps, without=None): capabilities a test needs")
    config.addinivalue_line("markers", "slow: heavy tests kept out of the default run")
    register_profiles()
    state = RunState(config)
    if state.profile not in PROFILES:
        raise pytest.UsageError(
            f"{ENV_VAR}={state.profile!r}: expected one of {', '.join(PROFILES)}"
        )
    config.stash[KEY] = state
    if state.impl_specs:
        state.load()
        if state.load_error:
            raise pytest.UsageError(state.load_error)
        if state.device_kind == "auto":
            from reference_impl.device import cuda_available

            state.device_kind = "cuda" if cuda_available() else "sim"
        elif state.device_kind == "cuda":
            _check_cuda()
        load_manifests(state)


def _check_cuda() -> None:
    """``--device=cuda`` where CuPy or a GPU is missing: one usage error at start-up,
    not a FAIL row per test blaming the implementation."""
    from reference_impl.device import DeviceUnavailableError, require_cuda

    try:
        require_cuda()
    except DeviceUnavailableError as exc:
        raise pytest.UsageError(
            f"--device=cuda: {exc}; use --device=sim (or auto) on a machine without one"
        ) from None


def load_manifests(state: RunState) -> None:
    """Each implementation's manifest: ``--expected`` first, else its default file."""
    names = [li.name for li in state.impls or []]
    explicit: dict[str, str] = {}
    try:
        for spec in state.config.getoption("conformance_expected") or []:
            name, sep, path = spec.partition("=")
            if not sep or not name or os.path.exists(spec):
                name, path = None, spec
            declared, entries = load_manifest(path)
            target = name or declared or (names[0] if len(names) == 1 else None)
            if target is None:
                raise ManifestError(
                    f"--expected={spec}: say which implementation it is for "
                    f'(IMPL=FILE or a top-level impl = "...")'
                )
            if target not in names:
                raise ManifestError(f"--expected={spec}: no --impl named {target!r}")
            state.manifests[target] = entries
            explicit[target] = path
        for name in names:
            if name not in state.manifests and default_path(name).exists():
                state.manifests[name] = load_manifest(default_path(name))[1]
    except ManifestError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = run_state(config)
    if state is None or not state.active:
        return None
    seed = (
        config.getoption("hypothesis_seed", None)
        if _has_option(config, "hypothesis_seed")
        else None
    )
    impls = ", ".join(f"{li.name} {li.adapter.version} ({li.spec})" for li in state.impls or [])
    return [
        f"conformance: suite {SUITE_VERSION}, spec {SPEC_VERSION}, protocol {PROTOCOL_VERSION}",
        f"conformance: implementations: {impls}",
        f"conformance: device: {state.device_kind}",
        f"conformance: hypothesis profile: {state.profile} "
        f"(seed: {seed if seed is not None else 'derandomized' if state.profile == 'ci' else 'random'}; "
        f"database: {database_path(state.profile, '<impl>') or 'none'}; "
        f"shrink: {state.shrink}, --conformance-shrink)",
    ]


def _has_option(config: pytest.Config, name: str) -> bool:
    try:
        config.getoption(name)
        return True
    except ValueError:
        return False
