"""Expected-failure manifests: one TOML file per implementation, keyed by conformance ID.

    [STORE-MAP-004]
    mode = "xfail"          # or "xfail-norun" or "skip"
    reason = "zict.File only accepts str keys"
    link = "docs/findings/zict.md#store-map-004"

An optional top-level ``impl = "name"`` says which implementation the file is for.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

MODES = ("xfail", "xfail-norun", "skip")
ID_RE = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*-\d{3}$")
EXPECTED_DIR = Path(__file__).parent / "expected"


class ManifestError(Exception):
    pass


@dataclass(frozen=True)
class Entry:
    cid: str
    mode: str
    reason: str
    link: str
    source: str


def load(path: str | Path) -> tuple[str | None, dict[str, Entry]]:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"manifest {path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"manifest {path}: invalid TOML: {exc}") from None
    impl = data.pop("impl", None)
    if impl is not None and not isinstance(impl, str):
        raise ManifestError(f"manifest {path}: 'impl' must be a string")
    entries: dict[str, Entry] = {}
    problems = []
    for cid, body in data.items():
        where = f"manifest {path}: [{cid}]"
        if not ID_RE.match(cid):
            problems.append(f"{where}: not a conformance ID")
            continue
        if not isinstance(body, dict):
            problems.append(f"{where}: must be a table")
            continue
        unknown = set(body) - {"mode", "reason", "link"}
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        mode = body.get("mode")
        if mode not in MODES:
            problems.append(f"{where}: mode must be one of {', '.join(MODES)}, got {mode!r}")
        for key in ("reason", "link"):
            if not isinstance(body.get(key), str) or not body.get(key).strip():
                problems.append(f"{where}: '{key}' is required (a non-empty string)")
        if not problems:
            entries[cid] = Entry(cid, mode, body["reason"], body["link"], str(path))
    if problems:
        raise ManifestError("\n".join(problems))
    return impl, entries


def default_path(impl_name: str) -> Path:
    return EXPECTED_DIR / f"{impl_name}.toml"
