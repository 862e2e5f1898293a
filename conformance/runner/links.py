"""Where a repository-relative link (``conformance/SPEC.md#c9.7``,
``docs/findings/zict.md#...``) lives in this copy of the suite: the checkout, or an
installed wheel, which ships ``docs/findings/*.md`` as ``conformance/findings/``
(pyproject.toml), so that reports and manifests link to files that exist either way."""

from __future__ import annotations

import os
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the conformance package
# The folder holding the package: the repository root, or site-packages when installed.
ROOT = PACKAGE_DIR.parent
FINDINGS = "docs/findings/"
SHIPPED_FINDINGS = PACKAGE_DIR / "findings"
# Repository paths the suite ships (and so can check wherever it runs).
SHIPPED_PREFIXES = ("conformance/", FINDINGS)
URL_RE = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def is_url(link: str) -> bool:
    return bool(URL_RE.match(link))


def is_shipped(link: str) -> bool:
    """A link into the files the wheel ships (SPEC.md, the README, the findings)."""
    return not is_url(link) and link.startswith(SHIPPED_PREFIXES)


# The repository's own top-level folders: a relative link starting with one of them that
# exists here (or into the findings) names a file of this suite, and is checked.
OWN_FOLDERS = ("conformance", "reference_impl", "stress", "docs", "benchmarks", "tests", "ci")


def into_repository(link: str) -> bool:
    """Whether ``link`` points into this suite's repository (so it can be checked here):
    not a URL, and under one of its folders that this copy holds, or into the findings.
    A path elsewhere (a user's own ``notes/our-store.md``) is not judged."""
    if is_url(link):
        return False
    first = link.partition("#")[0].split("/")[0]
    return link.startswith(FINDINGS) or (first in OWN_FOLDERS and (ROOT / first).is_dir())


def locate(path: str) -> Path | None:
    """The file a repository-relative ``path`` (no anchor) names here, or None."""
    here = ROOT / path
    if here.is_file():
        return here
    if path.startswith(FINDINGS):
        shipped = SHIPPED_FINDINGS / path.removeprefix(FINDINGS)
        if shipped.is_file():
            return shipped
    return None


def for_reader(link: str, base: Path | str | None, within: bool = False) -> str:
    """``link`` as a reader in folder ``base`` can follow it: a path relative to ``base``
    (``within``: only when the file lies under ``base``, else its absolute path, as a
    terminal in a user's folder wants). URLs, links to no file here and ``base=None``
    are returned unchanged."""
    if base is None or is_url(link):
        return link
    path, sep, anchor = link.partition("#")
    target = locate(path) if path else None
    if target is None:
        return link
    base = Path(base).resolve()
    if within and base not in target.parents:
        return target.as_posix() + sep + anchor
    return Path(os.path.relpath(target, base)).as_posix() + sep + anchor
