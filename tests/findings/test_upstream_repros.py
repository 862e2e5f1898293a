"""The upstream reports in docs/upstream/ run here, so a report never drifts from what the
code shows. Each test asserts the buggy behaviour: it fails, and says so, once upstream
fixes it. Each proposed patch is applied to a copy of the installed package and shown to
fix its reproduction (issue 27; SPEC clauses 14.6 and 14.1 for the shuffles, 12.1 for zict)."""

from __future__ import annotations

import inspect
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "docs" / "upstream"
REPRO = UPSTREAM / "repro"
ZICT_REPRO = REPO / "docs" / "findings" / "zict-repro"
SITE = Path(pytest.importorskip("pandas").__file__).resolve().parents[1]

REPORTS = {  # report -> (its patch, the package the patch applies to, its repro script)
    "pandas-arrow-hash-nulls": ("pandas", REPRO / "pandas_arrow_hash_nulls.py"),
    "dask-bool-pyarrow-partitioning": ("dask", REPRO / "dask_bool_pyarrow_merge.py"),
    "zict-buffer-races": ("zict", REPRO / "zict_setitem_gap.py"),
    "distributed-p2p-missing-shards": ("distributed", REPRO / "p2p_disk_buffer_unit.py"),
    "distributed-scheduler-pickle-protocol": (
        "distributed",
        REPRO / "distributed_gather_pickle4.py",
    ),
    "distributed-scheduler-info-cache": (
        "distributed",
        REPRO / "distributed_scheduler_info_empty.py",
    ),
}


def _run(script: Path, *args: str, path: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(path) if path else "")
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300, env=env
    )


def _source_hunks(report: str) -> str:
    """The report's patch without its upstream test files (the wheels ship no tests, or
    not all of them): the part that changes the installed package."""
    text = (UPSTREAM / f"{report}.patch").read_text()
    files = ["diff --git" + f for f in text.split("diff --git")[1:]]
    return "".join(f for f in files if "/tests/" not in f.splitlines()[0])


def _patched(tmp_path: Path, package: str, report: str) -> Path:
    """A copy of the installed ``package`` with the report's patch applied."""
    shutil.copytree(SITE / package, tmp_path / package, ignore=shutil.ignore_patterns("tests"))
    subprocess.run(
        ["patch", "-p1", "-s", "-d", str(tmp_path)],
        input=_source_hunks(report),
        text=True,
        check=True,
    )
    return tmp_path


