"""Expected-failure manifests: one TOML file per implementation, keyed by conformance ID.

    [STORE-MAP-004]
    mode = "xfail"          # or "xfail-norun", "skip", "flaky"
    reason = "zict.File only accepts str keys"
    link = "docs/findings/zict.md#store-map-004"

``xfail`` is strict: a pass fails the run. An ``xfail`` entry may also name, in
``matches``, every documented deviation that can end the test, each with a regular
expression its failure must match; a failure that matches none of them fails the run,
so a generative machine whose first failure moves stays honest:

    [STORE-STATE-001]
    mode = "xfail"
    reason = "ends on one of the documented deviations below"
    link = "docs/findings/zict.md#store-state-001"
    matches = { STORE-KEY-002 = "File name too long", STORE-MAP-004 = "quote_from_bytes" }

Each key of ``matches`` must be another entry of the same manifest (so the deviation is
documented there), and every leaf of the failure (each exception of an ExceptionGroup,
with its chained causes; never its notes, which hold the drawn program) must match one of
the patterns (``re.search``). Such an entry is not strict: a machine whose draws miss
every named deviation may pass (XPASS), since each named deviation keeps its own strict
entry, which is what notices a fix. ``flaky`` (for races that really are
intermittent) runs the test ``runs`` times (default 3) in one item, never fails
the run and records how often it failed. ``link`` is optional; a link into this
repository (``docs/findings/*.md``, ``conformance/SPEC.md``) must name an existing file
and a heading of it (GitHub-style anchor), in a checkout or an installed wheel, which
ships them (``links.locate``); a URL or a path of the user's own is not judged. An
optional top-level ``impl = "name"`` says which implementation the file is for.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .links import into_repository, locate

MODES = ("xfail", "xfail-norun", "skip", "flaky")
DEFAULT_FLAKY_RUNS = 3
ID_RE = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*-\d{3}$")
EXPECTED_DIR = Path(__file__).parent.parent / "expected"


class ManifestError(Exception):
    pass


@dataclass(frozen=True)
class Entry:
    cid: str
    mode: str
    reason: str
    link: str | None  # optional: a URL, or a path checked when it points into the repository
    source: str
    runs: int = 1
    matches: tuple[tuple[str, str], ...] = ()  # (documented deviation's ID, regex)


class DocumentedDeviation(Exception):
    """Raised from a failure that matched one of its entry's ``matches``: the only
    exception the entry's xfail accepts (``raises=``), so any other failure fails the run."""


def leaf_chains(exc: BaseException) -> list[list[BaseException]]:
    """One chain per leaf failure: every exception of an ExceptionGroup (hypothesis reports
    distinct bugs so), each followed by its chained causes and contexts."""
    if isinstance(exc, BaseExceptionGroup):
        return [c for sub in exc.exceptions for c in leaf_chains(sub)]
    chain, seen, cur = [], set(), exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        chain.append(cur)
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return [chain]


def failure_texts(exc: BaseException) -> list[str]:
    """One text per leaf failure (:func:`leaf_chains`); notes are left out."""
    return ["\n".join(_label(e) for e in chain) for chain in leaf_chains(exc)]


def _label(exc: BaseException) -> str:
    text = str(exc)  # never format_exception_only: it appends the notes
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def unmatched_failures(exc: BaseException, matches: tuple[tuple[str, str], ...]) -> list[str]:
    """The leaf failures of ``exc`` that no pattern of ``matches`` finds (empty: documented)."""
    return [t for t in failure_texts(exc) if not any(re.search(rx, t) for _, rx in matches)]


def matched_deviations(exc: BaseException, matches: tuple[tuple[str, str], ...]) -> list[str]:
    """The IDs of ``matches`` whose pattern finds at least one leaf failure of ``exc``."""
    texts = failure_texts(exc)
    return [dev for dev, rx in matches if any(re.search(rx, t) for t in texts)]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading (lower case, punctuation dropped, ' ' -> '-')."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # [text](url) -> text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def markdown_anchors(text: str) -> set[str]:
    """Every anchor a Markdown file offers: heading slugs (with GitHub's -1, -2 suffixes for
    repeats) and explicit ``<a id=...>``/``<a name=...>`` targets."""
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not in_fence:
            slug = github_slug(m.group(1))
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    anchors.update(re.findall(r"<a\s+(?:id|name)=[\"']([^\"']+)[\"']", text))
    return anchors


