"""'Did you mean' for a mistyped name: one place so every usage error words it the same."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'a' or 'b'?"`` naming the nearest choices, or ``""`` when none is
    near (difflib's ratio >= 0.6)."""
    near = difflib.get_close_matches(word, sorted(set(choices)), n=n, cutoff=0.6)
    if not near:
        return ""
    quoted = [repr(c) for c in near]
    names = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {names}?"
