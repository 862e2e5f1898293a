"""Read the junit files of N runs of the same tests: which tests ever failed, how often, how.

``python ci/flake_report.py RUN.xml... [--known FILE] [--json OUT]``. A test is listed when
it failed or errored in some run, or passed only on a rerun (a ``passed_on_rerun`` or
``conformance_flaky`` property with failures in its junit entry). Each line gives its
failure rate over the runs that ran it and its first failure's message. Exit status 1 when
a listed test is not in ``--known`` (one test id a line, ``#`` comments): a new flake, or a
test that fails every time (also listed, rate N/N). Environment failures (a nanny that never
restarted a killed worker) are named as such by ``ENVIRONMENT`` patterns and never count.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

# What the machine did, not an implementation: a nanny that never brought a killed worker
# back (distributed, about 1 in 40 kills), a port the OS gave to someone else.
ENVIRONMENT = (
    re.compile(r"nanny never restarted", re.I),  # conformance/shuffle/machine/world.py
    re.compile(r"environment: distributed's wait_for_workers"),  # its ClusterUnresponsive
    re.compile(r"a nanny did not bring its worker back"),  # stress/reaper.py
    re.compile(r"Nanny failed to start|Timed out waiting for the nanny", re.I),
    re.compile(r"Address already in use"),
)
RERUN_PROPERTIES = ("passed_on_rerun", "conformance_flaky")


@dataclass
class Record:
    test: str
    runs: int = 0
    failed: int = 0
    rerun: int = 0  # passed only on a rerun
    environment: int = 0
    first: str = ""
    first_run: str = ""
    runs_seen: list[str] = field(default_factory=list)

    @property
    def flaky(self) -> bool:
        return bool(self.failed or self.rerun)

    def line(self) -> str:
        what = f"failed {self.failed}/{self.runs}"
        if self.rerun:
            what += f", passed only on a rerun {self.rerun}/{self.runs}"
        if self.environment:
            what += f", environment {self.environment} (not counted)"
        first = self.first.strip().splitlines()[0][:300] if self.first.strip() else ""
        return f"{self.test}: {what}; first in {self.first_run}: {first}"


def _test_id(case: ET.Element) -> str:
    cls, name = case.get("classname", ""), case.get("name", "")
    return f"{cls}::{name}" if cls else name  # pytest's own: tests.meta.test_x::test_y[p]


def _rerun_property(case: ET.Element) -> str | None:
    for prop in case.iter("property"):
        name, value = prop.get("name"), prop.get("value", "")
        if name == "passed_on_rerun" and value not in ("", "[]", "None"):
            return f"passed only on a rerun: {value}"
        if name == "conformance_flaky":
            nums = [int(n) for n in re.findall(r"\d+", value)]
            if nums and nums[0] > 0:
                return f"manifest flaky entry failed {nums[0]} of {nums[1] if len(nums) > 1 else '?'} runs"
    return None


def _environment_rerun(case: ET.Element) -> str | None:
    """conformance.runner.environment's property: the first attempt failed on the machine."""
    for prop in case.iter("property"):
        if prop.get("name") == "conformance_environment_rerun" and prop.get("value"):
            return prop.get("value")
    return None


def read(paths: list[Path]) -> dict[str, Record]:
    """Test id -> what the runs did with it (a file that does not parse is a failed run)."""
    out: dict[str, Record] = {}
    for path in paths:
        run = "/".join(path.parts[-2:])
        try:
            root = ET.parse(path).getroot()
        except (ET.ParseError, OSError) as exc:
            rec = out.setdefault(f"<{run}>", Record(f"<junit of {run}>"))
            rec.runs += 1
            rec.failed += 1
            rec.first, rec.first_run = rec.first or f"unreadable junit: {exc}", rec.first_run or run
            continue
        for case in root.iter("testcase"):
            rec = out.setdefault(_test_id(case), Record(_test_id(case)))
            if case.find("skipped") is not None and case.find("failure") is None:
                continue
            rec.runs += 1
            bad = case.find("failure")
            if bad is None:
                bad = case.find("error")
            if bad is not None:
                text = (bad.get("message") or "") + "\n" + (bad.text or "")
                if any(p.search(text) for p in ENVIRONMENT):
                    rec.environment += 1
                    rec.runs -= 1
                    text = "[environment] " + text
                else:
                    rec.failed += 1
                if not rec.first:
                    rec.first, rec.first_run = text, run
                continue
            env_rerun = _environment_rerun(case)
            if env_rerun:  # the suite reran it after the machine failed: named, not counted
                rec.environment += 1
                if not rec.first:
                    rec.first, rec.first_run = f"[environment, rerun] {env_rerun}", run
            why = _rerun_property(case)
            if why:
                rec.rerun += 1
                if not rec.first:
                    rec.first, rec.first_run = why, run
    return out


def known(path: Path | None) -> set[str]:
    if path is None or not path.exists():
        return set()
    lines = (ln.split("#", 1)[0].strip() for ln in path.read_text(encoding="utf-8").splitlines())
    return {ln for ln in lines if ln}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("junit", nargs="+", type=Path)
    p.add_argument("--known", type=Path, default=None, help="test ids already known to flake")
    p.add_argument("--json", type=Path, default=None, help="write the records here too")
    args = p.parse_args(argv)
    records = read(sorted(args.junit))
    listed = sorted((r for r in records.values() if r.flaky), key=lambda r: r.test)
    env = sorted((r for r in records.values() if r.environment), key=lambda r: r.test)
    print(f"flake hunt: {len(args.junit)} run(s), {len(records)} test(s) seen")
    for r in listed:
        print(f"  FLAKY {r.line()}" if r.failed < r.runs or r.rerun else f"  FAILS {r.line()}")
    for r in env:
        if not r.flaky:
            print(f"  ENVIRONMENT {r.line()}")
    if not listed:
        print("  no test failed in any run")
    if args.json:
        args.json.write_text(json.dumps([vars(r) for r in records.values()], indent=1), encoding="utf-8")
    new = [r.test for r in listed if r.test not in known(args.known)]
    if new:
        print(f"flake hunt: {len(new)} test(s) not in the known list: {new}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
