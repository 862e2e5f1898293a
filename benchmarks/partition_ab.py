"""The CPU partition kernel's ratio to a copy at two commits, alternating processes.

Is the kernel ratio a regression or the load? On a shared 2-core box one run's ratio moves
with whatever else runs, so this alternates fresh processes of ``partition.py`` at the two
commits (before, after, after, before, ...), each with its own commit's kernels and script,
and prints every process's ratio (``api vs memcpy+alloc``: the kernel allocating its outputs
against a copy into fresh buffers, both timed in that process) and the medians. Run from the
repository root:

    .venv/bin/python benchmarks/partition_ab.py --before 5d11eb8 --after HEAD --processes 4

Each commit is checked out into a temporary git worktree (removed afterwards).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.runner.gitinfo import commit  # noqa: E402

ROW = re.compile(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+)x \|")


def _child(tree: Path, args: argparse.Namespace) -> tuple[float, float]:
    """(api GB/s, api vs memcpy+alloc) of one process at ``tree``'s commit."""
    cmd = [
        sys.executable, str(tree / "benchmarks" / "partition.py"), "--rows", args.rows,
        "--payload-columns", "3", "--fanouts", str(args.fanout), "--repeat", str(args.repeat),
        "--no-baselines",
    ]  # fmt: skip
    out = subprocess.run(cmd, cwd=tree, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = ROW.match(line)
        if m and int(m.group(1)) == args.fanout:
            return float(m.group(2)), float(m.group(3))
    raise RuntimeError(f"no fanout {args.fanout} row in:\n{out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--processes", type=int, default=4, help="processes per commit")
    ap.add_argument("--rows", default="1e7")
    ap.add_argument("--fanout", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    revs = {"before": commit(args.before), "after": commit(args.after)}
    for name, sha in revs.items():
        if sha is None:
            sys.exit(f"partition_ab.py: --{name} names no commit")
    tmp = Path(tempfile.mkdtemp(prefix="partition-ab-"))
    got: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    try:
        for name, sha in revs.items():
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tmp / name), sha],
                           cwd=REPO, check=True)  # fmt: skip
        print(f"before {revs['before'][:10]}, after {revs['after'][:10]}; {args.processes} processes "
              f"each, alternating; {args.rows} rows, 4 int64 columns, fanout {args.fanout}", flush=True)
        for i in range(args.processes):
            for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
                gbs, ratio = _child(tmp / name, args)
                load = os.getloadavg()[0]
                got[name].append((gbs, ratio, load))
                print(f"  {name}: api {gbs:.3f} GB/s, {ratio:.2f}x memcpy+alloc (load {load:.1f})", flush=True)
    finally:
        for name in revs:
            subprocess.run(["git", "worktree", "remove", "--force", str(tmp / name)], cwd=REPO)
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| commit | api GB/s median | api vs memcpy+alloc: median | per process | loads |")
    print("|---|---|---|---|---|")
    for name, sha in revs.items():
        rows = got[name]
        print(f"| {name} {sha[:10]} | {statistics.median(r[0] for r in rows):.3f} "
              f"| **{statistics.median(r[1] for r in rows):.2f}x** | {', '.join(f'{r[1]:.2f}' for r in rows)} "
              f"| {', '.join(f'{r[2]:.1f}' for r in rows)} |")


if __name__ == "__main__":
    main()
