"""The plugin itself: usage errors, manifests, IDs, capabilities, reports, xdist, inertness."""

from __future__ import annotations

import json
import os
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
        ("fake_adapters:removed_cap", "'store.faults.disk' was removed: the faults of a disk "
         "tier (a full disk, failed writes) are implied by 'store.spill.disk' (SPEC 9.6)"),
        ("fake_adapters:lacks_methods", "lacks required method(s) inspect, close_store"),
        ("fake_adapters:not_available", "not available: the fake thing is not installed"),
        ("dask-cuda", "not available"),
        ("nonsense", "expected 'module:attr'"),
    ],
)
def test_bad_impl_is_one_usage_error(tmp_path, impl, message):
    proc, report = run_suite(["conformance", f"--impl={impl}"], tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert message in proc.stderr, proc.stderr
    assert proc.stderr.count("ERROR:") == 1
    assert report is None


def test_every_removed_capability_names_a_replacement():
    """A removed name is a usage error that says what to declare instead, never 'unknown'."""
    from conformance.capabilities import ALL_CAPABILITIES, REMOVED, removed_capabilities

    assert not set(REMOVED) & ALL_CAPABILITIES
    for old, why in REMOVED.items():
        named = [c for c in ALL_CAPABILITIES if f"'{c}'" in why]
        assert named or "drop it" in why, (old, why)
        assert removed_capabilities({old, "store"}) == [f"{old!r} was removed: {why}"]


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


def test_report_says_what_was_run_and_links_clauses(tmp_path):
    """The report opens with implementations and versions, device, profile, date and commit,
    and links each row to its SPEC.md clauses."""
    proc, report = run_suite(
        ["conformance", "--impl=zict", "--conformance-ids=STORE-MAP-001"], tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    md = (tmp_path / "report" / "conformance.md").read_text()
    head = md.split("| ID |")[0].removeprefix("# Conformance report\n\n")
    import zict

    from conformance.runner.gitinfo import commit as head_commit

    commit = head_commit(cwd=REPO)
    assert f"- implementations: zict {zict.__version__} (`zict`)" in head, head
    for line in ("- device: sim", "- profile: ci", f"- commit: {commit}"):
        assert line in head, head
    assert report["commit"] == commit and report["date"][:2] == "20", report
    assert head in proc.stdout  # the terminal section starts the same way
    spec = os.path.relpath(REPO / "conformance" / "SPEC.md", tmp_path / "report")
    assert f"[1.1]({spec}#c1.1)" in md, md
    assert "[1.1](conformance/SPEC.md#c1.1)" in proc.stdout
    assert report["clauses"]["STORE-MAP-001"][0] == {
        "clause": "1.1",
        "link": "conformance/SPEC.md#c1.1",
    }


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
    assert proc.returncode == 1, "a strict xfail that passes must fail the run\n" + proc.stdout
    assert report["table"]["STORE-MAP-001"] == {"reference@sim": "XPASS"}
    assert report["table"]["STORE-MAP-002"] == {"reference@sim": "skip"}
    assert "XPASS(strict)" in proc.stdout
    # every cell but a pass has its note; STORE-EVICT-002's N/A comes first in the table
    assert "2. XPASS: it passes, so this shows XPASS (https://example.invalid/1)" in proc.stdout
    assert "| STORE-EVICT-002 | N/A [1] |" in proc.stdout, proc.stdout[-3000:]
    assert "\n1. N/A: " in proc.stdout, proc.stdout[-3000:]


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
    md = (tmp_path / "report" / "conformance.md").read_text()
    assert "| STORE-MAP-003 | xfail [1] |" in md, md
    # the note carries the reason and the link, rebased to the report's folder
    link = os.path.relpath(REPO / "docs/findings/distributed-spill.md", tmp_path / "report")
    assert f"1. xfail: pop is NotImplemented ({link})" in md, md
    (rec,) = report["tests"]
    assert (rec["reason"], rec["link"]) == (
        "pop is NotImplemented",
        "docs/findings/distributed-spill.md",
    )


@pytest.mark.parametrize(
    "body, message",
    [
        (
            '[STORE-NOPE-999]\nmode = "xfail"\nreason = "r"\nlink = "l"\n',
            "matching no conformance test: STORE-NOPE-999",
        ),
        ('[STORE-MAP-001]\nmode = "maybe"\nreason = "r"\nlink = "l"\n', "mode must be one of"),
        ('[STORE-MAP-001]\nmode = "xfail"\n', "'reason' is required"),
        (
            '[STORE-MAP-001]\nmode = "xfail"\nreason = "r"\n'
            'link = "docs/findings/zict.md#no-such-heading"\n',
            "[STORE-MAP-001]: link 'docs/findings/zict.md#no-such-heading': no heading in "
            "docs/findings/zict.md has the anchor #no-such-heading",
        ),
        (
            '[STORE-MAP-001]\nmode = "xfail"\nreason = "r"\nlink = "docs/findings/nope.md#x"\n',
            "[STORE-MAP-001]: link 'docs/findings/nope.md#x': no such file",
        ),
        (
            '[STORE-MAP-001]\nmode = "xfail"\nruns = 3\nreason = "r"\nlink = "l"\n',
            "'runs' applies only to mode = \"flaky\"",
        ),
        (
            '[STORE-MAP-001]\nmode = "flaky"\nruns = 0\nreason = "r"\nlink = "l"\n',
            "'runs' must be a positive integer",
        ),
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


def test_shipped_manifests_load_and_their_links_resolve():
    from conformance.runner.manifests import EXPECTED_DIR, load

    paths = sorted(EXPECTED_DIR.glob("*.toml"))
    assert paths
    for path in paths:
        load(path)  # raises ManifestError on a broken link


@pytest.mark.parametrize(
    "heading, slug",
    [
        ("STORE-THREAD-001: race in Slow.__setitem__", "store-thread-001-race-in-slow__setitem__"),
        ("STORE-MAP-004: non-str keys", "store-map-004-non-str-keys"),
        ("`pop` reads back  from [disk](x.md)", "pop-reads-back--from-disk"),
    ],
)
def test_github_slug(heading, slug):
    from conformance.runner.manifests import github_slug

    assert github_slug(heading) == slug


def test_markdown_anchors_number_repeats_and_skip_code():
    from conformance.runner.manifests import markdown_anchors

    text = '# A\n## A\n```\n# not a heading\n```\n<a id="custom"></a>\n'
    assert markdown_anchors(text) == {"a", "a-1", "custom"}


NOT_EXERCISED_TEST = """
from conformance import conformance_id, not_exercised, requires

@conformance_id("NOTEX-ONE-001", clause="9.7")
@requires("store")
def test_fault_never_fires(impl):
    not_exercised("the patched call was never made")

@conformance_id("NOTEX-ONE-002", clause="1.1")
@requires("store")
def test_plain(impl):
    pass
"""


def test_not_exercised_is_its_own_status(tmp_path):
    t = tmp_path / "test_notex.py"
    t.write_text(NOT_EXERCISED_TEST)
    proc, report = run_suite([str(t), "--impl=reference", "-p", "no:randomly"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["table"] == {
        "NOTEX-ONE-001": {"reference@sim": "not exercised"},
        "NOTEX-ONE-002": {"reference@sim": "pass"},
    }
    rec = next(r for r in report["tests"] if r["id"] == "NOTEX-ONE-001")
    assert rec["reason"] == "the patched call was never made", rec
    assert rec["link"] == "conformance/SPEC.md#c9.7", rec
    assert "| NOTEX-ONE-001 | not exercised [1] |" in proc.stdout, proc.stdout
    assert "1. not exercised: the patched call was never made" in proc.stdout


def test_short_transfers_not_exercised_by_zict(tmp_path):
    """zict writes through Python file objects, never the patched os calls: STORE-DISK-010
    proves nothing there and must not read as a pass."""
    proc, report = run_suite(
        ["conformance", "--impl=reference", "--impl=zict", "--conformance-ids=STORE-DISK-010"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["table"] == {
        "STORE-DISK-010": {"reference@sim": "pass", "zict@sim": "not exercised"}
    }


FLAKY_TEST = """
import itertools
from conformance import conformance_id, requires

RUNS = itertools.count()
SEEN = []

@conformance_id("FLAKY-ONE-001", clause="12.1")
@requires("store")
def test_sometimes(impl, tmp_path):
    assert tmp_path not in SEEN, "a rerun got the previous run's fixtures"
    SEEN.append(tmp_path)
    n = next(RUNS)
    assert n % 2 == 1, f"run {n} fails"

@conformance_id("FLAKY-ONE-002", clause="12.1")
@requires("store")
def test_always(impl):
    pass
"""

FLAKY_MANIFEST = """
impl = "reference"
[FLAKY-ONE-001]
mode = "flaky"
reason = "a race that shows on even runs"
link = "https://example.invalid/race"
[FLAKY-ONE-002]
mode = "flaky"
runs = 2
reason = "never fails"
link = "https://example.invalid/ok"
"""


@pytest.mark.parametrize("xdist", [False, True])
def test_flaky_runs_in_one_item_and_counts_failures(tmp_path, xdist):
    t = tmp_path / "test_flaky.py"
    t.write_text(FLAKY_TEST)
    m = _manifest(tmp_path, FLAKY_MANIFEST)
    args = [str(t), "--impl=reference", f"--expected={m}", "-p", "no:randomly"]
    proc, report = run_suite(args + (["-n", "2"] if xdist else []), tmp_path)
    assert proc.returncode == 0, "a flaky entry never fails the run\n" + proc.stdout[-3000:]
    assert report["table"] == {
        "FLAKY-ONE-001": {"reference@sim": "flaky 2/3"},
        "FLAKY-ONE-002": {"reference@sim": "flaky 0/2"},
    }
    rec = next(r for r in report["tests"] if r["id"] == "FLAKY-ONE-001")
    assert (rec["status"], rec["flaky_failed"], rec["flaky_runs"]) == ("flaky", 2, 3), rec
    assert "| FLAKY-ONE-001 | flaky 2/3 [1] |" in proc.stdout, proc.stdout
    assert "1. flaky: a race that shows on even runs (https://example.invalid/race)" in proc.stdout
    assert "2 passed" in proc.stdout.splitlines()[-1], proc.stdout[-500:]


def test_ids_match_case_insensitively(tmp_path):
    proc, report = run_suite(
        ["conformance", "--impl=reference", "--conformance-ids=store-map-00[12]"], tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert set(report["table"]) == {"STORE-MAP-001", "STORE-MAP-002"}


def test_ids_matching_nothing_suggest_the_nearest(tmp_path):
    proc, report = run_suite(
        ["conformance", "--impl=reference", "--conformance-ids=STORE-MAP-001,STORE-DSK-01"],
        tmp_path,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "'STORE-DSK-01' matches no collected conformance ID; nearest: STORE-DISK-01" in (
        proc.stderr
    ), proc.stderr
    assert "STORE-MAP-001" not in proc.stderr.split("nearest")[0]
    assert report is None


def test_same_impl_twice_is_one_column(tmp_path):
    """ci/conformance.sh always passes --impl=reference; a user adding it again is fine."""
    proc, report = run_suite(
        ["conformance", "--impl=reference", "--impl=reference", "--conformance-ids=STORE-MAP-001"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["table"] == {"STORE-MAP-001": {"reference@sim": "pass"}}
