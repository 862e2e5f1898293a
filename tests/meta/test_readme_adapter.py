"""conformance/README.md's copyable shuffle adapter loads, validates, and shuffles correctly
through the suite's own cluster and oracle."""

from __future__ import annotations

import importlib
import re

from conformance import shuffle_oracle
from conformance.loader import validate
from conformance.shuffle_harness import ShuffleCluster
from conformance.tables import mixed_case
from conftest import REPO


def _readme_adapter_source() -> str:
    text = (REPO / "conformance" / "README.md").read_text()
    section = text.split("A complete shuffle adapter that you can copy", 1)[1]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]


def test_the_readme_shuffle_adapter_passes_the_oracle(tmp_path, monkeypatch):
    # A module file, as a user would save it: the workers unpickle its task by module name
    # (spawned worker processes inherit this sys.path).
    (tmp_path / "readme_shuffle_adapter.py").write_text(_readme_adapter_source())
    monkeypatch.syspath_prepend(str(tmp_path))
    adapter = importlib.import_module("readme_shuffle_adapter").adapter()
    validate("readme_shuffle_adapter:adapter", adapter)
    case = mixed_case(0, n_inputs=3, rows_per_input=50, npartitions=4)
    with ShuffleCluster(adapter, "sim", tmp_path / "spill") as cluster:
        problems = shuffle_oracle.check(case, cluster.run(case).outputs)
    assert not problems, problems
