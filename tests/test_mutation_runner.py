"""The mutation runner (ci/mutation): its policy pieces, and one small real run as a smoke test.

The smoke run mutates ``reference_impl/store/serialize.py`` in a copy of the committed tree and
judges a few mutants with two conformance IDs, proving end to end that mutants are applied
where the tests import them from, judged, recorded, resumed and reported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "ci" / "mutation"))

import plan  # noqa: E402
import rejudge  # noqa: E402
import report  # noqa: E402
import targets  # noqa: E402

pytest.importorskip("cosmic_ray")


def test_annotations_are_not_mutated():
    src = "from __future__ import annotations\ndef f(x: int | None) -> A | B:\n    return x | 1\n"
    spans = plan.annotation_spans(src)
    assert plan._inside((2, 9), spans) and plan._inside((2, 25), spans)
    assert not plan._inside((3, 11), spans)


def test_operator_policy_keeps_one_replacement_per_operator():
    assert targets.keep_operator("core/ReplaceBinaryOperator_Add_Sub")
    assert not targets.keep_operator("core/ReplaceBinaryOperator_Add_Pow")
    assert targets.keep_operator("core/ReplaceComparisonOperator_Lt_LtE")
    assert not targets.keep_operator("core/ReplaceComparisonOperator_Lt_Is")
    assert targets.keep_operator("core/ZeroIterationForLoop")


def test_signature_ignores_position_and_paths():
    a = "--- a/x/m.py\n+++ b/x/m.py\n@@ -3 +3 @@\n-    y = a + b\n+    y = a - b\n"
    b = "--- a/other/m.py\n+++ b/other/m.py\n@@ -90 +90 @@\n-    y = a + b\n+    y = a - b\n"
    assert report.signature("m.py", "op", "f", a) == report.signature("m.py", "op", "f", b)
    assert report.signature("m.py", "op", "g", a) != report.signature("m.py", "op", "f", a)
    # a module renamed since its survivors were triaged keeps their signatures
    new, old = "reference_impl/store/recency.py", "reference_impl/store/lru.py"
    assert report.FORMERLY[new] == old
    assert report.signature(new, "op", "f", a) == report.signature(old, "op", "f", a)
    assert report.signature(new, "op", "f", a) != report.signature("m.py", "op", "f", a)


def test_wilson_interval_brackets_the_proportion():
    lo, hi = report.wilson(90, 100)
    assert lo < 0.9 < hi and lo > 0.8 and hi < 0.96


def test_triage_rejects_unknown_classes(tmp_path):
    bad = tmp_path / "t.toml"
    bad.write_text('[[mutant]]\nsig = "abc"\nclass = "dunno"\nreason = "x"\n')
    with pytest.raises(ValueError, match="'abc' has class 'dunno'"):
        report.load_triage(bad)


def test_rejudge_applies_a_runs_diff_to_the_repository_path(tmp_path):
    """A survivor's diff names the run's copy of the module; rejudge rewrites the headers to
    the repository path so that it applies to a worktree, by context."""
    module = "pkg/m.py"
    (tmp_path / "pkg").mkdir()
    (tmp_path / module).write_text("a = 1\n\n\ndef f(x):\n    return x + 1\n")
    diff = (
        "--- mutation diff ---\n"
        "--- a//work/main/.mutation/abc/work0/pkg/m.py\n"
        "+++ b//work/main/.mutation/abc/work0/pkg/m.py\n"
        "@@ -1,2 +1,2 @@\n"  # the lines moved since: applied by context
        " def f(x):\n"
        "-    return x + 1\n"
        "+    return x - 1\n"
    )
    patch = rejudge.as_patch(module, diff)
    assert patch.splitlines()[:2] == ["--- a/pkg/m.py", "+++ b/pkg/m.py"]
    subprocess.run(["patch", "-p1", "-s", "-F3", "-d", str(tmp_path)], input=patch, text=True, check=True)
    assert (tmp_path / module).read_text().endswith("return x - 1\n")


def test_a_rejudged_survivor_names_its_class(tmp_path):
    ok = tmp_path / "t.toml"
    ok.write_text('[[mutant]]\nsig = "abc"\nclass = "rejudged"\ntest = "t"\nreason = "x"\n')
    assert report.load_triage(ok)["abc"]["class"] == "rejudged"


def test_every_target_module_exists():
    for group in targets.GROUPS:
        assert group.modules, group.name
        for m in group.modules:
            assert (REPO / m).is_file(), m


def test_each_module_has_one_group_and_the_front_end_is_judged_under_dask():
    """A module in two groups would be judged by whichever came last; the lazy path's
    modules are reached only by a shuffle under dask's API, never by --impl=reference."""
    modules = [m for g in targets.GROUPS for m in g.modules]
    assert len(modules) == len(set(modules)), sorted(m for m in modules if modules.count(m) > 1)
    front = targets.group_of("reference_impl/shuffle/frames.py")
    assert front.impl == "reference-in-dask" and "--impl=reference-in-dask" in front.pytest_args()
    assert front.slice_key != targets.group_of("reference_impl/shuffle/plan.py").slice_key
    assert targets.group_of("reference_impl/table/logical.py").impl == "reference"


