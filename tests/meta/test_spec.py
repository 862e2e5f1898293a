"""conformance/SPEC.md and the suite cite each other: every ID cites existing clauses, every
clause is cited or says why not, and clause numbers never disappear (others link to them)."""

from __future__ import annotations

import importlib
import re

import pytest

from conftest import REPO

SPEC = REPO / "conformance" / "SPEC.md"
ANCHOR_RE = re.compile(r'^<a id="c([^"]*)"></a>\*\*([^*]*)\*\*', re.M)
SECTION_RE = re.compile(r"^## (\d+)\. ", re.M)
NUMBER_RE = re.compile(r"^\d+\.\d+$")

# Every clause number committed so far: numbers are appended, never removed or reused.
STABLE = {f"1.{n}" for n in range(1, 16)} | {f"2.{n}" for n in range(1, 7)}
STABLE |= {f"3.{n}" for n in range(1, 8)} | {f"4.{n}" for n in range(1, 9)}
STABLE |= {f"5.{n}" for n in range(1, 6)} | {f"6.{n}" for n in range(1, 5)}
STABLE |= {f"7.{n}" for n in range(1, 6)} | {f"8.{n}" for n in range(1, 5)}
STABLE |= {f"9.{n}" for n in range(1, 10)} | {f"10.{n}" for n in range(1, 7)}
STABLE |= {f"11.{n}" for n in range(1, 6)} | {f"12.{n}" for n in range(1, 5)}
STABLE |= {f"13.{n}" for n in range(1, 3)} | {f"14.{n}" for n in range(1, 21)}


def parse_spec(text: str) -> tuple[dict[str, str], list[str]]:
    """``({clause: body}, problems)`` of a SPEC.md text. A body runs to the next clause or heading."""
    problems: list[str] = []
    sections = [(m.start(), m.group(1)) for m in SECTION_RE.finditer(text)]
    clauses: dict[str, str] = {}
    matches = list(ANCHOR_RE.finditer(text))
    for i, m in enumerate(matches):
        anchor, number = m.group(1), m.group(2)
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        heading = re.search(r"^#", text[m.end() : end], re.M)
        body = text[m.end() : m.end() + heading.start() if heading else end]
        if anchor != number or not NUMBER_RE.match(number):
            problems.append(f"clause anchor c{anchor} does not match its number {number!r}")
            continue
        section = next((s for pos, s in reversed(sections) if pos < m.start()), None)
        if number.split(".")[0] != section:
            problems.append(f"clause {number} sits under section {section}")
        if number in clauses:
            problems.append(f"clause {number} is defined twice")
        clauses[number] = body
    return clauses, problems


def _exempt(body: str) -> bool:
    return "*Reserved:*" in body or "*Withdrawn*" in body


def _untested(body: str) -> str | None:
    m = re.search(r"\*Untested:\*([^\n]*)", body)
    return m.group(1).strip() if m else None


def mapping_problems(text: str, cited: dict[str, tuple[str, ...]]) -> list[str]:
    """Every way SPEC.md and the IDs' citations (``{ID: clauses}``) disagree."""
    clauses, problems = parse_spec(text)
    users: dict[str, list[str]] = {}
    for cid, cs in sorted(cited.items()):
        if not cs:
            problems.append(f"{cid} cites no clause (conformance_id(..., clause=...))")
        for c in cs:
            if c not in clauses:
                problems.append(f"{cid} cites clause {c!r}, which SPEC.md does not define")
            elif _exempt(clauses[c]):
                problems.append(f"{cid} cites clause {c}, which is reserved or withdrawn")
            users.setdefault(c, []).append(cid)
    for c, body in clauses.items():
        if _exempt(body):
            continue
        why = _untested(body)
        if c in users and why is not None:
            problems.append(
                f"clause {c} is cited by {', '.join(users[c])} yet marked untested: "
                f"delete its *Untested:* line"
            )
        elif c not in users and why is None:
            problems.append(f"clause {c} has no conformance ID and no '*Untested:* reason'")
        elif c not in users and not why:
            problems.append(f"clause {c} is marked untested without a reason")
    return problems


