"""The GPU check's run: the parent runs each step in a child (``--step NAME``) within the budget."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from . import __doc__ as PACKAGE_DOC
from .common import REPO, RESULT
from .report import table, write
from .steps import DRY, DRY_SKIP, STEPS, dry_env, run_step


def commit() -> str:
    """The checkout's commit (conformance.runner.gitinfo); 'unknown' where the suite does not import
    (a box without its packages: the device step then says what is missing)."""
    try:
        from conformance.runner import gitinfo
    except Exception:  # noqa: BLE001
        return "unknown"
    return gitinfo.describe(REPO)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.gpu_check",
                                 description=PACKAGE_DOC.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds for all steps (default 420: 8 minutes less set-up)")
    ap.add_argument("--step", choices=[s[0] for s in STEPS], help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=600.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.step:  # child: one step, its result on the last line
        res = run_step(args.step, args.dry_run, out, args.timeout - 5)
        print(RESULT + json.dumps(res, default=str), flush=True)
        return 0

    t_start = time.monotonic()
    deadline = t_start + args.budget
    doc = {"started": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
           "commit": commit(), "dry_run": args.dry_run, "budget_s": args.budget,
           "command": "bash ci/gpu_check.sh " + " ".join(sys.argv[1:]), "steps": []}
    log = (out / "gpu-check.log").open("a")
    for name, title, cap, least, what in STEPS:
        rec = {"name": name, "title": title}
        doc["steps"].append(rec)
        left = deadline - time.monotonic()
        if args.dry_run and name in DRY_SKIP:
            rec.update(status="skipped", summary=f"dry run: {what}: {DRY_SKIP[name]}")
        elif left < least:
            rec.update(status="skipped",
                       summary=f"time budget: {left:.0f} s left, this step needs {least} s")
        else:
            timeout = min(cap, left)
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            if args.dry_run:
                env.update(dry_env(name))
            cmd = [sys.executable, "-m", "ci.gpu_check", "--step", name, "--out", str(out),
                   "--timeout", str(timeout)] + (["--dry-run"] if args.dry_run else [])
            print(f"gpu_check: {name}: {title} (up to {timeout:.0f} s)", flush=True)
            t0 = time.monotonic()
            try:
                proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                                      timeout=timeout)
                text = proc.stdout + proc.stderr
                last = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT)]
                if last:
                    rec.update(json.loads(last[-1][len(RESULT):]))
                else:
                    rec.update(status="error", summary=f"exit {proc.returncode}, no result: "
                               + (text.strip().splitlines() or [""])[-1][:300])
            except subprocess.TimeoutExpired as exc:
                text = "".join(x.decode() if isinstance(x, bytes) else (x or "")
                               for x in (exc.stdout, exc.stderr))
                rec.update(status="timeout", summary=f"ran past {timeout:.0f} s")
            rec["seconds"] = round(time.monotonic() - t0, 1)
            log.write(f"===== {name} ({rec['seconds']} s): {rec['status']}\n{text}\n")
            log.flush()
            if args.dry_run and name in DRY:
                rec["summary"] = (f"dry run: {DRY[name]}: {rec.get('summary', '')}; "
                                  f"on a GPU: {what}")
        doc["seconds"] = round(time.monotonic() - t_start, 1)
        write(out, doc)
    log.close()
    print()
    print("\n".join(table(doc["steps"])))
    bad = [s["name"] for s in doc["steps"] if s["status"] in ("fail", "error", "timeout")
           or (s["status"] == "skipped" and not args.dry_run)]
    print(f"\ngpu_check: {'dry run ' if args.dry_run else ''}done in {doc['seconds']} s; "
          f"results in {out}/gpu-results.md" + (f"; NOT OK: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0
