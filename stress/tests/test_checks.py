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


def test_the_summaries_made_on_the_workers_name_each_kind_of_wrong_data():
    """The shuffle scenario's check from per-table summaries alone (issue 24): a lost,
    duplicated, changed or misplaced row, an output missing, a wrong schema."""
    tables, outputs = _case()
    schema = tables[0].schema
    width = data.bucket_width(1500, buckets=64)  # 24 row ids a bucket

    def problems(outs):
        summaries_in = [data.summarize(t, schema.names, width) for t in tables]
        summaries_out = [data.summarize(t, schema.names, width) for t in outs]
        return " ".join(data.summary_problems(summaries_in, summaries_out, 2, schema, width))

    assert problems(outputs) == ""
    first = outputs[0].column(data.ROW_ID)[0].as_py()
    lo = first // width * width
    lost = problems([outputs[0].slice(1), outputs[1]])
    assert f"row ids [{lo}, {lo + width}): 24 rows in, 23 out" in lost, lost
    assert "1 row-id ranges differ" in lost, lost
    twice = problems([pa.concat_tables([outputs[0], outputs[0].slice(0, 1)]), outputs[1]])
    assert "rows in" in twice and "per-row checksums differ" in twice, twice
    p0 = outputs[0].column("p0").to_numpy().copy()
    p0[3] += 1.0
    changed = problems([outputs[0].set_column(1, "p0", pa.array(p0)), outputs[1]])
    assert "rows changed" in changed, changed
    split = problems([outputs[0], pa.concat_tables([outputs[1], outputs[0].slice(0, 1)])])
    assert "co-located" in split, split
    assert "1 outputs for npartitions=2" in problems(outputs[:1])
    recast = [t.cast(pa.schema([pa.field(f.name, pa.float64()) for f in schema])) for t in outputs]
    assert "has schema" in problems(recast)


def test_an_error_after_a_kill_is_a_violation_only_for_what_declares_recovery():
    """SPEC 14.5: with shuffle.recover a killed worker must not fail the shuffle."""
    from types import SimpleNamespace

    from stress.scenarios import shuffle_faults

    tables, _outputs = _case()
    case = shuffle_faults.KILL.format("transfer")
    res = runs.Result(error=RuntimeError("worker tcp://127.0.0.1:1 left during transfer"))
    judged = {}
    for caps in ({"shuffle"}, {"shuffle", shuffle_faults.RECOVER}):
        impl = SimpleNamespace(name="x", caps=frozenset(caps))
        judged[shuffle_faults.RECOVER in caps] = shuffle_faults._judge(impl, case, tables, res, True, "killed w")
    assert judged[False].status == "error", judged[False]
    assert judged[True].status == "violation", judged[True]
    assert "declares shuffle.recover, yet: RuntimeError: worker" in judged[True].detail
    # a fault that did not fire is judged as before, whatever is declared
    impl = SimpleNamespace(name="x", caps=frozenset({shuffle_faults.RECOVER}))
    assert shuffle_faults._judge(impl, case, tables, res, False, "").detail.startswith("failed before")
