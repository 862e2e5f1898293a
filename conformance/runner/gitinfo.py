"""The checkout's commit, for the reports that record which code they judged or measured.

One lookup for the conformance report, ``ci/gpu_check`` and ``ci/mutation``: ``git`` run in
the project's checkout (``REPO``, the folder above the conformance package) or in ``cwd``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def git(*args: str, cwd: str | Path = REPO) -> str | None:
    """``git ARGS`` in ``cwd``: its stripped output, or None where git is missing or fails."""
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip()


def commit(rev: str = "HEAD", *, short: bool = False, cwd: str | Path = REPO) -> str | None:
    """The full (or ``short``) hash ``rev`` names, or None where it names none."""
    return git("rev-parse", *(["--short"] if short else []), "--verify", "--quiet",
               f"{rev}^{{commit}}", cwd=cwd) or None  # fmt: skip


def modified(cwd: str | Path = REPO) -> bool:
    """Whether tracked files differ from the commit checked out (untracked files do not count)."""
    return bool(git("status", "--porcelain", "--untracked-files=no", cwd=cwd))


def checkout(cwd: str | Path = REPO) -> tuple[str | None, bool]:
    """``(full hash, modified)`` of the checkout ``cwd`` is the top of; ``(None, False)`` when
    ``cwd`` is not the top of a git checkout (e.g. the project installed, not checked out)."""
    top = git("rev-parse", "--show-toplevel", cwd=cwd)
    if not top or Path(top).resolve() != Path(cwd).resolve():
        return None, False
    return commit(cwd=cwd), modified(cwd)


def describe(cwd: str | Path = REPO) -> str:
    """``abc1234``, ``abc1234 (modified)``, or ``unknown``: one line for a report's header."""
    sha = commit(short=True, cwd=cwd)
    if sha is None:
        return "unknown"
    return sha + (" (modified)" if modified(cwd) else "")
