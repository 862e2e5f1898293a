"""The adapter guide's worked example (conformance/README.md: an in-house store, its adapter
and its manifest) runs through the suite from a folder of its own, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from readme_examples import store_example_files

from conftest import REPO

# A quick slice; tests/test_wheel_install.py (slow) runs the whole store slice on it.
IDS = "STORE-VALUE-*,STORE-ACCT-00[1234],STORE-UNSPILL-00[12],STORE-RECENCY-002,STORE-LIMIT-006"


def test_the_guides_in_house_store_runs_as_the_guide_says(tmp_path):
    assert REPO not in tmp_path.parents
    for name, text in store_example_files().items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONFORMANCE_PROFILE")}
    report = tmp_path / "report"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "pytest"), "-p", "no:cacheprovider", "-q",
         "--pyargs", "conformance", "--impl=tiny_adapter:adapter", "--expected=tiny.toml",
         f"--conformance-ids={IDS}", f"--conformance-report={report}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    table = json.loads((report / "conformance.json").read_text())["table"]
    assert len(table) >= 8 and {c["tiny@sim"] for c in table.values()} <= {"pass", "N/A"}, table


def test_the_guides_capability_table_is_the_vocabulary():
    """Every capability has its row in the guide, and every row is a capability."""
    import re

    from readme_examples import README

    from conformance.capabilities import ALL_CAPABILITIES

    text = README.read_text()
    section = text.split("### Capabilities: what each one declares", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `([a-z._]+)` \|", section, flags=re.M)
    assert sorted(rows) == sorted(ALL_CAPABILITIES)
