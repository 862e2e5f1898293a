"""Mutants as cosmic-ray sessions: one sqlite work-db per module, with stable job ids.

cosmic-ray's own ``init`` gives every mutant a random uuid; ours hash what the mutant is
(module, operator, occurrence, position), so a triage entry keeps naming the same mutant
across runs of one commit and a killed run resumes where it stopped.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from pathlib import Path

import cosmic_ray.plugins
from cosmic_ray.ast import ast_nodes, get_ast_from_path
from cosmic_ray.ast.ast_query import ASTQuery
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec, WorkItem
from targets import keep_operator


def session_path(sessions: Path, module: str) -> Path:
    return sessions / (module.replace("/", "__").removesuffix(".py") + ".sqlite")


def rank(job_id: str, seed: int) -> str:
    """A mutant's place in the seeded order: runs follow it, and scores count its completed
    prefix, so that a run cut short is a uniform sample of its module."""
    return hashlib.sha1(f"{seed}:{job_id}".encode()).hexdigest()


def job_id(spec: MutationSpec) -> str:
    what = f"{spec.module_path}|{spec.operator_name}|{spec.occurrence}|{spec.start_pos}"
    return hashlib.sha1(what.encode()).hexdigest()[:16]


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the type annotations are: under ``from __future__ import annotations`` they are
    never evaluated, so a mutant there (``X | None`` to ``X & None``) is equivalent by
    construction and is not generated."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        notes = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            notes.append(node.returns)
        elif isinstance(node, ast.arg | ast.AnnAssign):
            notes.append(node.annotation)
        for n in notes:
            if n is not None:
                spans.append(((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)))
    return spans


def _inside(pos: tuple[int, int], spans) -> bool:
    return any(start <= tuple(pos) < end for start, end in spans)


def mutants(module: str, root: Path) -> Iterator[WorkItem]:
    """Every mutant of ``module`` (a path relative to ``root``) under the operator policy."""
    source = (root / module).read_text()
    skip = annotation_spans(source) if "from __future__ import annotations" in source else []
    tree = get_ast_from_path(root / module)
    for name in cosmic_ray.plugins.operator_names():
        if not keep_operator(name):
            continue
        operator = cosmic_ray.plugins.get_operator(name)()
        positions = (
            (node, start, end) for node in ast_nodes(tree) for start, end in operator.mutation_positions(node)
        )
        for occurrence, (node, start, end) in enumerate(positions):
            if _inside(start, skip):
                continue
            spec = MutationSpec(
                module_path=module,
                operator_name=name,
                occurrence=occurrence,
                start_pos=start,
                end_pos=end,
                definition_name=ASTQuery(node).get_definition_name(),
            )
            yield WorkItem.single(job_id(spec), spec)


def init_session(module: str, root: Path, sessions: Path) -> int:
    """(Re)create the session of ``module``; returns its number of mutants."""
    sessions.mkdir(parents=True, exist_ok=True)
    path = session_path(sessions, module)
    path.unlink(missing_ok=True)
    items = list(mutants(module, root))
    with use_db(str(path), WorkDB.Mode.create) as db:
        db.add_work_items(items)
    return len(items)


def is_timeout(output: str | None) -> bool:
    """Whether a kill was by a timeout: the whole run's (cosmic-ray's ``"timeout"``) or one
    test's (pytest-timeout's banner, kept with the log so the report can name the test)."""
    return output == "timeout" or (output or "").startswith("timeout:")
