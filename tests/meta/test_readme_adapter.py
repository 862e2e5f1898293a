"""conformance/README.md's copyable shuffle adapter loads, validates, and shuffles correctly
through the suite's own cluster and oracle."""

from __future__ import annotations

import importlib

from readme_examples import shuffle_example

from conformance.runner.loader import validate
from conformance.shuffle import oracle as shuffle_oracle
from conformance.shuffle.harness import ShuffleCluster
from conformance.shuffle.tables import mixed_case


def test_the_readme_shuffle_adapter_passes_the_oracle(tmp_path, monkeypatch):
    # A module file, as a user would save it: the workers unpickle its task by module name
    # (spawned worker processes inherit this sys.path).
    (tmp_path / "readme_shuffle_adapter.py").write_text(shuffle_example())
    monkeypatch.syspath_prepend(str(tmp_path))
    adapter = importlib.import_module("readme_shuffle_adapter").adapter()
    validate("readme_shuffle_adapter:adapter", adapter)
    case = mixed_case(0, n_inputs=3, rows_per_input=50, npartitions=4)
    with ShuffleCluster(adapter, "sim", tmp_path / "spill") as cluster:
        problems = shuffle_oracle.check(case, cluster.run(case).outputs)
    assert not problems, problems
