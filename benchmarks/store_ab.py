"""The reference store's cost per operation at two commits, side by side (before/after).

One process of ``store_scaling.py`` measures every case at every N, and on this project's
2-core VM one process differs from the next by up to 2x on one operation (where its memory
lands). So a before/after of a refactor alternates fresh processes of the two commits
(before, after, before, ...), each measuring with its own commit's code and script, and
compares the medians over processes. Run from the repository root:

    .venv/bin/python benchmarks/store_ab.py --before 8f23ee3 --after HEAD --processes 4

Each commit is checked out into a temporary git worktree (removed afterwards); spill files
go under ``--dir`` (default: a tmpfs folder, as ``store_scaling.py`` recommends).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from conformance.runner.gitinfo import commit  # noqa: E402


def _child(tree: Path, out: Path, args: argparse.Namespace) -> dict:
    cmd = [
        sys.executable, str(tree / "benchmarks" / "store_scaling.py"), "--only", "reference",
        "--json", str(out), "--ns", args.ns, "--batch", str(args.batch),
        "--repeat", str(args.repeat), "--peer-fill-budget", "0", "--dir", args.dir,
    ]  # fmt: skip
    if args.cases:
        cmd += ["--cases", args.cases]
    subprocess.run(cmd, cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["reference"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--processes", type=int, default=4, help="processes per commit")
    ap.add_argument("--ns", default="1000,100000")
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="cpu")
    ap.add_argument("--cases", help="comma-separated operations (default: all)")
    ap.add_argument("--dir", default="/dev/shm/store-ab")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    revs = {"before": commit(args.before), "after": commit(args.after)}
    for name, sha in revs.items():
        if sha is None:
            sys.exit(f"store_ab.py: --{name} names no commit")
    tmp = Path(tempfile.mkdtemp(prefix="store-ab-"))
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    try:
        trees = {}
        for name, sha in revs.items():
            trees[name] = tmp / name
            subprocess.run(["git", "worktree", "add", "-q", "--detach", str(trees[name]), sha],
                           cwd=REPO, check=True)  # fmt: skip
        print(f"before {revs['before'][:10]}, after {revs['after'][:10]}; {args.processes} "
              f"processes each, alternating; N = {args.ns}; {args.clock} time; load average "
              f"{os.getloadavg()[0]:.1f} at start", flush=True)  # fmt: skip
        for i in range(args.processes):
            for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
                runs[name].append(_child(trees[name], tmp / f"{name}{i}.json", args))
                print(f"  process {i + 1}/{args.processes}: {name} done", flush=True)
    finally:
        for tree in (tmp / "before", tmp / "after"):
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO)
        shutil.rmtree(tmp, ignore_errors=True)
    ns = args.ns.split(",")
    print(f"\nµs per operation ({args.clock}), median over processes, then the best process "
          "(one process's figure is bimodal on this VM: where its memory lands); after/before\n")
    print("| operation | " + " | ".join(f"before N={n} | after N={n} | ratio (median / best)" for n in ns) + " |")
    print("|---|" + "---:|---:|---:|" * len(ns))
    for case in runs["before"][0][args.clock]:
        cells = []
        for n in ns:
            med = {
                name: statistics.median(r[args.clock][case][n] for r in rs)
                for name, rs in runs.items()
            }
            best = {name: min(r[args.clock][case][n] for r in rs) for name, rs in runs.items()}
            cells += [
                f"{med['before'] * 1e6:.2f} / {best['before'] * 1e6:.2f}",
                f"{med['after'] * 1e6:.2f} / {best['after'] * 1e6:.2f}",
                f"**{med['after'] / med['before']:.3f}** / {best['after'] / best['before']:.3f}",
            ]
        print(f"| {case} | " + " | ".join(cells) + " |")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