def suite_citations() -> dict[str, tuple[str, ...]]:
    """``{ID: clauses}`` of every test in the suite's modules, read from their markers."""
    cited: dict[str, tuple[str, ...]] = {}
    for path in sorted((REPO / "conformance").rglob("test_*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        mod = importlib.import_module(name)
        for obj in vars(mod).values():
            for mark in getattr(obj, "pytestmark", []):
                if mark.name == "conformance_id":
                    cited[mark.args[0]] = tuple(mark.kwargs.get("clause", ()))
    return cited


def test_suite_and_spec_cite_each_other():
    cited = suite_citations()
    assert len(cited) >= 50, f"found only {len(cited)} conformance IDs: is the scan broken?"
    problems = mapping_problems(SPEC.read_text(encoding="utf-8"), cited)
    assert not problems, "\n".join(problems)


def test_clause_numbers_are_stable():
    clauses, problems = parse_spec(SPEC.read_text(encoding="utf-8"))
    assert not problems, problems
    gone = sorted(STABLE - set(clauses), key=lambda c: tuple(map(int, c.split("."))))
    assert not gone, f"clauses removed or renumbered (others link to them): {gone}"


SAMPLE = """\
## 1. Things

<a id="c1.1"></a>**1.1** A thing must work.

<a id="c1.2"></a>**1.2** Another must too.
*Untested:* no test yet.

<a id="c1.3"></a>**1.3** A third.
*Untested:*

## 2. Later

<a id="c2.1"></a>**2.1** *Reserved:* for later.

<a id="c1.9"></a>**2.2** A mislabelled anchor.
"""


@pytest.mark.parametrize(
    "cited, expected",
    [
        ({"A-B-001": ("1.1",)}, "clause 1.3 is marked untested without a reason"),
        ({"A-B-001": ()}, "A-B-001 cites no clause"),
        ({"A-B-001": ("1.1", "7.7")}, "A-B-001 cites clause '7.7', which SPEC.md does not define"),
        ({"A-B-001": ("1.1", "1.2")}, "clause 1.2 is cited by A-B-001 yet marked untested"),
        ({"A-B-001": ("2.1",)}, "A-B-001 cites clause 2.1, which is reserved or withdrawn"),
        ({"A-B-001": ("1.2",)}, "clause 1.1 has no conformance ID and no '*Untested:* reason'"),
        ({}, "clause anchor c1.9 does not match its number '2.2'"),
    ],
)
def test_mapping_check_catches(cited, expected):
    problems = mapping_problems(SAMPLE, cited)
    assert any(expected in p for p in problems), problems


def test_clause_in_the_wrong_section_is_caught():
    text = '## 1. One\n\n<a id="c2.1"></a>**2.1** Misplaced.\n'
    assert parse_spec(text)[1] == ["clause 2.1 sits under section 1"]


def test_clause_body_ends_at_the_next_heading():
    text = '## 1. One\n\n<a id="c1.1"></a>**1.1** Tested.\n\n## 2. Two\n\n*Untested:* not 1.1\n'
    assert _untested(parse_spec(text)[0]["1.1"]) is None


# ----------------------------------------------------------------------- clause -> file
# One test module per SPEC.md section: an ID lives in ``test_sNN_<topic>.py`` where NN is the
# section of the first clause it cites (its home), so a clause number leads to its file. The
# state machines cite the clauses of many sections and live in MACHINE_MODULES.
MODULE_RE = re.compile(r"^test_s(\d\d)_\w+\.py$")
MACHINE_MODULES = {"test_machines.py"}
# Clauses that no test of their own section's file cites, and where their tests are instead.
CITED_ELSEWHERE = {
    "1.7": "the machines (every removal path) and STORE-ACCT-004 (section 3's removals)",
    "3.8": "STORE-VALUE-003 (section 2: the values it accounts come back exactly)",
    "6.5": "the machines (unspill under every sequence of operations)",
    "9.2": "the machines and STORE-KEY-002 (section 1: keys that are paths)",
    "13.5": "the machines (values in use while the store moves them)",
}


def suite_homes() -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{ID: (module file name, clauses)}`` of every test in the suite's modules."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for path in sorted((REPO / "conformance").rglob("test_*.py")):
        mod = importlib.import_module(".".join(path.relative_to(REPO).with_suffix("").parts))
        for obj in vars(mod).values():
            for mark in getattr(obj, "pytestmark", []):
                if mark.name == "conformance_id":
                    out[mark.args[0]] = (path.name, tuple(mark.kwargs.get("clause", ())))
    return out


def file_problems(homes: dict[str, tuple[str, tuple[str, ...]]], elsewhere: dict) -> list[str]:
    """Every way the suite's files and the IDs' home sections disagree, both ways: an ID in
    another section's file, a module not named after a section, a cited clause with no
    test in its section's file (unless ``elsewhere`` says where its tests are)."""
    problems = []
    by_clause: dict[str, set[str]] = {}
    for cid, (name, clauses) in sorted(homes.items()):
        for c in clauses:
            by_clause.setdefault(c, set()).add(name)
        if name in MACHINE_MODULES or not clauses:
            continue
        m = MODULE_RE.match(name)
        home = int(clauses[0].split(".")[0])
        if m is None:
            problems.append(f"{cid} lives in {name}, not a test_sNN_<topic>.py module")
        elif int(m.group(1)) != home:
            problems.append(
                f"{cid} lives in {name}, yet its first clause {clauses[0]} is section {home}: "
                f"move it to test_s{home:02d}_*.py (or cite its home clause first)"
            )
    for c, names in sorted(by_clause.items()):
        section = f"test_s{int(c.split('.')[0]):02d}_"
        if c in elsewhere:
            if any(n.startswith(section) for n in names):
                problems.append(f"clause {c} is tested in {section}*.py: drop it from CITED_ELSEWHERE")
        elif not any(n.startswith(section) for n in names):
            problems.append(f"clause {c} has no test in {section}*.py (only in {sorted(names)})")
    return problems


def test_every_clause_leads_to_its_file():
    homes = suite_homes()
    assert len(homes) >= 100, f"found only {len(homes)} IDs: is the scan broken?"
    problems = file_problems(homes, CITED_ELSEWHERE)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "homes, expected",
    [
        ({"A-1": ("test_s04_limits.py", ("5.1",))}, "its first clause 5.1 is section 5"),
        ({"A-1": ("test_limits.py", ("4.1",))}, "not a test_sNN_<topic>.py module"),
        (
            {"A-1": ("test_s04_limits.py", ("4.1", "9.9"))},
            "clause 9.9 has no test in test_s09_*.py",
        ),
        ({"A-1": ("test_s01_x.py", ("1.7",))}, "drop it from CITED_ELSEWHERE"),
        ({"A-1": ("test_machines.py", ("4.1",))}, "clause 4.1 has no test in test_s04_*.py"),
    ],
)
def test_file_check_catches(homes, expected):
    problems = file_problems(homes, {"1.7": "the machines"})
    assert any(expected in p for p in problems), problems
