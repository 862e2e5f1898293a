"""Which conformance tests reach each line of a target module, in every process.

The shuffle, the partitioner and the kernels run in dask worker processes, so the pytest
process's coverage cannot say which test reaches them. A coverage-map run puts
``covhook/`` on ``PYTHONPATH``: every process (pytest, nannies, workers) records coverage
labelled with the running test, which the pytest plugin publishes. The map is cached under
``.mutation/covmap/`` by the slice and the trees of ``reference_impl`` and ``conformance``,
so it is recorded again exactly when the code or the suite changed.

A mutant is then judged by the tests that reach its statement. Lines that run at import (a
module or class body, a decorator, a default value) and numba-compiled code (never traced: a module that uses numba is judged whole)
are judged by the whole slice; a statement no test reaches is a survivor without running.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

from targets import Group

HOOK = Path(__file__).resolve().with_name("covhook")
WHOLE = "<whole slice>"  # the statement runs at import or is compiled: every test depends on it
FORMAT = 2  # of the cached map (2: every module of the reference, not only the group's)
JIT = {"overload", "intrinsic", "vectorize", "guvectorize", "cfunc"}


def cache_key(group: Group, commit: str, repo: Path) -> str:
    """The slice and the trees that decide which tests reach which lines (and the hook that
    records them)."""
    trees = [  # an old commit without the hook keys on "" for it (the hook runs from here)
        subprocess.run(
            ["git", "rev-parse", "-q", "--verify", f"{commit}:{d}"], cwd=repo, text=True, capture_output=True
        ).stdout.strip()
        for d in ("reference_impl", "conformance", "ci/mutation/covhook")
    ]
    return hashlib.sha1("|".join([str(FORMAT), group.slice_key, *trees]).encode()).hexdigest()[:16]


def record(group: Group, workdir: Path, env: dict[str, str], out: Path, junit: Path) -> dict:
    """Run ``group``'s slice once on the unmutated code with coverage in every process; returns
    module -> line -> node ids. The run must be green."""
    data = out / "covdata"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    run_env = {
        **env,
        "PYTHONPATH": os.pathsep.join([str(HOOK), env.get("PYTHONPATH", "")]),
        "COVMAP_DIR": str(data),
        "COVMAP_SOURCE": str((workdir / "reference_impl").resolve()),
    }
    run_env.pop("COVERAGE_PROCESS_START", None)
    cmd = [sys.executable, *group.pytest_args(), "-p", "no:cov", "-p", "covmap_plugin", "conformance"]
    cmd += [f"--conformance-ids={group.ids}", f"--junitxml={junit}", "-q"]
    print(f"coverage map: {group.name}: {shlex.join(cmd[1:])}", flush=True)
    proc = subprocess.run(cmd, cwd=workdir, env=run_env)
    if proc.returncode != 0:
        # A loaded machine under coverage makes the odd test time out: run those once more
        # (their coverage is added); a test that fails twice on the unmutated code is a bug.
        failed = _failed(junit)
        again = junit.with_suffix(".again.xml")
        print(f"coverage map: {len(failed)} tests failed, once more: {failed}", flush=True)
        retry = [*cmd[: cmd.index("conformance")], *failed, f"--junitxml={again}", "-q"]
        if not failed or subprocess.run(retry, cwd=workdir, env=run_env).returncode != 0:
            raise SystemExit(f"coverage map of {group.name} failed (exit {proc.returncode}): fix the suite first")
        _merge_junit(junit, again)
    return read(data, workdir, group.modules)


def _failed(junit: Path) -> list[str]:
    import xml.etree.ElementTree as ET

    out = []
    for case in ET.parse(junit).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "").replace(".", "/") + ".py"
            out.append(f"{module}::{case.get('name')}")
    return sorted(set(out))


def _merge_junit(junit: Path, again: Path) -> None:
    """The retried tests' cases replace the failed ones (their durations count)."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(junit)
    redo = {(c.get("classname"), c.get("name")): c for c in ET.parse(again).iter("testcase")}
    for suite in tree.iter("testsuite"):
        for case in list(suite.iter("testcase")):
            key = (case.get("classname"), case.get("name"))
            if key in redo:
                suite.remove(case)
                suite.append(redo[key])
    tree.write(junit)


