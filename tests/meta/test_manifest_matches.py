"""A manifest entry's ``matches``: a generative machine's xfail accepts only the documented
deviations it names, and still fails the run on any other failure (issue 27, part 4)."""

from __future__ import annotations

import textwrap

import pytest

from conformance.runner.manifests import (
    ManifestError,
    failure_texts,
    load,
    matched_deviations,
    unmatched_failures,
)
from conftest import run_suite

# zict.File names the file after the key: STORE-KEY-002's 300-character key fails to spill
# with "OSError: [Errno 36] File name too long" (docs/findings/zict.md), a quick sure failure.
KEY_002 = "--conformance-ids=STORE-KEY-002"


def _manifest(tmp_path, pattern: str, extra: str = "") -> str:
    p = tmp_path / "m.toml"
    p.write_text(
        textwrap.dedent(
            f"""
            impl = "zict"
            [STORE-MAP-004]
            mode = "xfail"
            reason = "documented deviation the pattern names"
            link = "https://example.invalid/map-004"
            [STORE-KEY-002]
            mode = "xfail"
            reason = "ends on a documented deviation"
            link = "https://example.invalid/key-002"
            matches = {{ STORE-MAP-004 = {pattern!r} }}
            {extra}
            """
        )
    )
    return str(p)


def test_a_failure_the_entry_names_is_xfail(tmp_path):
    m = _manifest(tmp_path, "File name too long")
    proc, report = run_suite(["conformance", "--impl=zict", KEY_002, f"--expected={m}"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["table"] == {"STORE-KEY-002": {"zict@sim": "xfail"}}


def test_a_failure_the_entry_does_not_name_fails_the_run(tmp_path):
    m = _manifest(tmp_path, "no documented deviation says this")
    proc, report = run_suite(["conformance", "--impl=zict", KEY_002, f"--expected={m}"], tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert report["table"] == {"STORE-KEY-002": {"zict@sim": "FAIL"}}
    assert "File name too long" in proc.stdout
    assert "undocumented failure (the manifest names only STORE-MAP-004)" in proc.stdout


def test_a_pass_under_matches_does_not_fail_the_run(tmp_path):
    """Not strict: a machine whose draws miss every named deviation passes; the named
    deviations keep their own strict entries."""
    p = tmp_path / "m.toml"
    p.write_text(
        '[STORE-MAP-002]\nmode = "xfail"\nreason = "r"\nlink = "l"\n'
        '[STORE-MAP-001]\nmode = "xfail"\nreason = "r"\nlink = "l"\n'
        'matches = { STORE-MAP-002 = "x" }\n'
    )
    proc, report = run_suite(
        ["conformance", "--impl=reference", "--conformance-ids=STORE-MAP-001", f"--expected={p}"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["table"] == {"STORE-MAP-001": {"reference@sim": "XPASS"}}


@pytest.mark.parametrize(
    "body, message",
    [
        (
            'matches = { STORE-NOPE-001 = "x" }',
            "matches names 'STORE-NOPE-001', which is not another entry of this manifest",
        ),
        ('matches = { STORE-KEY-001 = "x" }', "which is not another entry"),  # itself
        ('matches = { STORE-MAP-004 = "(" }', "matches[STORE-MAP-004] is not a regular expression"),
        ('matches = { STORE-MAP-004 = " " }', "matches[STORE-MAP-004] must be a non-empty string"),
        ("matches = {}", "'matches' must be a non-empty table"),
        ('mode_flaky = 1\nmatches = { STORE-MAP-004 = "x" }', None),
    ],
)
def test_bad_matches_are_manifest_errors(tmp_path, body, message):
    mode = "flaky" if body.startswith("mode_flaky") else "xfail"
    body = body.removeprefix("mode_flaky = 1\n")
    p = tmp_path / "m.toml"
    p.write_text(
        '[STORE-MAP-004]\nmode = "xfail"\nreason = "r"\nlink = "l"\n'
        f'[STORE-KEY-001]\nmode = "{mode}"\nreason = "r"\nlink = "l"\n{body}\n'
    )
    with pytest.raises(ManifestError) as err:
        load(p)
    assert (message or "'matches' applies only to mode = \"xfail\"") in str(err.value)


def _raise_chained():
    try:
        raise OSError(36, "File name too long")
    except OSError as exc:
        raise AssertionError("store[k] = v raised") from exc


def test_failure_texts_are_leaves_with_their_causes_and_without_notes():
    try:
        _raise_chained()
    except AssertionError as exc:
        chained = exc
    drawn = ValueError("the device peaked at 87,380 bytes in use")
    drawn.add_note("Draw 1 (new key): 'File name too long'")  # a note is a draw, never matched
    group = ExceptionGroup("two distinct failures", [chained, drawn])
    texts = failure_texts(group)
    assert len(texts) == 2
    assert "AssertionError: store[k] = v raised" in texts[0] and "File name too long" in texts[0]
    assert "Draw 1" not in texts[1]
    both = (("STORE-KEY-002", "File name too long"), ("STORE-UNSPILL-002", "peaked at"))
    assert unmatched_failures(group, both) == []
    assert matched_deviations(group, both) == ["STORE-KEY-002", "STORE-UNSPILL-002"]
    # every leaf must be documented: one undocumented leaf is enough to fail
    assert unmatched_failures(group, both[:1]) == [texts[1]]
