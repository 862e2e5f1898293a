"""The suite's house stays small: no conformance module over 400 lines, no function over 60.

What is over is listed in OVER with its size as a ceiling it may not pass; an entry goes when
its module or function is split, and a stale entry fails too. Since issue 47 nothing is over."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

MAX_MODULE = 400
MAX_FUNCTION = 60
# path (under conformance/) -> lines; "path:function" -> lines
OVER: dict[str, int] = {}


def sizes(root: Path) -> dict[str, int]:
    """``{path: lines}`` of every module under ``root`` and ``{path:function: lines}`` of
    every function (decorators not counted)."""
    out: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        out[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{rel}:{node.name}"
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def size_problems(measured: dict[str, int], over: dict[str, int]) -> list[str]:
    problems = []
    for key, n in sorted(measured.items()):
        limit = MAX_FUNCTION if ":" in key else MAX_MODULE
        ceiling = over.get(key, limit)
        if n > ceiling:
            listed = f", listed at {ceiling}" if key in over else ""
            problems.append(f"{key}: {n} lines (limit {limit}{listed})")
    for key in sorted(over):
        limit = MAX_FUNCTION if ":" in key else MAX_MODULE
        if measured.get(key, 0) <= limit:
            problems.append(f"{key} is within {limit} lines now: drop it from OVER")
    return problems


def test_no_module_or_function_grows_past_its_limit():
    measured = sizes(REPO / "conformance")
    assert len(measured) > 100, "the walker found too little"
    problems = size_problems(measured, OVER)
    assert not problems, "\n".join(problems)


def test_the_size_check_can_fail():
    measured = {"a.py": 401, "b.py": 10, "b.py:f": 61, "c.py": 500}
    problems = size_problems(measured, {"c.py": 450, "b.py": 300})
    assert problems == [
        "a.py: 401 lines (limit 400)",
        "b.py:f: 61 lines (limit 60)",
        "c.py: 500 lines (limit 400, listed at 450)",
        "b.py is within 400 lines now: drop it from OVER",
    ], problems


def top(n: int = 10) -> list[tuple[int, str]]:
    """The ``n`` largest modules and functions (for the closing note)."""
    measured = sizes(REPO / "conformance")
    return sorted(((v, k) for k, v in measured.items()), reverse=True)[:n]