def read(data: Path, workdir: Path, modules: tuple[str, ...]) -> dict:
    """Union of every process's data file: module -> line -> sorted node ids."""
    import coverage

    # every module of the reference, not only the group's: groups share slices (partition
    # and shuffle both use SHUF-*), and the cache is keyed by the slice
    found: dict[str, dict[int, set[str]]] = {m: {} for m in modules}
    root = (workdir / "reference_impl").resolve()
    bad = []
    for path in sorted(data.glob("cov.*")):
        cov = coverage.CoverageData(basename=str(path))
        try:
            cov.read()
            measured_files = cov.measured_files()
        except coverage.exceptions.DataError as exc:  # a process killed as it wrote
            bad.append(f"{path.name}: {exc}")
            continue
        for measured in measured_files:
            rel = Path(measured).resolve()
            if not rel.is_relative_to(root.parent):
                continue
            module = str(rel.relative_to(root.parent))
            found.setdefault(module, {})
            for line, ctxs in (cov.contexts_by_lineno(measured) or {}).items():
                found[module].setdefault(line, set()).update(c or WHOLE for c in ctxs)
    if bad:
        print(f"coverage map: {len(bad)} unreadable data files, their lines are lost:", *bad, sep="\n  ")
    return {m: {line: sorted(ids) for line, ids in lines.items()} for m, lines in found.items()}


@cache
def _statements(path: Path, mtime: float) -> tuple[list, list]:
    """(statement line spans, spans that never run as traced code) of one source file."""
    source = path.read_text()
    tree = ast.parse(source)
    stmts: list[tuple[int, int, bool]] = []  # first line, last line, runs at import
    untraced: list[tuple[int, int]] = []

    def header_end(node: ast.stmt) -> int:
        bodies = [getattr(node, f, None) for f in ("body", "orelse", "finalbody", "handlers", "cases")]
        firsts = [b[0].lineno for b in bodies if isinstance(b, list) and b]
        return (min(firsts) - 1) if firsts else node.end_lineno

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                stmts.append((child.lineno, max(child.lineno, header_end(child)), not in_function))
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    for d in child.decorator_list:
                        stmts.append((d.lineno, d.end_lineno, not in_function))
                        name = d.func if isinstance(d, ast.Call) else d
                        name = name.attr if isinstance(name, ast.Attribute) else getattr(name, "id", "")
                        if "jit" in name or name in JIT:
                            untraced.append((child.lineno, child.end_lineno))
                inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                walk(child, inner)
            elif isinstance(child, ast.excepthandler | ast.match_case):
                walk(child, in_function)

    walk(tree, False)
    if "numba" in source:  # functions compiled by call (compile_functions(njit)) are untraced too
        untraced.append((1, len(source.splitlines()) + 1))
    return stmts, untraced


def lines_of(path: Path, first: int, last: int) -> tuple[set[int], bool]:
    """The lines whose execution runs a mutant spanning ``first..last`` (its statements'
    headers), and whether those run at import or untraced (then the whole slice judges)."""
    stmts, untraced = _statements(path, path.stat().st_mtime)
    if any(a <= first and last <= b for a, b in untraced):
        return set(), True
    # the innermost statement (header) holding the mutated code
    hit = [(b - a, a, b, imp) for a, b, imp in stmts if a <= last and first <= b]
    if not hit:
        return set(range(first, last + 1)), False
    _, a, b, imp = min(hit)
    return set(range(min(a, first), max(b, last) + 1)), imp


def tests_for(reach: dict, source: Path, module: str, first: int, last: int) -> list[str] | None:
    """The node ids reaching the mutated statement; ``None`` when the whole slice judges it."""
    lines, whole = lines_of(source, first, last)
    if whole:
        return None
    ids: set[str] = set()
    by_line = reach.get(module, {})
    for n in lines:
        ids.update(by_line.get(n, ()))
    return None if WHOLE in ids else sorted(ids)


def load(path: Path) -> dict:
    raw = json.loads(path.read_text())
    raw["reach"] = {m: {int(k): v for k, v in ls.items()} for m, ls in raw["reach"].items()}
    return raw