@pytest.mark.parametrize("report", sorted(REPORTS))
def test_report_quotes_its_script_and_its_patch_applies(report):
    """The report shows its reproduction verbatim; the patch applies to the installed code."""
    package, script = REPORTS[report]
    text = (UPSTREAM / f"{report}.md").read_text()
    if script is not None:
        assert script.read_text().strip() in text, f"{report}.md does not quote {script.name}"
    patch = (UPSTREAM / f"{report}.patch").read_text()
    assert patch.startswith("diff --git a/")
    assert patch.rstrip("\n") in text, f"{report}.md does not quote its patch"
    proc = subprocess.run(
        ["patch", "-p1", "--dry-run", "-d", str(SITE)],
        input=_source_hunks(report),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ 1. pandas, then dask
def test_pandas_hashes_a_bool_or_int_pyarrow_value_differently_next_to_a_null(capsys):
    runpy.run_path(str(REPRO / "pandas_arrow_hash_nulls.py"))
    verdict = {line.split()[0]: line.split()[-1] for line in capsys.readouterr().out.splitlines()}
    assert verdict == {
        "bool[pyarrow]": "DIFFERENT",  # the bug
        "int64[pyarrow]": "DIFFERENT",  # the same bug, which dask's float64 cast hides
        "double[pyarrow]": "same",
        "string[pyarrow]": "same",
        "boolean": "same",
        "Int64": "same",
    }


def test_dask_hash_merge_of_bool_pyarrow_keys_drops_a_row(capsys):
    runpy.run_path(str(REPRO / "dask_bool_pyarrow_merge.py"))
    out = capsys.readouterr().out
    assert "rows x of the merge, dask:   [2, 3]" in out  # row 0 (k=True, next to a null) lost
    assert "rows x of the merge, pandas: [0, 2, 3]" in out
    line = out.splitlines()[-1]
    assert line.startswith("outputs holding k=True") and line.count(",") == 1, line  # two


@pytest.mark.slow
def test_pandas_patch_makes_the_hashes_agree(tmp_path):
    proc = _run(
        REPRO / "pandas_arrow_hash_nulls.py",
        path=_patched(tmp_path, "pandas", "pandas-arrow-hash-nulls"),
    )
    assert proc.returncode == 0 and "DIFFERENT" not in proc.stdout, proc.stdout + proc.stderr
    assert proc.stdout.count("same") == 6


@pytest.mark.slow
def test_dask_patch_keeps_the_merge_rows(tmp_path):
    path = _patched(tmp_path, "dask", "dask-bool-pyarrow-partitioning")
    proc = _run(REPRO / "dask_bool_pyarrow_merge.py", path=path)
    assert "rows x of the merge, dask:   [0, 2, 3]" in proc.stdout, proc.stdout + proc.stderr


# ------------------------------------------------------------------ 2. zict
@pytest.mark.parametrize("script", ["lru_evict_gap.py", "buffer_setitem_gap.py"])
def test_zict_race_is_forced_and_its_control_is_not(script):
    proc = _run(ZICT_REPRO / script)
    assert proc.returncode == 0 and proc.stdout.startswith("CONFIRMED"), proc.stdout + proc.stderr
    control = _run(ZICT_REPRO / script, "--control")
    assert control.returncode == 1 and "NOT REPRODUCED" in control.stdout, control.stdout


def test_zict_patch_closes_both_races(tmp_path):
    path = _patched(tmp_path, "zict", "zict-buffer-races")
    for script in ("lru_evict_gap.py", "buffer_setitem_gap.py"):
        proc = _run(ZICT_REPRO / script, path=path)
        assert proc.returncode == 1 and "NOT REPRODUCED" in proc.stdout, proc.stdout + proc.stderr


# ------------------------------------------------------------------ 3. distributed P2P
@pytest.mark.slow
def test_p2p_returns_no_rows_and_no_error_when_shards_are_deleted_or_emptied():
    proc = _run(REPRO / "p2p_missing_shards.py")
    lines = [line for line in proc.stdout.splitlines() if "rows in" in line]
    assert len(lines) == 2, proc.stdout + proc.stderr[-3000:]
    for how, line in zip(("delete", "truncate"), lines, strict=True):
        assert line.startswith(f"{how}: ") and "4000 rows in, 0 rows out, no error" in line, line


@pytest.mark.slow
def test_p2p_patch_raises_instead(tmp_path):
    path = _patched(tmp_path, "distributed", "distributed-p2p-missing-shards")
    proc = _run(REPRO / "p2p_missing_shards.py", path=path)
    lines = [line for line in proc.stdout.splitlines() if "rows in" in line]
    assert len(lines) == 2, proc.stdout + proc.stderr[-3000:]
    assert all("failed during unpack phase" in line for line in lines), lines


def test_zict_report_quotes_its_stress_script():
    """The unforced stress script is intermittent, so it is not run here; the report must
    still show the script it measured, verbatim."""
    script = (REPRO / "zict_distinct_keys_stress.py").read_text().strip()
    assert script in (UPSTREAM / "zict-buffer-races.md").read_text()


def test_zict_report_inline_hook_loses_the_new_value():
    """The condensed hook quoted in the zict report does what the report says."""
    text = (UPSTREAM / "zict-buffer-races.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('buf["k"]                             # KeyError', "assert_lost(buf)  #")
    lost = []

    def assert_lost(buf):
        try:
            buf["k"]
        except KeyError:
            lost.append(True)

    exec(compile(code, "zict-buffer-races.md", "exec"), {"assert_lost": assert_lost})
    assert lost == [True], "buf['k'] no longer raises KeyError after the forced interleaving"


# ------------------------------------------------------------------ 4. distributed's scheduler
def _gather_peaks(proc: subprocess.CompletedProcess, who: str = "worker") -> dict[str, float]:
    """'through' and 'direct': the worker's (or the scheduler's) traced peak, in results."""
    peaks = {}
    for line in proc.stdout.splitlines():
        if line.startswith("gathered "):
            peaks[line.split()[1]] = float(line.split(f"{who} peak ", 1)[1].split("x")[0])
    assert set(peaks) == {"through", "direct"}, proc.stdout + proc.stderr[-3000:]
    return peaks


@pytest.mark.slow  # a SubprocessCluster: 20 s on a loaded 2-core machine
def test_a_gather_through_the_scheduler_pickles_the_result_in_band():
    proc = _run(REPRO / "distributed_gather_pickle4.py")
    peaks = _gather_peaks(proc)
    assert peaks["through"] > 2.0 and peaks["direct"] < 0.5, peaks
    scheduler = _gather_peaks(proc, "scheduler")  # the frames in transit: about one result
    assert 0.8 < scheduler["through"] < 2.0, scheduler


@pytest.mark.slow
def test_scheduler_patch_gathers_out_of_band(tmp_path):
    path = _patched(tmp_path, "distributed", "distributed-scheduler-pickle-protocol")
    peaks = _gather_peaks(_run(REPRO / "distributed_gather_pickle4.py", path=path))
    assert peaks["through"] < 0.5 and peaks["direct"] < 0.5, peaks


# ------------------------------------------------------------------ 5. distributed's client
def _empty_listings(proc: subprocess.CompletedProcess) -> int:
    """How many of the script's scheduler_info() calls listed no workers."""
    line = next((x for x in proc.stdout.splitlines() if "listed no workers in" in x), None)
    assert line is not None, proc.stdout + proc.stderr[-3000:]
    return int(line.split("listed no workers in ")[1].split()[0])


def test_scheduler_info_can_list_no_workers_while_two_run():
    assert _empty_listings(_run(REPRO / "distributed_scheduler_info_empty.py")) > 0


def test_scheduler_info_patch_returns_what_the_call_fetched(tmp_path):
    path = _patched(tmp_path, "distributed", "distributed-scheduler-info-cache")
    assert _empty_listings(_run(REPRO / "distributed_scheduler_info_empty.py", path=path)) == 0


# ------------------------------------------------------------------ unit-level repros
def test_zict_setitem_gap_leaves_a_stale_copy_that_del_resurrects(tmp_path):
    proc = _run(REPRO / "zict_setitem_gap.py")
    assert "in fast=True, in slow=True, len(buf)=4" in proc.stdout, proc.stdout + proc.stderr
    assert "buf.get('k') -> 'old'" in proc.stdout
    patched = _run(
        REPRO / "zict_setitem_gap.py", path=_patched(tmp_path, "zict", "zict-buffer-races")
    )
    assert "in slow=False, len(buf)=3" in patched.stdout, patched.stdout + patched.stderr
    assert "buf.get('k') -> None" in patched.stdout


def test_protocol_4_pickles_a_pandas_result_in_band_and_5_out_of_band():
    """The serializer-level repro of the pickle proposal: one in-band frame holding a copy
    (and a peak of a few copies) under protocol 4, out-of-band buffers under protocol 5."""
    proc = _run(REPRO / "distributed_pickle_protocol_unit.py")
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["protocol 4", "protocol 5"], proc.stderr

    def ratio(line: str, what: str) -> float:
        return float(line.split(f"{what} ")[1].split("x")[0])

    assert lines[0].startswith("protocol 4: 1 frames,"), lines
    assert ratio(lines[0], "stream") >= 0.99 and ratio(lines[0], "peak") > 2.0, lines
    assert not lines[1].startswith("protocol 5: 1 frames,"), lines
    assert ratio(lines[1], "stream") < 0.01 and ratio(lines[1], "peak") < 0.5, lines
    scheduler = inspect.getsource(pytest.importorskip("distributed.scheduler").Scheduler)
    assert scheduler.count('"pickle-protocol": 4') == 2, "the scheduler no longer pins protocol 4"


def test_disk_buffer_reads_a_deleted_an_emptied_and_an_unwritten_file_alike(tmp_path):
    proc = _run(REPRO / "p2p_disk_buffer_unit.py")
    assert proc.stdout.splitlines() == [
        f"{id}: DataUnavailable: {id}" for id in ("deleted", "emptied", "never-written")
    ], proc.stdout + proc.stderr
    path = _patched(tmp_path, "distributed", "distributed-p2p-missing-shards")
    lines = _run(REPRO / "p2p_disk_buffer_unit.py", path=path).stdout.splitlines()
    assert lines[0].startswith("deleted: RuntimeError: ") and "is missing; 100 bytes" in lines[0]
    assert lines[1].startswith("emptied: RuntimeError: ") and "holds 0 bytes; 100 were" in lines[1]
    assert lines[2] == "never-written: DataUnavailable: never-written", lines