def check_link(link: str) -> str | None:
    """Why a link into this suite's repository (``docs/findings/<file>.md#anchor``,
    ``conformance/SPEC.md#c9.6``) does not resolve in this copy of the suite (checkout or
    installed: ``links.locate``), or None when it does or points elsewhere (a URL, a path
    of the user's own)."""
    link = link.strip()
    if not into_repository(link):
        return None
    path, _, anchor = link.partition("#")
    target = locate(path)
    if target is None:
        return f"link {link!r}: no such file {path}"
    text = target.read_text(encoding="utf-8") if target.suffix == ".md" else None
    if anchor and text is not None and anchor not in markdown_anchors(text):
        return f"link {link!r}: no heading in {path} has the anchor #{anchor}"
    return None


def load(path: str | Path) -> tuple[str | None, dict[str, Entry]]:
    """Parse and validate one manifest; every problem is collected into one ManifestError."""
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
    problems: list[str] = []
    for cid, body in data.items():
        where = f"manifest {path}: [{cid}]"
        if not ID_RE.match(cid):
            problems.append(f"{where}: not a conformance ID")
            continue
        if not isinstance(body, dict):
            problems.append(f"{where}: must be a table")
            continue
        before = len(problems)
        unknown = set(body) - {"mode", "reason", "link", "runs", "matches"}
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        mode = body.get("mode")
        if mode not in MODES:
            problems.append(f"{where}: mode must be one of {', '.join(MODES)}, got {mode!r}")
        runs = body.get("runs", DEFAULT_FLAKY_RUNS if mode == "flaky" else 1)
        if "runs" in body and mode != "flaky":
            problems.append(f"{where}: 'runs' applies only to mode = \"flaky\"")
        elif isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            problems.append(f"{where}: 'runs' must be a positive integer, got {runs!r}")
        if not isinstance(body.get("reason"), str) or not body.get("reason").strip():
            problems.append(f"{where}: 'reason' is required (a non-empty string)")
        link = body.get("link")
        if link is not None and (not isinstance(link, str) or not link.strip()):
            problems.append(f"{where}: 'link' must be a non-empty string when given")
        matches = _matches(cid, body, data, where, problems)
        if len(problems) == before and link is not None:
            broken = check_link(link)
            if broken:
                problems.append(f"{where}: {broken}")
        if len(problems) == before:
            entries[cid] = Entry(cid, mode, body["reason"], link, str(path), runs, matches)
    if problems:
        raise ManifestError("\n".join(problems))
    return impl, entries


def _matches(cid: str, body: dict, data: dict, where: str, problems: list[str]):
    """Validate an entry's ``matches`` table: xfail only, keys are other entries of this
    manifest, values are regular expressions."""
    if "matches" not in body:
        return ()
    raw = body["matches"]
    if body.get("mode") != "xfail":
        problems.append(f"{where}: 'matches' applies only to mode = \"xfail\"")
        return ()
    if not isinstance(raw, dict) or not raw:
        problems.append(f"{where}: 'matches' must be a non-empty table of ID = regex")
        return ()
    out = []
    for dev, rx in raw.items():
        if dev == cid or dev not in data:
            problems.append(
                f"{where}: matches names {dev!r}, which is not another entry of this manifest "
                "(a deviation must be documented before it may end a test)"
            )
            continue
        if not isinstance(rx, str) or not rx.strip():
            problems.append(f"{where}: matches[{dev}] must be a non-empty string")
            continue
        try:
            re.compile(rx)
        except re.error as exc:
            problems.append(f"{where}: matches[{dev}] is not a regular expression: {exc}")
            continue
        out.append((dev, rx))
    return tuple(out)


def default_path(impl_name: str) -> Path:
    return EXPECTED_DIR / f"{impl_name}.toml"
