"""The steps of ``ci/gpu_check.sh``: one prepared run that proves and measures the CUDA path.

    python3 ci/gpu_check.py --out DIR [--dry-run] [--budget SECONDS]

Each step runs in its own subprocess (``--step NAME``) with a timeout taken from what is
left of ``--budget``; after every step ``DIR/gpu-check.json`` and ``DIR/gpu-results.md`` are
rewritten, so a run cut short still leaves the earlier results on disk. The table is
printed last. ``--dry-run`` (CI, no GPU) checks imports, runs the CUDA kernels under numba's
simulator and the measuring code on the sim device at small sizes, and says which GPU steps
it skipped and why. Exit status: 1 if a step failed, erred or timed out (or, in a real run,
was skipped), else 0.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata as md
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MiB, GiB = 2**20, 2**30
RESULT = "GPU-CHECK-RESULT "

# name, title, cap (s), least time worth starting it (s), what it does on a GPU
STEPS = [
    ("device", "device, driver, versions", 60, 5, "record the GPU, driver, CuPy, numba, RMM"),
    ("bandwidth", "copy bandwidth (denominators)", 60, 15,
     "D2D copy on 4 GiB; pinned and pageable H2D/D2H at 1 MiB, 64 MiB, 1 GiB"),
    ("tests", "tests/device + tests/kernels on cuda", 110, 30,
     "pytest tests/device tests/kernels on the real cuda device (PROXIFY_REQUIRE_GPU=1)"),
    ("twins", "CUDA kernels vs CPU twins, 10^7 rows", 100, 30,
     "CUDA kernels vs CPU twins on 10^7 rows for every key kind"),
    ("partition", "partition kernel throughput", 60, 20,
     "partition 10^8 rows (int64 key + 2 int64) at fanouts 16/256/1024/4096 vs D2D copy"),
    ("store", "store spill / unspill", 50, 15,
     "ProxifyHostFile spill and unspill of 64 MiB-1 GiB vs pinned and pageable copies"),
    ("conformance", "conformance --device=cuda (ci)", 150, 40,
     "pytest conformance --impl=reference --device=cuda, ci profile"),
    ("shuffle", "shuffle benchmark, one GPU", 90, 40,
     "benchmarks/shuffle.py's 'ours' and 'p2p' on a one-GPU LocalDeviceCluster, 1 GiB"),
]
NEEDS_GPU = {"bandwidth", "tests", "twins", "partition", "store", "conformance", "shuffle"}
# what --dry-run does instead (in CI), and why the GPU work is skipped
DRY = {
    "twins": "CUDA kernels vs CPU twins under numba's simulator, 150 rows, 2 key kinds",
    "partition": "the measuring code on the sim device (CPU kernels), 10^5 rows",
    "store": "the measuring code on the sim device, 4-16 MiB",
}
DRY_SKIP = {
    "bandwidth": "needs a GPU (CuPy copies)",
    "tests": "needs a GPU (CI runs these tests on sim in ci/test.sh)",
    "conformance": "needs a GPU (CI runs the suite on sim in ci/test.sh)",
    "shuffle": "needs a GPU (CI runs the shuffle tests on sim in ci/test.sh)",
}


# ------------------------------------------------------------------ helpers
def _sync(device) -> None:
    if device.kind == "cuda":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def _best(reps: int, fn, sync=lambda: None) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def _gbs(nbytes: float, seconds: float) -> float:
    return round(nbytes / seconds / 1e9, 2)


def _previous(out: Path, step: str) -> dict:
    """An earlier step's data from this run's JSON (empty if it did not run)."""
    try:
        doc = json.loads((out / "gpu-check.json").read_text())
    except (OSError, ValueError):
        return {}
    for s in doc.get("steps", []):
        if s["name"] == step and s.get("status") == "pass":
            return s.get("data", {})
    return {}


def conformance_plugin_args() -> list[str]:
    """``-p conformance.plugin`` where the project is not installed (an air-gapped box runs it
    from the checkout on PYTHONPATH: no entry point); nothing where the entry point exists."""
    eps = md.entry_points(group="pytest11")
    return [] if any(ep.value == "conformance.plugin" for ep in eps) else ["-p", "conformance.plugin"]


def _pytest_summary(text: str) -> str:
    lines = [ln.strip("= ") for ln in text.splitlines() if " in " in ln and (
        "passed" in ln or "failed" in ln or "error" in ln or "skipped" in ln)]
    return lines[-1] if lines else "no pytest summary line"


def _module_origin(name: str) -> str:
    mod = importlib.import_module(name)
    version = getattr(mod, "__version__", "")
    where = Path(getattr(mod, "__file__", "") or "?")
    site = os.environ.get("GPU_CHECK_SITE")
    if site and str(where).startswith(site):
        origin = "carried wheel"
    elif str(where).startswith(str(REPO)) and "site-packages" not in where.parts:
        origin = "checkout"
    else:
        origin = "installed"
    return f"{version} ({origin})".strip()


# ------------------------------------------------------------------ steps (child side)
def step_device(dry: bool) -> dict:
    data: dict = {"python": platform.python_version(), "machine": platform.machine()}
    required = ["numpy", "pyarrow", "numba", "dask", "distributed", "zict", "blake3", "pytest",
                "hypothesis", "xdist", "reference_impl", "conformance", "conformance.plugin"]
    missing = []
    for name in required:
        try:
            data[name] = _module_origin(name)
        except Exception as exc:  # noqa: BLE001 - reported
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
    for name in ("cupy", "rmm", "numba.cuda"):
        try:
            data[name] = _module_origin(name)
        except Exception as exc:  # noqa: BLE001
            data[name] = f"absent ({type(exc).__name__}: {str(exc)[:80]})"
    try:
        data["numba-cuda"] = md.version("numba-cuda")
    except md.PackageNotFoundError:
        data["numba-cuda"] = "absent"
    if missing:
        return {"status": "fail", "summary": "missing: " + "; ".join(missing), "data": data}
    if dry:
        return {"status": "pass", "data": data,
                "summary": f"imports ok (python {data['python']}; dask {data['dask']}; "
                           f"cupy {data['cupy'].split(' (')[0]})"}
    import cupy
    from numba import cuda

    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(0)
    data.update(
        gpu=props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        memory_gib=round(props["totalGlobalMem"] / GiB, 1), sms=props["multiProcessorCount"],
        cc=f"{props['major']}.{props['minor']}", driver=rt.driverGetVersion(),
        runtime=rt.runtimeGetVersion(), numba_cuda_available=bool(cuda.is_available()))
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        data["nvidia_smi"] = smi.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        data["nvidia_smi"] = f"unavailable: {exc}"
    if not data["numba_cuda_available"]:
        return {"status": "fail", "data": data, "summary": "numba.cuda sees no GPU"}
    return {"status": "pass", "data": data,
            "summary": f"{data['gpu']} ({data['memory_gib']} GiB, {data['sms']} SMs, cc {data['cc']}), "
                       f"driver {data['nvidia_smi'].split(',')[-1].strip() or data['driver']}, "
                       f"cupy {data['cupy'].split(' ')[0]}, numba {data['numba'].split(' ')[0]}, "
                       f"numba-cuda {data['numba-cuda']}, rmm {data['rmm'].split(' ')[0]}"}


def step_bandwidth(dry: bool) -> dict:
    import cupy as cp
    import cupyx
    import numpy as np

    rt = cp.cuda.runtime
    sync = rt.deviceSynchronize
    def copy_seconds(dst: int, src: int, nbytes: int, kind: int, reps: int) -> float:
        return _best(reps, lambda: rt.memcpy(dst, src, nbytes, kind), sync)

    n = 4 * GiB
    bufs = [cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)]
    bufs[0].fill(1)
    t = copy_seconds(bufs[1].data.ptr, bufs[0].data.ptr, n, rt.memcpyDeviceToDevice, 5)
    data = {"d2d_4gib_gbs": _gbs(n, t), "d2d_4gib_rw_gbs": _gbs(2 * n, t)}
    bufs.clear()
    rows = [("D2D 4 GiB", data["d2d_4gib_gbs"], "", "")]
    for size, reps, label in ((MiB, 50, "1 MiB"), (64 * MiB, 10, "64 MiB"), (GiB, 3, "1 GiB")):
        dev = cp.empty(size, cp.uint8)
        pinned = cupyx.empty_pinned(size, np.uint8)
        pinned[...] = 1
        pageable = np.ones(size, np.uint8)
        fig = {}
        for host, kind in ((pinned, "pinned"), (pageable, "pageable")):
            ptr = host.ctypes.data
            fig[f"h2d_{kind}"] = _gbs(size, copy_seconds(dev.data.ptr, ptr, size,
                                                         rt.memcpyHostToDevice, reps))
            fig[f"d2h_{kind}"] = _gbs(size, copy_seconds(ptr, dev.data.ptr, size,
                                                         rt.memcpyDeviceToHost, reps))
        data[label] = fig
        rows.append((label, "", f"{fig['h2d_pinned']} / {fig['h2d_pageable']}",
                     f"{fig['d2h_pinned']} / {fig['d2h_pageable']}"))
    return {"status": "pass", "data": data,
            "table": [("copy", "D2D GB/s", "H2D pinned / pageable GB/s",
                       "D2H pinned / pageable GB/s"), *rows],
            "summary": f"D2D {data['d2d_4gib_gbs']} GB/s (payload; x2 read+write); "
                       f"1 GiB pinned H2D {data['1 GiB']['h2d_pinned']}, D2H "
                       f"{data['1 GiB']['d2h_pinned']} GB/s; pageable D2H "
                       f"{data['1 GiB']['d2h_pageable']} GB/s"}


def step_twins(dry: bool) -> dict:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu_twins

    from reference_impl.device import SimDevice, get_device
    from reference_impl.kernels import cuda as kc

    cpu = SimDevice("64 GiB")
    if dry:
        from numba import config

        assert config.ENABLE_CUDASIM, "the dry run's twins step runs under the simulator"
        gpu, rows, runs = cpu, 150, [(k, None) for k in ("int64+nulls", "string+nulls")]
    else:
        gpu, rows = get_device("cuda"), 10**7
        runs = [(k, None) for k in gpu_twins.KINDS] + [("int64", "tile"), ("string", "tile")]
    results, bad = [], []
    for kind, rank in runs:
        kc.RANK_VARIANT = rank
        r = gpu_twins.check(kind, rows, gpu, cpu, 1024)
        r["rank"] = kc.rank_variant()
        results.append(r)
        if not r["ok"]:
            bad.append(f"{kind} ({r['rank']}): {', '.join(r['differs'])}")
        print(json.dumps(r), flush=True)
    kc.RANK_VARIANT = None
    return {"status": "fail" if bad else "pass", "data": {"runs": results},
            "table": [("key kind", "rank", "rows", "identical", "CPU s", "GPU s (incl. compile)"),
                      *[(r["kind"], r["rank"], f"{r['rows']:,}", "yes" if r["ok"] else "NO",
                         r["cpu_s"], r["gpu_s_incl_compile"]) for r in results]],
            "summary": (f"DIFFER: {'; '.join(bad)}" if bad else
                        f"{len(results)} runs of {rows:,} rows identical (ids, counts, offsets, "
                        f"every column){' under the simulator' if dry else ''}")}


def step_partition(dry: bool, out: Path) -> dict:
    import numpy as np

    from reference_impl.device import SimDevice, get_device
    from reference_impl.kernels import partition

    if dry:
        dev, rows, fanouts, backend = SimDevice("1 GiB"), 10**5, (16, 256), "cpu"
    else:
        dev, rows, fanouts, backend = get_device("cuda"), 10**8, (16, 256, 1024, 4096), "cuda"
    rng = np.random.default_rng(0)
    key = dev.asarray(rng.integers(0, 2**62, rows, dtype=np.int64))
    pay = [dev.asarray(np.arange(rows, dtype=np.int64)) for _ in range(2)]
    nbytes = 3 * 8 * rows
    outs = [dev.empty(rows, np.int64) for _ in range(3)]
    ids = dev.empty(rows, np.int32)
    d2d = _previous(out, "bandwidth").get("d2d_4gib_gbs")
    if d2d is None:  # measure the copy here (dry run, or the bandwidth step did not pass)
        bufs = [dev.empty(nbytes, np.uint8), dev.empty(nbytes, np.uint8)]

        def copy():
            bufs[1][...] = bufs[0]

        d2d = _gbs(nbytes, _best(3, copy, lambda: _sync(dev)))
        bufs.clear()
    rows_out, data = [], {"rows": rows, "input_bytes": nbytes, "copy_gbs": d2d, "fanouts": {}}
    for n in fanouts:
        def reuse(n=n):
            partition(dev, [key], pay, n, out=outs, ids_out=ids, backend=backend)

        def api(n=n):
            partition(dev, [key], pay, n, backend=backend)

        t_reuse = _best(3, reuse, lambda: _sync(dev))
        t_api = _best(2, api, lambda: _sync(dev))
        f = {"reuse_gbs": _gbs(nbytes, t_reuse), "api_gbs": _gbs(nbytes, t_api)}
        f["reuse_vs_copy"] = round(f["reuse_gbs"] / d2d, 3)
        f["api_vs_copy"] = round(f["api_gbs"] / d2d, 3)
        data["fanouts"][n] = f
        rows_out.append((n, f["reuse_gbs"], f["reuse_vs_copy"], f["api_gbs"], f["api_vs_copy"]))
        print(json.dumps({"fanout": n, **f}), flush=True)
    worst = min(f["reuse_vs_copy"] for k, f in data["fanouts"].items() if k <= 1024)
    goal = "" if dry else (" (goal >= 0.5x at fanout <= 1024: " +
                           ("met" if worst >= 0.5 else "MISSED") + ")")
    return {"status": "pass", "data": data,
            "table": [("fanout", "reuse GB/s", "x copy", "api GB/s", "x copy"), *rows_out],
            "summary": f"{rows:,} rows x 24 B; worst reuse at fanout <= 1024: {worst}x the "
                       f"copy ({d2d} GB/s){goal}"}


def step_store(dry: bool, out: Path) -> dict:
    import gc
    import tempfile

    import numpy as np

    from reference_impl import ProxifyHostFile
    from reference_impl.device import SimDevice, get_device

    dev = SimDevice("1 GiB") if dry else get_device("cuda")
    sizes = (4 * MiB, 16 * MiB) if dry else (64 * MiB, 256 * MiB, GiB)
    bw = _previous(out, "bandwidth")
    data, rows = {}, []
    with tempfile.TemporaryDirectory() as tmp, ProxifyHostFile(
            device=dev, device_memory_limit=4 * max(sizes), local_directory=tmp) as store:
        for size in sizes:
            value = dev.asarray(np.arange(size // 8, dtype=np.int64))
            spill, unspill = [], []
            for i in range(3):
                key = f"x{size}-{i}"
                store[key] = value if i == 0 else dev.asarray(np.arange(size // 8, dtype=np.int64))
                _sync(dev)
                t0 = time.perf_counter()
                freed = store.evict(size)
                _sync(dev)
                spill.append(time.perf_counter() - t0)
                assert freed >= size and store.tier_of(key) == "host", (freed, store.tier_of(key))
                t0 = time.perf_counter()
                back = store[key]
                _sync(dev)
                unspill.append(time.perf_counter() - t0)
                assert store.tier_of(key) == "device"
                del back
                del store[key]
                gc.collect()
            del value
            label = f"{size // MiB} MiB"
            f = {"spill_gbs": _gbs(size, min(spill)), "unspill_gbs": _gbs(size, min(unspill))}
            ref = bw.get("1 GiB" if size >= GiB else "64 MiB", {})
            if ref:
                f["spill_vs_pinned_d2h"] = round(f["spill_gbs"] / ref["d2h_pinned"], 3)
                f["unspill_vs_pinned_h2d"] = round(f["unspill_gbs"] / ref["h2d_pinned"], 3)
                f["spill_vs_pageable_d2h"] = round(f["spill_gbs"] / ref["d2h_pageable"], 3)
            data[label] = f
            rows.append((label, f["spill_gbs"], f.get("spill_vs_pinned_d2h", ""),
                         f["unspill_gbs"], f.get("unspill_vs_pinned_h2d", "")))
            print(json.dumps({"size": label, **f}), flush=True)
    ratios = [f["spill_vs_pinned_d2h"] for f in data.values() if "spill_vs_pinned_d2h" in f]
    summary = ", ".join(f"{k}: spill {f['spill_gbs']} / unspill {f['unspill_gbs']} GB/s"
                        for k, f in data.items())
    if ratios:
        summary += (f"; spill vs pinned D2H {min(ratios)}x-{max(ratios)}x (goal >= 0.85x: "
                    f"{'met' if min(ratios) >= 0.85 else 'MISSED'})")
    return {"status": "pass", "data": data, "summary": summary,
            "table": [("value", "spill GB/s", "x pinned D2H", "unspill GB/s", "x pinned H2D"),
                      *rows]}


def _pytest_step(args: list[str], env_extra: dict, timeout: float) -> dict:
    env = dict(os.environ, **env_extra)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    print("$ " + " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-3000:]
        print(tail.decode() if isinstance(tail, bytes) else tail, flush=True)
        return {"status": "timeout", "summary": f"pytest ran past {timeout:.0f} s"}
    print(proc.stdout[-6000:] + proc.stderr[-3000:], flush=True)
    summary = _pytest_summary(proc.stdout + proc.stderr)
    return {"status": "pass" if proc.returncode == 0 else "fail",
            "summary": f"exit {proc.returncode}: {summary}"}


def step_tests(dry: bool, timeout: float) -> dict:
    return _pytest_step(["tests/device", "tests/kernels", "-m", "not cudasim and not slow",
                         "-n", "4", "-rfEs"], {"PROXIFY_REQUIRE_GPU": "1"}, timeout)


def step_conformance(dry: bool, out: Path, timeout: float) -> dict:
    res = _pytest_step(["conformance", *conformance_plugin_args(), "--impl=reference",
                        "--device=cuda", f"--conformance-report={out / 'conformance'}",
                        "-n", "4"],
                       {"CONFORMANCE_PROFILE": "ci", "HYPOTHESIS_PROFILE": "ci"}, timeout)
    report = out / "conformance" / "conformance.json"
    if report.exists():
        res["data"] = {"report": str(report.relative_to(out))}
    return res


def step_shuffle(dry: bool) -> dict:
    import tempfile

    import distributed

    sys.path.insert(0, str(REPO / "benchmarks"))
    import shuffle as bench

    from reference_impl.shuffle import LocalDeviceCluster

    size, nparts = GiB, 32
    row_bytes = bench.arrow_nbytes(10_000) / 10_000
    rows = int(size / row_bytes / nparts)
    data, table = {}, []
    with tempfile.TemporaryDirectory() as tmp, LocalDeviceCluster(
            1, device="cuda", device_memory_limit="16GiB", memory_limit="32GiB",
            local_directory=tmp) as cluster, distributed.Client(cluster) as client:
        for method in ("ours", "p2p"):
            r = bench._measure(client, method, nparts, rows, int(rows * nparts * row_bytes),
                               verbose=False)
            data[method] = {"wall_s": round(r.wall, 2), "gbs": _gbs(r.nbytes, r.wall),
                            "rss_peak": sum(r.rss_peak.values()),
                            "device_peak": sum(r.device_peak.values())}
            table.append((method, f"{r.rows:,}", data[method]["wall_s"], data[method]["gbs"],
                          f"{data[method]['device_peak'] / MiB:.0f}"))
            print(json.dumps({method: data[method]}), flush=True)
    ratio = round(data["ours"]["gbs"] / data["p2p"]["gbs"], 2)
    return {"status": "pass", "data": data,
            "table": [("method", "rows", "wall s", "GB/s", "device peak MiB"), *table],
            "summary": f"1 GiB, 32 partitions, 1 worker on the GPU: ours "
                       f"{data['ours']['gbs']} GB/s, {ratio}x P2P (rows and payload sum checked)"}


def run_step(name: str, dry: bool, out: Path, timeout: float) -> dict:
    fns = {
        "device": lambda: step_device(dry),
        "bandwidth": lambda: step_bandwidth(dry),
        "tests": lambda: step_tests(dry, timeout),
        "twins": lambda: step_twins(dry),
        "partition": lambda: step_partition(dry, out),
        "store": lambda: step_store(dry, out),
        "conformance": lambda: step_conformance(dry, out, timeout),
        "shuffle": lambda: step_shuffle(dry),
    }
    try:
        return fns[name]()
    except Exception as exc:  # noqa: BLE001 - a step's error is its result
        traceback.print_exc()
        return {"status": "error", "summary": f"{type(exc).__name__}: {str(exc)[:300]}"}


# ------------------------------------------------------------------ the run (parent side)
def _commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True, timeout=10).stdout
        return (sha or "unknown") + (" (modified)" if dirty.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def _table(steps: list[dict]) -> list[str]:
    lines = ["| step | status | result | s |", "|---|---|---|---|"]
    for s in steps:
        summary = str(s.get("summary", "")).replace("|", "/").replace("\n", " ")
        lines.append(f"| {s['name']} | {s['status']} | {summary} | {s.get('seconds', '')} |")
    return lines


def write(out: Path, doc: dict) -> None:
    (out / "gpu-check.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    dev = next((s for s in doc["steps"] if s["name"] == "device"), {})
    lines = [f"# GPU check{' (dry run: no GPU work)' if doc['dry_run'] else ''}", "",
             f"- date: {doc['started']}", f"- commit: {doc['commit']}",
             f"- device: {dev.get('summary', 'not recorded')}",
             f"- command: `{doc['command']}`",
             f"- budget: {doc['budget_s']} s; took {doc.get('seconds', '(running)')} s", "",
             *_table(doc["steps"]), ""]
    for s in doc["steps"]:
        if s.get("table"):
            head, *rows = s["table"]
            lines += [f"## {s['name']}: {s['title']}", "",
                      "| " + " | ".join(map(str, head)) + " |",
                      "|" + "---|" * len(head),
                      *["| " + " | ".join(map(str, r)) + " |" for r in rows], ""]
    if any(s["status"] == "skipped" for s in doc["steps"]):
        lines += ["## Skipped", ""] + [f"- {s['name']}: {s['summary']}" for s in doc["steps"]
                                       if s["status"] == "skipped"] + [""]
    (out / "gpu-results.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
           "commit": _commit(), "dry_run": args.dry_run, "budget_s": args.budget,
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
            if args.dry_run and name == "twins":
                env["NUMBA_ENABLE_CUDASIM"] = "1"
            cmd = [sys.executable, __file__, "--step", name, "--out", str(out),
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
    print("\n".join(_table(doc["steps"])))
    bad = [s["name"] for s in doc["steps"] if s["status"] in ("fail", "error", "timeout")
           or (s["status"] == "skipped" and not args.dry_run)]
    print(f"\ngpu_check: {'dry run ' if args.dry_run else ''}done in {doc['seconds']} s; "
          f"results in {out}/gpu-results.md" + (f"; NOT OK: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