def test_a_group_judged_through_two_adapters_passes_both_to_pytest():
    """``--impl=reference,reference-in-dask``: the coordinator's lazy-path registration is
    reached only through the second, and a mutant either adapter fails is killed (nine
    ``update_graph`` survivors of the eager-only slice were killed so, by hand, 2026-12-05)."""
    group = targets.Group("g", (), "SHUF-ROWS-001", False, "reference,reference-in-dask")
    args = group.pytest_args()
    assert [a for a in args if a.startswith("--impl=")] == ["--impl=reference", "--impl=reference-in-dask"]
    assert group.slice_key == "reference,reference-in-dask:SHUF-ROWS-001"


def test_smoke_run_kills_and_resumes(tmp_path):
    """A real run of 3 mutants, then a resumed run that finds nothing left to do."""
    args = [
        sys.executable, str(REPO / "ci" / "mutation" / "run.py"),
        "--module", "reference_impl/store/serialize.py",
        "--ids", "STORE-VALUE-001,STORE-CASCADE-001",
        "--jobs", "1", "--limit", "3", "--dir", str(tmp_path), "--budget", "600",
        "--triage", str(tmp_path / "none.toml"), "--report", str(tmp_path / "m.md"),
    ]  # fmt: skip
    first = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert '"run": 3' in first.stdout, first.stdout[-2000:]
    text = (tmp_path / "m.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `reference_impl/store/serialize"))
    cells = [c.strip() for c in row.split("|")]
    assert cells[2:4] == ["11", "3"], row  # 11 mutants, 3 run
    assert int(cells[4]) >= 1, f"no mutant killed: {row}"
    args[args.index("--limit") + 1] = "1"
    again = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert '"run": 1' in again.stdout  # the next in the seeded order, not one already run
    row2 = next(
        line
        for line in (tmp_path / "m.md").read_text().splitlines()
        if line.startswith("| `reference_impl/store/serialize")
    )
    assert [c.strip() for c in row2.split("|")][3] == "4", row2


