"""Which conformance tests judge a mutant, fastest first.

One baseline run of the slice per commit records each test's duration and, for code that runs
in the pytest process, which tests reach each line (coverage contexts). A mutant then runs only
the tests that reach its lines, and stops at the first failure. A mutant no test reaches is a
survivor without running anything: no conformance property looks at that line.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import covmap
from targets import Group

IMPORT = "<import>"


@dataclass
class Baseline:
    """Durations of every test of every slice, and line coverage of the in-process ones."""

    durations: dict[str, float] = field(default_factory=dict)
    slices: dict[str, list[str]] = field(default_factory=dict)  # Group.slice_key -> node ids
    lines: dict[str, dict[int, list[str]]] = field(default_factory=dict)  # module -> line -> ids
    spawners: list[str] = field(default_factory=list)  # tests that run the store in a subprocess
    # --select coverage: Group.slice_key -> module -> line -> node ids, in every process (covmap)
    reach: dict[str, dict[str, dict[int, list[str]]]] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.__dict__))

    @classmethod
    def load(cls, path: Path) -> Baseline:
        raw = json.loads(path.read_text())
        raw["lines"] = {m: {int(k): v for k, v in ls.items()} for m, ls in raw["lines"].items()}
        raw["reach"] = {
            key: {m: {int(k): v for k, v in ls.items()} for m, ls in mods.items()}
            for key, mods in raw.get("reach", {}).items()
        }
        return cls(**raw)

    def tests_for(
        self, group: Group, module: str, first: int, last: int, source: Path | None = None
    ) -> list[str]:
        """The tests judging a mutant of ``module`` spanning lines ``first..last``, fastest
        first. With a coverage map of the slice (``--select coverage``) and the module's
        ``source``: the tests reaching its statement, in any process (``covmap``)."""
        if group.slice_key in self.reach and source is not None:
            found = covmap.tests_for(self.reach[group.slice_key], source, module, first, last)
            ids = set(self.slices[group.slice_key]) if found is None else set(found)
            return sorted(ids, key=lambda t: self.durations.get(t, 0.0))
        ids: set[str] = set()
        if group.in_process:
            for line in range(first, last + 1):
                ids.update(self.lines.get(module, {}).get(line, ()))
        if not group.in_process or IMPORT in ids:
            ids = set(self.slices[group.slice_key])
        elif not ids:  # no in-process test reaches it: only one that runs a subprocess can
            ids = {t for t in self.slices[group.slice_key] if t.split("[", 1)[0] in self.spawners}
        return sorted(ids, key=lambda t: self.durations.get(t, 0.0))


def _junit_durations(path: Path) -> dict[str, float]:
    out = {}
    for case in ET.parse(path).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        cls, name = case.get("classname", ""), case.get("name", "")
        module = cls.replace(".", "/") + ".py"
        out[f"{module}::{name}"] = float(case.get("time", 0))
    return out


def _coverage_lines(data_file: Path, workdir: Path, modules: tuple[str, ...]) -> dict:
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    out: dict[str, dict[int, list[str]]] = {}
    for module in modules:
        by_line = data.contexts_by_lineno(str((workdir / module).resolve())) or {}
        out[module] = {
            # "" is the empty context: the line ran at import (a decorator, a class body), so
            # every test depends on it; IMPORT marks it
            line: sorted({c.split("|", 1)[0] if c else IMPORT for c in ctxs})
            for line, ctxs in by_line.items()
        }
    return out


def subprocess_tests(workdir: Path) -> list[str]:
    """``file::test`` of the conformance tests whose body starts a subprocess (coverage of the
    pytest process cannot see what they reach)."""
    import ast

    out = []
    for path in sorted((workdir / "conformance").rglob("test_*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            test = isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
            if test and "subprocess" in ast.unparse(node):
                out.append(f"{path.relative_to(workdir).as_posix()}::{node.name}")
    return out


def run_baseline(
    base: Baseline,
    groups: list[Group],
    workdir: Path,
    env: dict[str, str],
    out: Path,
    *,
    select: str = "slice",
    commit: str = "HEAD",
    cache: Path | None = None,
) -> None:
    """Run each slice not yet in ``base`` once on the unmutated code; it must be green. With
    ``select="coverage"`` that run records the slice's coverage map (or takes it from
    ``cache`` when the code and the suite are the same)."""
    base.spawners = subprocess_tests(workdir)
    if select == "coverage":
        for group in groups:
            if group.slice_key not in base.reach:
                _coverage_map(base, group, workdir, env, out, commit, cache or out)
        return
    for group in groups:
        if group.slice_key in base.slices and all(m in base.lines for m in group.modules if group.in_process):
            continue
        tag = hashlib.sha1(group.slice_key.encode()).hexdigest()[:8]
        junit = out / f"baseline-{tag}.xml"
        cmd = [sys.executable, *group.pytest_args(), "conformance", f"--conformance-ids={group.ids}"]
        cmd += [f"--junitxml={junit}", "-q"]
        cov_file = out / f"coverage-{tag}"
        run_env = env
        if group.in_process:
            run_env = {**env, "COVERAGE_FILE": str(cov_file)}
            # Directories, not package names: --cov=pkg imports it too early (numpy twice).
            dirs = sorted({str((workdir / m).parent.resolve()) for m in group.modules})
            cmd += [f"--cov={d}" for d in dirs]
            cmd += ["--cov-context=test", "--cov-report="]
        print(f"baseline: {group.name}: {shlex.join(cmd[1:])}", flush=True)
        proc = subprocess.run(cmd, cwd=workdir, env=run_env)
        if proc.returncode != 0:
            raise SystemExit(f"baseline of {group.name} failed (exit {proc.returncode}): fix the suite first")
        durations = _junit_durations(junit)
        base.durations.update(durations)
        base.slices[group.slice_key] = sorted(durations)
        if group.in_process:
            base.lines.update(_coverage_lines(cov_file, workdir, group.modules))


def _coverage_map(
    base: Baseline, group: Group, workdir: Path, env: dict[str, str], out: Path, commit: str, cache: Path
) -> None:
    from execute import REPO

    key = covmap.cache_key(group, commit, REPO)
    path = cache / f"{key}.json"
    if path.exists():
        print(f"coverage map: {group.name}: cached {path}", flush=True)
        got = covmap.load(path)
    else:
        tag = hashlib.sha1(group.slice_key.encode()).hexdigest()[:8]
        junit = out / f"covmap-{tag}.xml"
        reach = covmap.record(group, workdir, env, out / f"covmap-{tag}", junit)
        durations = _junit_durations(junit)
        got = {"slice": group.slice_key, "commit": commit, "durations": durations, "reach": reach}
        cache.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got))
    base.durations.update(got["durations"])
    base.slices[group.slice_key] = sorted(got["durations"])
    base.reach[group.slice_key] = got["reach"]
