"""The suite run the way a user runs it: from their own folder, by ``pytest`` or ``python -m
pytest``, against an adapter file there (issue 43, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

ADAPTER = """\
from conformance.adapters.reference import ReferenceAdapter


class adapter(ReferenceAdapter):
    name = "mine"
"""
BIN = Path(sys.executable).parent


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The suite in ``cwd``, with none of the repository on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONFORMANCE_PROFILE")}
    return subprocess.run(
        [*args, "-p", "no:cacheprovider", "-q", "--pyargs", "conformance"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def folder(tmp_path) -> Path:
    assert REPO not in tmp_path.parents  # outside the repository, as a user's folder is
    (tmp_path / "my_adapter.py").write_text(ADAPTER)
    return tmp_path


LAUNCHERS = {"pytest": [str(BIN / "pytest")], "python -m pytest": [sys.executable, "-m", "pytest"]}
# CI runs each folder with one launcher, the other pair nightly (each run starts a suite):
# the invocation folder with the ``pytest`` script (the case issue 43 found broken), the
# rootdir with ``python -m pytest``.
_NIGHTLY = pytest.mark.slow


def _launchers(ci: str) -> list:
    return [name if name == ci else pytest.param(name, marks=_NIGHTLY) for name in LAUNCHERS]


@pytest.mark.parametrize("launcher", _launchers("pytest"))
def test_impl_module_in_the_invocation_folder(folder, launcher):
    proc = _run(
        [*LAUNCHERS[launcher], "--impl=my_adapter:adapter", "--conformance-ids=STORE-MAP-001"],
        folder,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "| STORE-MAP-001 | pass |" in proc.stdout
    # outside the checkout the table links the SPEC.md this copy of the suite holds
    import conformance

    spec = Path(conformance.__file__).resolve().parent / "SPEC.md"
    assert f"[1.1]({spec}#c1.1)" in proc.stdout


@pytest.mark.parametrize("launcher", _launchers("python -m pytest"))
def test_impl_module_in_the_rootdir(folder, launcher):
    """Started from a subfolder: the module is found in pytest's rootdir (its ini file)."""
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "sub").mkdir()
    proc = _run(
        [*LAUNCHERS[launcher], "--impl=my_adapter:adapter", "--conformance-ids=STORE-MAP-001"],
        folder / "sub",
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "| STORE-MAP-001 | pass |" in proc.stdout


TYPOS = {
    "refrence": "--impl='refrence': expected 'module:attr' or one of reference, zict, "
    "distributed-spill, dask-cuda, dask-cuda-explicit-comms, distributed-p2p, dask-tasks, "
    "reference-in-dask; did you mean 'reference' or 'reference-in-dask'?",
    "dask_tasks": "--impl='dask_tasks': expected 'module:attr' or one of reference, zict, "
    "distributed-spill, dask-cuda, dask-cuda-explicit-comms, distributed-p2p, dask-tasks, "
    "reference-in-dask; did you mean 'dask-tasks'?",
    "my_adapter:adaptr": "--impl='my_adapter:adaptr': module 'my_adapter' has no attribute "
    "'adaptr'; did you mean 'adapter'?",
    "my_adaptr:adapter": "--impl='my_adaptr:adapter': cannot import 'my_adaptr': no module "
    "named 'my_adaptr' (looked on sys.path and in {folder}); did you mean 'my_adapter'?",
    "my_adapter:typo": "--impl='my_adapter:typo': unknown capability 'store.spil.disk' "
    "(see conformance.capabilities); did you mean 'store.spill.disk'?",
}


def test_typos_are_one_usage_error_naming_the_nearest(folder):
    """Every bad ``--impl`` at once (they are collected into one error), each line exact."""
    with open(folder / "my_adapter.py", "a") as f:
        f.write("\n\nclass typo(adapter):\n    capabilities = {'store', 'store.spil.disk'}\n")
    proc = _run([str(BIN / "pytest"), *(f"--impl={impl}" for impl in TYPOS)], folder)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    want = "\n".join(line.format(folder=folder) for line in TYPOS.values())
    assert proc.stderr.strip() == "ERROR: " + want


@pytest.mark.parametrize("name", ["dask-tasks", "distributed-p2p"])
def test_without_pandas_the_shuffle_adapters_name_the_extra(monkeypatch, name):
    from conformance.runner.loader import ImplError, resolve

    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(ImplError) as err:
        resolve(name)
    assert str(err.value) == (
        f"--impl={name!r}: not available: pandas and dask[dataframe] are needed: "
        "pip install 'proxify-conformance[shuffle]': "
        "ModuleNotFoundError('import of pandas halted; None in sys.modules')"
    )


def test_the_shuffle_extra_installs_what_the_shuffle_ids_import():
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {req.split(">")[0].split("[")[0] for req in extras["shuffle"]}
    assert names == {"pandas", "dask"}
    assert any(req.startswith("dask[dataframe]") for req in extras["shuffle"])