def test_score_counts_only_the_completed_prefix_of_the_seeded_order(tmp_path):
    """A result past the first unjudged mutant (a carried kill) is shown, never scored: the
    prefix alone is a uniform sample of the module."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    module = "reference_impl/store/serialize.py"
    plan.init_session(module, REPO, tmp_path)
    with use_db(str(plan.session_path(tmp_path, module)), WorkDB.Mode.open) as db:
        order = sorted(db.work_items, key=lambda i: plan.rank(i.job_id, 7))
        outcomes = {0: TestOutcome.KILLED, 1: TestOutcome.SURVIVED, 3: TestOutcome.KILLED}
        for place, outcome in outcomes.items():  # place 2 never ran
            result = WorkResult(WorkerOutcome.NORMAL, output="", test_outcome=outcome, diff="-a\n+b\n")
            db.set_result(order[place].job_id, result)
    (s,) = [m for m in report.score(tmp_path, {}, seed=7) if m.module == module]
    assert (s.killed, s.survived, s.beyond) == (1, 1, 1)
    (other,) = [m for m in report.score(tmp_path, {}, seed=8) if m.module == module]
    assert other.run + other.beyond == 3  # another order, another prefix; nothing lost


def test_coverage_map_judges_by_statement_and_sends_import_time_code_to_the_whole_slice(tmp_path):
    """A mutant is judged by the tests reaching its statement's header (a continuation line
    has no trace of its own); module-level code and numba modules go to the whole slice."""
    import covmap

    src = tmp_path / "m.py"
    src.write_text(
        "X = 1 + 2\n"  # 1: import time
        "def f(a=3):\n"  # 2: the default is evaluated at import
        "    y = (a +\n"  # 3
        "         4)\n"  # 4: continuation, never traced itself
        "    if y < 5:\n"  # 5
        "        return 6\n"  # 6
        "    return 7\n"  # 7
    )
    reach = {"m.py": {3: ["t1"], 5: ["t1", "t2"], 6: ["t2"]}}
    assert covmap.tests_for(reach, src, "m.py", 1, 1) is None
    assert covmap.tests_for(reach, src, "m.py", 2, 2) is None
    assert covmap.tests_for(reach, src, "m.py", 4, 4) == ["t1"]
    assert covmap.tests_for(reach, src, "m.py", 5, 5) == ["t1", "t2"]
    assert covmap.tests_for(reach, src, "m.py", 6, 6) == ["t2"]
    assert covmap.tests_for(reach, src, "m.py", 7, 7) == []  # no test reaches: survives unrun
    reach["m.py"][7] = [covmap.WHOLE]  # ran outside any test (import, collection)
    assert covmap.tests_for(reach, src, "m.py", 7, 7) is None
    jit = tmp_path / "k.py"
    jit.write_text("import numba\n\ndef g(x):\n    return x + 1\n")
    assert covmap.tests_for({}, jit, "k.py", 4, 4) is None


def test_a_mutant_that_hangs_one_test_is_killed_at_that_tests_limit(tmp_path, monkeypatch):
    """Each test gets factor x the slowest selected test's baseline + 60 s (pytest-timeout),
    the run factor x their sum + 60 s; a kill by a test's limit is counted as a timeout
    (and forgotten by --rerun-timeouts), its log kept."""
    from types import SimpleNamespace

    import execute
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    durations = {"t::fast": 2.0, "t::slow": 40.0}
    base = SimpleNamespace(durations=durations, tests_for=lambda *a: sorted(durations, key=durations.get))
    spec = SimpleNamespace(start_pos=(3, 0), end_pos=(3, 9))
    job = execute.Job("m.py", SimpleNamespace(mutations=[spec]))
    group = targets.Group("g", ("m.py",), "SHUF-*", False, "reference")
    command, whole = execute.command_for(job, group, base, tmp_path)
    assert "--timeout=180" in command.split() and whole == 3.0 * 42.0 + 60
    assert command.index("--timeout=180") < command.index("t::fast") < command.index("t::slow")
    assert " -n " not in command  # one process unless --test-procs says more
    monkeypatch.setattr(execute, "TEST_PROCS", 2)
    assert "-n 2" in execute.command_for(job, group, base, tmp_path)[0]

    banner = "+++++++++++++++++++ Timeout +++++++++++++++++++\nFAILED t::slow"
    hung = execute._marked(WorkResult(WorkerOutcome.NORMAL, output=banner, test_outcome=TestOutcome.KILLED))
    assert hung.output.startswith("timeout: ") and banner in hung.output and plan.is_timeout(hung.output)
    failed = WorkResult(WorkerOutcome.NORMAL, output="FAILED t::fast - assert 1 == 2", test_outcome=TestOutcome.KILLED)
    assert execute._marked(failed) is failed and not plan.is_timeout(failed.output)
    survived = WorkResult(WorkerOutcome.NORMAL, output=banner, test_outcome=TestOutcome.SURVIVED)
    assert execute._marked(survived) is survived
    assert plan.is_timeout("timeout") and not plan.is_timeout(None)


def test_lines_takes_every_mutant_of_the_lines_and_judges_by_the_tests_given(tmp_path):
    import lines

    spans = [lines._span("581-599"), lines._span("302")]
    assert spans == [(581, 599), (302, 302)]
    module = "reference_impl/store/serialize.py"
    every = [i.mutations[0] for i in plan.mutants(module, REPO)]
    first = min(s.start_pos[0] for s in every)
    chosen = lines.select(module, [(first, first)])
    assert chosen and {s.start_pos[0] for s in chosen} == {first}
    assert len(chosen) == sum(s.start_pos[0] == first for s in every)
    source = (REPO / module).read_text()
    for spec in chosen:
        mutated = lines.mutant_source(source, spec)
        # the line the mutant starts on reads differently in it
        assert mutated.splitlines()[first - 1] != source.splitlines()[first - 1], spec.operator_name
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert False\n")
    assert lines._judge(tmp_path, ["test_ok.py"], 60) == (False, [])
    dead, failed = lines._judge(tmp_path, ["test_ok.py", "test_bad.py"], 60)
    assert dead and failed == ["FAILED test_bad.py::test_bad"], failed
