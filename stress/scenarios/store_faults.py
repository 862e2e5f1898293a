"""Faults against a store, through its adapter: a full disk (RLIMIT_FSIZE, in a child
process so that no other file of this run is limited), a corrupted spill file, and the
spill directory removed. An outcome names what happened; wrong data is a violation."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conformance.store.harness import StoreHarness, files_under, seed_digest, value_digest

from ..record import Outcome

LIMIT = 64 * 1024
N_VALUES = 8
CASES = ("store: disk full", "store: corrupted spill file", "store: spill directory removed")


def _harness(adapter, kind: str, root: Path) -> StoreHarness:
    caps = adapter.capabilities
    host = LIMIT // 4 if "store.limit.host" in caps else None
    return StoreHarness(adapter, kind, root, device_limit=LIMIT, host_limit=host)


def _fill(h: StoreHarness, start: int = 0) -> dict[str, int]:
    """Values a third of the limit each: the older ones spill to disk."""
    stored = {}
    for i in range(start, start + N_VALUES):
        h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
        stored[f"k{i}"] = i
    return stored


def _read(h: StoreHarness, keys: dict[str, int]) -> tuple[list[str], list[str], list[str]]:
    """(intact, wrong, errors) after reading every key back."""
    intact, wrong, errors = [], [], []
    for k, seed in keys.items():
        try:
            same = value_digest(h.device, h.store[k]) == seed_digest(seed, LIMIT // 3)
        except Exception as exc:
            errors.append(f"{k}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        (intact if same else wrong).append(k)
    return intact, wrong, errors


def _on_disk(h: StoreHarness) -> list[str]:
    return [k for k, t in h.snapshot().tiers.items() if t == "disk"]


def corrupted_file(impl, kind: str, root: Path) -> Outcome:
    case = CASES[1]
    h = _harness(impl.adapter, kind, root / "corrupt")
    try:
        keys = _fill(h)
        disk = _on_disk(h)
        files = files_under(h.env.spill_dir)
        if not disk or not files:
            return Outcome(impl.name, case, "not exercised", "no value reached the disk")
        for path, size in files.items():  # one byte flipped in the middle of every file
            with open(path, "r+b") as f:
                f.seek(size // 2)
                b = f.read(1)
                f.seek(size // 2)
                f.write(bytes([b[0] ^ 0xFF]))
        intact, wrong, errors = _read(h, {k: keys[k] for k in disk})
        if wrong:  # a disk tier implies its damaged files (SPEC 10.1)
            return Outcome(impl.name, case, "violation",
                           f"{len(wrong)} of {len(disk)} corrupted values returned as data")
        named = sum(1 for e in errors if e.split(":")[0] in e.split(":", 1)[1])
        detail = f"{len(errors)} of {len(disk)} reads raised ({named} naming the key), e.g. {errors[0]}" if errors else \
            f"{len(intact)} values read back intact"
        return Outcome(impl.name, case, "error" if errors else "correct", detail)
    finally:
        with contextlib.suppress(Exception):
            h.close(check=False)


def removed_dir(impl, kind: str, root: Path) -> Outcome:
    case = CASES[2]
    h = _harness(impl.adapter, kind, root / "removed")
    try:
        keys = _fill(h)
        disk = _on_disk(h)
        if not disk:
            return Outcome(impl.name, case, "not exercised", "no value reached the disk")
        shutil.rmtree(h.env.spill_dir)
        _intact, wrong, errors = _read(h, {k: keys[k] for k in disk})
        put_errors, later = [], {}
        for i in range(100, 100 + N_VALUES):  # more spills into the missing directory
            try:
                h.store[f"k{i}"] = h.value(LIMIT // 3, seed=i)
                later[f"k{i}"] = i
            except Exception as exc:
                put_errors.append(f"{type(exc).__name__}: {str(exc)[:100]}")
        _ok2, wrong2, errors2 = _read(h, later)
        if wrong or wrong2:
            return Outcome(impl.name, case, "violation", f"{len(wrong) + len(wrong2)} values read back wrong")
        if errors2:
            return Outcome(impl.name, case, "violation",
                           f"{len(errors2)} values accepted after the removal were lost, e.g. {errors2[0]}")
        detail = (f"{len(errors)} of {len(disk)} spilled values raised, e.g. {errors[0]}; " if errors else
                  f"all {len(disk)} spilled values intact; ")
        detail += f"{len(later)} later puts kept" + (f", {len(put_errors)} refused ({put_errors[0]})" if put_errors else "")
        return Outcome(impl.name, case, "error" if errors or put_errors else "correct", detail)
    finally:
        with contextlib.suppress(Exception):
            h.close(check=False)


def disk_full(impl, kind: str, root: Path) -> Outcome:
    """In a child process: RLIMIT_FSIZE limits every file the process writes."""
    case = CASES[0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "stress.scenarios.disk_full_child", impl.spec, kind, str(root / "disk-full")],
            capture_output=True, text=True, timeout=120, env=env,
        )
    except subprocess.TimeoutExpired:
        return Outcome(impl.name, case, "violation", "hang: the child did not finish in 120 s")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    if not lines:
        return Outcome(impl.name, case, "violation", f"child failed (rc={proc.returncode}): {proc.stderr[-300:]}")
    r = json.loads(lines[-1][len("RESULT"):])
    if not r["signals"]:
        return Outcome(impl.name, case, "not exercised", "no write reached the file-size limit")
    if r["wrong"] or r["lost"]:
        return Outcome(impl.name, case, "violation",
                       f"{len(r['wrong'])} wrong, {len(r['lost'])} lost after accepted puts: {(r['lost'] or r['wrong'])[:2]}")
    detail = f"{r['signals']} writes refused; {len(r['intact'])} accepted values intact"
    if r["put_errors"]:
        return Outcome(impl.name, case, "error", detail + f"; {len(r['put_errors'])} puts raised, e.g. {r['put_errors'][0]}")
    return Outcome(impl.name, case, "correct", detail)
