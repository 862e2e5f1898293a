"""The end-of-run checks can fail: a lost, duplicated, changed or misplaced row is caught."""

from __future__ import annotations

import pyarrow as pa

from stress import data, runs


def _case():
    tables = [data.make_table(1, i, 500, keys=50) for i in range(3)]
    whole = pa.concat_tables(tables)
    keys = whole.column(data.KEY).to_numpy()
    outputs = [whole.filter(pa.array(keys % 2 == p)) for p in range(2)]
    return tables, outputs


def test_correct_outputs_pass():
    tables, outputs = _case()
    digest = data.digest_all(tables, tables[0].schema.names)
    assert runs.check(tables, digest, outputs, 2, tables[0].schema) == []


def test_each_kind_of_wrong_data_is_named():
    tables, outputs = _case()
    schema = tables[0].schema
    digest = data.digest_all(tables, schema.names)
    lost = [outputs[0].slice(1), outputs[1]]
    twice = [pa.concat_tables([outputs[0], outputs[0].slice(0, 1)]), outputs[1]]
    p0 = outputs[0].column("p0").to_numpy().copy()
    p0[3] += 1.0
    changed = [outputs[0].set_column(1, "p0", pa.array(p0)), outputs[1]]
    split = [outputs[0], pa.concat_tables([outputs[1], outputs[0].slice(0, 1)])]
    assert "1 rows lost" in " ".join(runs.check(tables, digest, lost, 2, schema))
    assert "1 rows duplicated" in " ".join(runs.check(tables, digest, twice, 2, schema)) or any(
        "co-located" in p for p in runs.check(tables, digest, twice, 2, schema))
    assert "1 rows changed" in " ".join(runs.check(tables, digest, changed, 2, schema))
    assert any("co-located" in p for p in runs.check(tables, digest, split, 2, schema))
    assert runs.check(tables, digest, outputs[:1], 2, schema)  # an output missing


def test_split_keys_found_on_both_paths():
    """The packed sort (keys leave room for the output number) and the per-output unique
    (here a negative key forbids packing) name the same split key."""
    for k in (7, -7):
        outputs = [pa.table({data.KEY: [k, 1, 2]}), pa.table({data.KEY: [3, k, 3]}), pa.table({data.KEY: [4]})]
        assert data._split_keys(outputs, data.KEY).tolist() == [k]
        assert data._split_keys(outputs[1:], data.KEY).tolist() == []
