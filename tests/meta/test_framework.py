"""The plugin itself: usage errors, manifests, IDs, capabilities, reports, xdist, inertness."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import REPO, run_suite

FAST = "--conformance-ids=STORE-MAP-00[12],STORE-EVICT-002"


@pytest.mark.parametrize(
    "impl, message",
    [
        ("no_such_module:thing", "cannot import 'no_such_module'"),
        ("fake_adapters:missing", "has no attribute 'missing'"),
        ("fake_adapters:typo", "unknown capability 'store.spil.disk'"),
        ("fake_adapters:lacks_methods", "lacks required method(s) inspect, close_store"),
        ("fake_adapters:not_available", "not available: the fake thing is not installed"),
        ("dask-cuda", "not available"),
        ("distributed-p2p", "not available yet"),
        ("nonsense", "expected 'module:attr'"),
    ],
)
def test_bad_impl_is_one_usage_error(tmp_path, impl, message):
    proc, report = run_suite(["conformance", f"--impl={impl}"], tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert proc.stderr.count("ERROR:") == 1
    assert report is None


def test_report_and_na(tmp_path):
    proc, report = run_suite(
        ["conformance", "--impl=reference", FAST, "-v"], tmp_path
    )  # -q -v: header on
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["table"] == {
        "STORE-EVICT-002": {"reference@sim": "N/A"},
        "STORE-MAP-001": {"reference@sim": "pass"},
        "STORE-MAP-002": {"reference@sim": "pass"},
    }
    assert "| STORE-MAP-001 | pass |" in proc.stdout
    assert "conformance: hypothesis profile: ci" in proc.stdout
    assert (tmp_path / "report" / "conformance.md").exists()


def _manifest(tmp_path, body):
    p = tmp_path / "m.toml"
    p.write_text(textwrap.dedent(body))
    return p


def test_manifest_modes(tmp_path):
    m = _manifest(
        tmp_path,
        """
        [STORE-MAP-001]
        mode = "xfail"
        reason = "it passes, so this shows XPASS"
        link = "https://example.invalid/1"
        [STORE-MAP-002]
        mode = "skip"
        reason = "skipped on purpose"
        link = "https://example.invalid/2"
    """,
    )
    proc, report = run_suite(["conformance", "--impl=reference", FAST, f"--expected={m}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["table"]["STORE-MAP-001"] == {"reference@sim": "XPASS"}
    assert report["table"]["STORE-MAP-002"] == {"reference@sim": "skip"}


def test_xfail_for_failing_peer_and_norun(tmp_path):
    m = _manifest(
        tmp_path,
        """
        impl = "distributed-spill"
        [STORE-MAP-003]
        mode = "xfail-norun"
        reason = "pop is NotImplemented"
        link = "docs/findings/distributed-spill.md"
    """,
    )
    proc, report = run_suite(
        [
            "conformance",
            "--impl=distributed-spill",
            "--conformance-ids=STORE-MAP-003",
            f"--expected={m}",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["table"] == {"STORE-MAP-003": {"distributed-spill@sim": "xfail"}}


@pytest.mark.parametrize(
    "body, message",
    [
        (
            '[STORE-NOPE-999]\nmode = "xfail"\nreason = "r"\nlink = "l"\n',
            "matching no conformance test: STORE-NOPE-999",
        ),
        ('[STORE-MAP-001]\nmode = "maybe"\nreason = "r"\nlink = "l"\n', "mode must be one of"),
        ('[STORE-MAP-001]\nmode = "xfail"\n', "'reason' is required"),
    ],
)
def test_bad_manifest_is_a_usage_error(tmp_path, body, message):
    m = _manifest(tmp_path, body)
    proc, _ = run_suite(
        ["conformance", "--impl=reference", f"--expected={m}", "--collect-only"], tmp_path
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert message in proc.stderr


def test_duplicate_ids_are_an_error(tmp_path):
    t = tmp_path / "test_dup.py"
    t.write_text(
        textwrap.dedent("""
        from conformance import conformance_id, requires

        @conformance_id("DUP-ID-001")
        @requires("store")
        def test_a(impl): pass

        @conformance_id("DUP-ID-001")
        @requires("store")
        def test_b(impl): pass
    """)
    )
    proc, _ = run_suite([str(t), "--impl=reference", "-p", "no:randomly"], tmp_path)
    assert proc.returncode == 4
    assert "duplicate conformance ID DUP-ID-001" in proc.stderr


def test_two_implementations_one_table_and_xdist(tmp_path):
    args = ["conformance", "--impl=reference", "--impl=fake_adapters:renamed_reference", FAST]
    proc1, r1 = run_suite(args, tmp_path / "a")
    proc2, r2 = run_suite([*args, "-n", "2"], tmp_path / "b")
    assert proc1.returncode == 0 and proc2.returncode == 0, proc2.stdout[-3000:]
    assert r1["table"] == r2["table"]
    assert r1["table"]["STORE-MAP-001"] == {"reference@sim": "pass", "renamed@sim": "pass"}
    assert "| ID | reference@sim | renamed@sim |" in proc2.stdout


def test_plugin_is_inert_elsewhere(tmp_path):
    t = tmp_path / "test_plain.py"
    t.write_text("def test_plain():\n    assert True\n")
    proc, report = run_suite([str(t)], tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "conformance" not in proc.stdout.replace(str(tmp_path), "")
    assert report is None


def test_pyargs_from_elsewhere(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--pyargs",
            "conformance",
            "--impl=reference",
            FAST,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "| STORE-MAP-001 | pass |" in proc.stdout


def test_report_json_metadata(tmp_path):
    proc, report = run_suite(
        ["conformance", "--impl=zict", "--conformance-ids=STORE-MAP-001"], tmp_path
    )
    assert proc.returncode == 0
    (impl,) = report["implementations"]
    assert impl["name"] == "zict" and "store" in impl["capabilities"]
    assert report["profile"] == "ci" and report["device"] == "sim"
    assert json.dumps(report)


@pytest.mark.parametrize("expected", [False, True])
def test_failed_body_skips_leak_checks(tmp_path, expected):
    """A test body that fails while its traceback still holds device arrays (STORE-OOM-002's
    ``hog``, as dask-cuda's OOM handler raising TypeError did) is one failure, not a second
    teardown "leak" error; under a manifest xfail it is just xfail."""
    args = [
        "conformance",
        "--impl=broken_adapters:oom_handler_raises",
        "--conformance-ids=STORE-OOM-002",
        "-rA",
    ]
    if expected:
        m = _manifest(
            tmp_path,
            """
            impl = "broken-oom-handler-raises"
            [STORE-OOM-002]
            mode = "xfail"
            reason = "the OOM handler raises TypeError"
            link = "https://example.invalid/oom"
        """,
        )
        args.append(f"--expected={m}")
    proc, report = run_suite(args, tmp_path)
    out = proc.stdout
    assert report is not None, out[-3000:] + proc.stderr[-3000:]
    cell = report["table"]["STORE-OOM-002"]["broken-oom-handler-raises@sim"]
    assert "error" not in out.splitlines()[-1], out[-3000:]  # no teardown error on top
    assert "(leak)" not in out and "store cleanup" not in out, out[-3000:]
    if expected:
        assert (cell, proc.returncode) == ("xfail", 0), out[-3000:]
    else:
        assert (cell, proc.returncode) == ("FAIL", 1), out[-3000:]
        assert "TypeError: nothing left to spill" in out, out[-3000:]
