"""The score per module, and the survivors against the committed triage.

A survivor is a mutant the conformance suite passed. Each is triaged in
``docs/mutation-triage.toml`` (matched by what the mutation is, not its position, so entries
survive edits elsewhere in the file) as ``property`` (a new SPEC clause and a test citing it
kill it now), ``equivalent`` (no implementation could show the difference: say why),
``accepted`` (the reason) or ``rejudged`` (a survivor of a narrow ``--ids`` run that its
group's whole slice kills: ``rejudge.py``, naming the failing test). The score leaves
equivalent mutants out; it counts a rejudged one as the run judged it.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome
from plan import is_timeout, rank, session_path
from targets import GROUPS

CLASSES = ("property", "equivalent", "accepted", "rejudged")


# Modules renamed since mutants were triaged (issue 28: names that say what they hold). A
# signature uses the former path, so the triage of a line that did not change still matches.
FORMERLY = {
    "reference_impl/store/recency.py": "reference_impl/store/lru.py",
    "reference_impl/store/mover.py": "reference_impl/store/tiers.py",
    "reference_impl/store/index.py": "reference_impl/store/groups.py",
    "reference_impl/store/records.py": "reference_impl/store/units.py",
    "reference_impl/store/tracker.py": "reference_impl/store/tracking.py",
    "reference_impl/store/comms.py": "reference_impl/store/dask_hooks.py",
    "reference_impl/table/frames.py": "reference_impl/table/serial.py",
    "reference_impl/table/comms.py": "reference_impl/table/dask_hooks.py",
}


def signature(module: str, operator: str, definition: str | None, diff: str) -> str:
    """What a mutant is, independent of where the file's lines sit (or what the file is
    called now: :data:`FORMERLY`)."""
    module = FORMERLY.get(module, module)
    changed = [
        line[1:].strip()
        for line in (diff or "").splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    what = "|".join([module, operator, definition or "", *changed])
    return hashlib.sha1(what.encode()).hexdigest()[:12]


@dataclass
class Survivor:
    module: str
    job_id: str
    sig: str
    line: int
    operator: str
    definition: str | None
    diff: str
    output: str
    triage: dict | None = None


@dataclass
class Stratum:
    """Mutants of one kind of reach: counted, run, killed, equivalent."""

    total: int = 0
    run: int = 0
    killed: int = 0
    equivalent: int = 0

    def __iadd__(self, other: Stratum) -> Stratum:
        self.total += other.total
        self.run += other.run
        self.killed += other.killed
        self.equivalent += other.equivalent
        return self


@dataclass
class ModuleScore:
    module: str
    group: str
    total: int = 0
    killed: int = 0
    survived: int = 0
    errors: int = 0
    equivalent: int = 0
    timeouts: int = 0  # kills by timeout: counted as kills, shown apart
    beyond: int = 0  # results past the first unjudged mutant of the seeded order: not scored
    survivors: list[Survivor] = field(default_factory=list)
    late_survivors: list[Survivor] = field(default_factory=list)  # past the prefix
    strata: dict[str, Stratum] = field(default_factory=dict)

    @property
    def run(self) -> int:
        return self.killed + self.survived

    @property
    def judged(self) -> int:
        return self.run - self.equivalent


def load_triage(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    entries = tomllib.loads(path.read_text()).get("mutant", [])
    out = {}
    for e in entries:
        if e.get("class") not in CLASSES:
            raise ValueError(f"{path}: mutant {e.get('sig')!r} has class {e.get('class')!r}, not one of {CLASSES}")
        if not e.get("reason"):
            raise ValueError(f"{path}: mutant {e.get('sig')!r} gives no reason")
        out[e["sig"]] = e
    return out


def score(sessions: Path, triage: dict[str, dict], stratum_of=None, seed: int = 0) -> list[ModuleScore]:
    """Per-module counts over the completed prefix of the seeded order (``seed`` as the run
    used): the prefix is a uniform sample of the module, where all completed results are not
    (kills carried from an earlier commit, or ``--only-unreached``, fill it unevenly). Results
    past the prefix are counted in ``beyond``, and their survivors listed, not scored. ``stratum_of(module, spec) -> name``
    splits the counts by reach."""
    scores = []
    for group in GROUPS:
        for module in group.modules:
            path = session_path(sessions, module)
            if not path.exists():
                continue
            s = ModuleScore(module, group.name)
            with use_db(str(path), WorkDB.Mode.open) as db:
                items = sorted(db.work_items, key=lambda i: rank(i.job_id, seed))
                results = {item.job_id: result for item, result in db.completed_work_items}
            s.total = len(items)
            late = ModuleScore(module, group.name)  # past the prefix: survivors still listed
            in_prefix = True
            for item in items:
                if stratum_of is not None:
                    s.strata.setdefault(stratum_of(module, item.mutations[0]), Stratum()).total += 1
                result = results.get(item.job_id)
                in_prefix = in_prefix and result is not None
                if result is None:
                    continue
                if in_prefix:
                    _count(s, module, item, result, triage, stratum_of)
                else:
                    _count(late, module, item, result, triage, None)
            s.beyond = late.run + late.errors
            s.late_survivors = late.survivors
            scores.append(s)
    return scores


def _count(s: ModuleScore, module: str, item, result, triage: dict, stratum_of) -> None:
    spec = item.mutations[0]
    st = s.strata.get(stratum_of(module, spec)) if stratum_of else None
    normal = result.worker_outcome == WorkerOutcome.NORMAL
    if normal and result.test_outcome == TestOutcome.KILLED:
        s.killed += 1
        s.timeouts += is_timeout(result.output)
        if st:
            st.run += 1
            st.killed += 1
    elif normal and result.test_outcome == TestOutcome.SURVIVED:
        sig = signature(module, spec.operator_name, spec.definition_name, result.diff)
        entry = triage.get(sig)
        s.survived += 1
        if st:
            st.run += 1
        if entry and entry["class"] == "equivalent":
            s.equivalent += 1
            if st:
                st.equivalent += 1
        s.survivors.append(
            Survivor(module, item.job_id, sig, spec.start_pos[0], spec.operator_name,
                     spec.definition_name, result.diff or "", result.output or "", entry)
        )  # fmt: skip
    else:
        s.errors += 1


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% interval of a proportion from a sample (a budgeted run is a uniform sample)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}%" if n else "n/a"


def markdown(scores: list[ModuleScore], *, commit: str, date: str, command: str, machine: str) -> str:
    lines = [
        "# Mutation score of the reference, judged by the conformance suite",
        "",
        f"- **Date:** {date}  **Commit:** `{commit}`  **Machine:** {machine}",
        f"- **Command:** `{command}`",
        "- **Tool:** cosmic-ray (mutants as sqlite sessions under `.mutation/`); runner `ci/mutation/`;",
        "  triage in [`mutation-triage.toml`](mutation-triage.toml). Only `pytest conformance`",
        "  judges, through each group's adapters (`ci/mutation/targets.py`, or the command's",
        "  `--impl`); `tests/` does not count.",
        "- **Score** = killed / (run - equivalent), over each module's completed prefix of the seeded",
        "  order: a uniform random sample where a module ran only part of its mutants, with Wilson's",
        "  95% interval. Results past the first unjudged mutant (carried kills, `--only-unreached`)",
        "  are shown, not scored.",
        "",
    ]
    for group in GROUPS:
        rows = [s for s in scores if s.group == group.name]
        if not rows:
            continue
        k = sum(s.killed for s in rows)
        j = sum(s.judged for s in rows)
        lo, hi = wilson(k, j)
        lines += [
            f"## {group.name}: {_pct(k, j)} of non-equivalent mutants killed (95% {100*lo:.0f}-{100*hi:.0f}%)",
            "",
            "| module | mutants | run | killed | of which by timeout | survived | equivalent | untriaged | errors | score | judged past the prefix |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in rows:
            untriaged = sum(1 for v in s.survivors if v.triage is None)
            lines.append(
                f"| `{s.module}` | {s.total} | {s.run} | {s.killed} | {s.timeouts} | {s.survived} | {s.equivalent} "
                f"| {untriaged} | {s.errors} | {_pct(s.killed, s.judged)} | {s.beyond} |"
            )
        lines.append("")
        strata: dict[str, Stratum] = {}
        for s in rows:
            for name, st in s.strata.items():
                acc = strata.setdefault(name, Stratum())
                acc += st  # in place: the dict's entry grows
        if strata:
            lines += ["| stratum | mutants | run | killed | equivalent | score |", "|---|---:|---:|---:|---:|---:|"]
            est = 0.0
            for name, st in sorted(strata.items()):
                judged = st.run - st.equivalent
                lines.append(f"| {name} | {st.total} | {st.run} | {st.killed} | {st.equivalent} | {_pct(st.killed, judged)} |")
                est += st.total * (st.killed / judged if judged else 0.0)
            total = sum(st.total for st in strata.values())
            lines += ["", f"Stratified estimate (each stratum's rate weighted by its size; an unrun stratum counts 0): **{100 * est / total:.1f}%**.", ""]
    classes = {c: 0 for c in CLASSES}
    untriaged = 0
    for s in scores:
        for v in s.survivors:
            if v.triage:
                classes[v.triage["class"]] += 1
            else:
                untriaged += 1
    lines += [
        "## Survivors by triage class",
        "",
        ", ".join(f"{c}: {n}" for c, n in classes.items()) + f", untriaged: {untriaged}",
        "",
    ]
    return "\n".join(lines)


def survivors_markdown(scores: list[ModuleScore]) -> str:
    out = ["# Untriaged survivors", ""]
    for s in scores:
        for v in s.survivors + s.late_survivors:
            if v.triage is None:
                out += [
                    f"## `{v.sig}` {v.module}:{v.line} {v.operator} in `{v.definition}`",
                    "",
                    "```diff",
                    v.diff.strip(),
                    "```",
                    "",
                ]
    return "\n".join(out)
