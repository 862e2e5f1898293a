"""The suite as a user installs it (issue 43, item 4): the wheel, built here, installed into a
fresh virtual environment with the ``shuffle`` extra, run as ``pytest --pyargs conformance``
from a folder outside the repository against adapter files there: the store slice on the
README's in-house store, and one shuffle ID on the README's copyable shuffle adapter.

Slow (a fresh venv and its dependencies: minutes), so nightly: ``pytest -m slow
tests/test_wheel_install.py``. pip reads the machine's own configuration (index, find-links)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "meta"))
from readme_examples import store_example_files  # noqa: E402

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONFORMANCE_PROFILE")}
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (cmd, proc.stdout[-4000:], proc.stderr[-4000:])
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, the wheel)."""
    root = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root), str(REPO)], root
    )
    (wheel,) = root.glob("proxify_conformance-*.whl")
    _run([sys.executable, "-m", "venv", str(root / "venv")], root)
    bin_ = root / "venv" / "bin"
    _run([str(bin_ / "python"), "-m", "pip", "install", "-q", f"{wheel}[shuffle]"], root)
    return bin_, wheel


def test_the_wheel_ships_spec_readme_and_what_the_manifests_link(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"conformance/SPEC.md", "conformance/README.md"} <= names
    for toml in (n for n in names if n.startswith("conformance/expected/")):
        text = zipfile.ZipFile(wheel).read(toml).decode()
        for link in re.findall(r'^link = "([^"#]+)', text, flags=re.M):
            shipped = link.replace("docs/findings/", "conformance/findings/")
            assert link.startswith("https://") or shipped in names, (toml, link)


def test_store_slice_and_a_shuffle_id_from_a_users_folder(installed, tmp_path):
    bin_, _ = installed
    assert REPO not in tmp_path.parents
    for name, text in store_example_files().items():
        (tmp_path / name).write_text(text)
    from readme_examples import shuffle_example

    (tmp_path / "my_shuffle.py").write_text(shuffle_example())
    report = tmp_path / "report"
    store = _run(
        [str(bin_ / "pytest"), "-p", "no:cacheprovider", "-q", "--pyargs", "conformance",
         "--impl=tiny_adapter:adapter", "--expected=tiny.toml", "--conformance-ids=STORE-*",
         f"--conformance-report={report}"],
        tmp_path,
    )  # fmt: skip
    table = json.loads((report / "conformance.json").read_text())["table"]
    assert table and all(c["tiny@sim"] in ("pass", "N/A", "xfail") for c in table.values()), table
    # the links resolve here: SPEC.md as the installed package holds it
    spec = re.search(r"\]\(([^)#]+SPEC\.md)#c", store.stdout).group(1)
    assert Path(spec).is_file() and "site-packages" in spec, spec
    md = (report / "conformance.md").read_text()
    for target in set(re.findall(r"\]\(([^)#]+)#", md)):
        assert (report / target).resolve().is_file(), target
    shuffle = _run(
        [str(bin_ / "pytest"), "-p", "no:cacheprovider", "-q", "--pyargs", "conformance",
         "--impl=my_shuffle:adapter", "--conformance-ids=SHUF-ROWS-001"],
        tmp_path,
    )  # fmt: skip
    assert "| SHUF-ROWS-001 | pass |" in shuffle.stdout, shuffle.stdout[-3000:]
