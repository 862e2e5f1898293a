"""Spill-file MAC candidates side by side: spill vs raw write, unspill vs raw read, one run.

Run from the repository root:

    .venv/bin/python benchmarks/disk_mac.py [--total-mib 256] [--object-mib 4,64] [--rounds 5]

Every candidate writes the same payloads as the store does (one file per object:
header, frames, then a 32-byte tag over the file name, length and every byte) and
reads them back, authenticating every byte before returning. The baselines are a
plain write / readinto of the same bytes in the same directory, in the same rounds.
Rounds interleave all candidates and baselines; each figure is the best round.

Candidates:
- ``sha256-tree (pool)``: the store's format until issue 14: SHA-256 of each 1 MiB
  chunk on a pool of up to 4 threads, while the file is written, then HMAC-SHA256
  over the chunk digests.
- ``hmac-sha256 (overlap)``: one HMAC-SHA256 over the body, computed on one worker
  thread chunk by chunk while the main thread writes: the MAC of chunk k overlaps the
  write of the chunk before it (reads: hashing batch k overlaps reading batch k+1).
- ``blake2b keyed (overlap)``: the same pipeline with keyed BLAKE2b (hashlib).
- ``blake3 keyed (overlap)``: the same pipeline with keyed BLAKE3 (``blake3``
  package, one thread per hash).
- ``blake3 keyed (threads)``: keyed BLAKE3 with ``max_threads=AUTO`` (its own Rust
  thread pool, SIMD) in the same pipeline.
- ``store SpillDir``: ``reference_impl.store.disk.SpillDir`` as committed.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import hmac
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from benchmarks._common import machine  # noqa: E402
from reference_impl.store import disk, serialize  # noqa: E402

CHUNK = 1 << 20
U64 = struct.Struct("<Q")
MAGIC = b"BENCHMAC"

_pool1 = ThreadPoolExecutor(1, thread_name_prefix="mac-overlap")
_pool4 = ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1)), thread_name_prefix="mac-tree")


def _pieces(buffers: list[memoryview], size: int) -> list[list[memoryview]]:
    return disk._batches(buffers, size)


def _update_all(h: Any, views: list[memoryview]) -> None:
    for v in views:
        h.update(v)


class _Flat:
    """One keyed MAC over name, length and body, fed on one worker thread in order."""

    def __init__(self, new: Callable[[], Any], name: bytes, total: int) -> None:
        self.h = new()
        self.h.update(MAGIC + U64.pack(len(name)) + name + U64.pack(total))
        self.last = None

    def feed(self, views: list[memoryview]) -> None:
        self.last = _pool1.submit(_update_all, self.h, views)  # one thread: stays in order

    def digest(self) -> bytes:
        if self.last is not None:
            self.last.result()
        return self.h.digest()


class _Tree:
    """The pre-issue-14 store format: SHA-256 leaves on a pool, HMAC over the leaves."""

    def __init__(self, key: bytes, name: bytes, total: int) -> None:
        self.key, self.name, self.total, self.leaves = key, name, total, []

    def feed(self, views: list[memoryview]) -> None:
        for chunk in _pieces(views, CHUNK):
            self.leaves.append(_pool4.submit(lambda c=chunk: hashlib.sha256(b"".join(c)).digest()
                                             if len(c) > 1 else hashlib.sha256(c[0]).digest()))  # fmt: skip

    def digest(self) -> bytes:
        mac = hmac.new(self.key, digestmod=hashlib.sha256)
        mac.update(MAGIC + U64.pack(len(self.name)) + self.name + U64.pack(self.total))
        mac.update(b"".join(f.result() for f in self.leaves))
        return mac.digest()


def _candidates(key: bytes) -> dict[str, Callable[[bytes, int], Any]]:
    out: dict[str, Callable[[bytes, int], Any]] = {
        "sha256-tree (pool)": lambda name, total: _Tree(key, name, total),
        "hmac-sha256 (overlap)": lambda name, total: _Flat(
            lambda: hmac.new(key, digestmod=hashlib.sha256), name, total
        ),
        "blake2b keyed (overlap)": lambda name, total: _Flat(
            lambda: hashlib.blake2b(key=key, digest_size=32), name, total
        ),
    }
    try:
        import blake3
    except ImportError:
        return out
    out["blake3 keyed (overlap)"] = lambda name, total: _Flat(lambda: blake3.blake3(key=key), name, total)
    out["blake3 keyed (threads)"] = lambda name, total: _Flat(
        lambda: blake3.blake3(key=key, max_threads=blake3.blake3.AUTO), name, total
    )
    return out


def write_one(path: str, payload: serialize.Payload, mac: Callable[[bytes, int], Any]) -> None:
    frames = [payload.header, *payload.frames]
    lengths = b"".join(U64.pack(memoryview(f).nbytes) for f in frames)
    body = [memoryview(MAGIC + U64.pack(len(payload.frames)) + lengths), *map(memoryview, frames)]
    total = sum(b.nbytes for b in body)
    h = mac(os.path.basename(path).encode(), total)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        for piece in _pieces(body, 4 * CHUNK):
            h.feed(piece)  # hashed on a worker while this thread writes
            disk.writev_all(fd, piece)
        disk.writev_all(fd, [memoryview(h.digest())])
    finally:
        os.close(fd)


def read_one(path: str, nbytes: int, mac: Callable[[bytes, int], Any]) -> memoryview:
    buf = np.empty(nbytes - 32, dtype=np.uint8)
    tag = bytearray(32)
    h = mac(os.path.basename(path).encode(), nbytes - 32)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for piece in _pieces([memoryview(buf)], 4 * CHUNK):
            disk.readv_all(fd, piece)
            h.feed(piece)  # hashed on a worker while this thread reads the next batch
        disk.readv_all(fd, [memoryview(tag)])
    finally:
        os.close(fd)
    if not hmac.compare_digest(h.digest(), bytes(tag)):
        raise ValueError(f"{path}: bad tag")
    return memoryview(buf)


def raw_write(paths: list[str], payloads: list[serialize.Payload]) -> None:
    for path, p in zip(paths, payloads, strict=True):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        disk.writev_all(fd, [memoryview(p.header), *p.frames])
        os.close(fd)


def raw_read(paths: list[str], payloads: list[serialize.Payload]) -> None:
    for path, p in zip(paths, payloads, strict=True):
        buf = np.empty(p.nbytes, dtype=np.uint8)
        with open(path, "rb", buffering=0) as fh:
            fh.readinto(memoryview(buf))


def write_all(paths: list[str], payloads: list[serialize.Payload], mac: Any) -> None:
    for q, p in zip(paths, payloads, strict=True):
        write_one(q, p, mac)


def read_all(paths: list[str], sizes: list[int], mac: Any) -> None:
    for q, n in zip(paths, sizes, strict=True):
        read_one(q, n, mac)


def store_write(store_dir: Any, payloads: list[serialize.Payload], files: list[Any]) -> None:
    files.extend(store_dir.write(p) for p in payloads)


def store_read(store_dir: Any, files: list[Any]) -> None:
    for f in files:
        store_dir.read(f, "bench")


def bench(
    directory: str, total_mib: int, object_mib: int, rounds: int, candidates: bool = True
) -> dict[str, dict[str, float]]:
    """``{name: {"write"|"read": MiB/s}}`` for the raw baseline, the store and the candidates."""
    count = max(1, total_mib // object_mib)
    payloads = [
        serialize.dumps(np.random.default_rng(i).integers(0, 255, object_mib << 20, dtype=np.uint8))
        for i in range(count)
    ]
    nbytes = sum(p.nbytes for p in payloads)
    key = os.urandom(32)
    cands = _candidates(key) if candidates else {}
    store_dir = disk.SpillDir(directory, key)
    best: dict[str, dict[str, float]] = {}

    def keep(name: str, what: str, seconds: float) -> None:
        row = best.setdefault(name, {})
        row[what] = min(row.get(what, float("inf")), seconds)

    def timed(fn: Callable[..., Any], *args: Any) -> float:
        gc.collect()
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start

    for _ in range(rounds):
        paths = [os.path.join(directory, f"raw-{i}") for i in range(count)]
        keep("raw", "write", timed(raw_write, paths, payloads))
        keep("raw", "read", timed(raw_read, paths, payloads))
        for path in paths:
            os.unlink(path)
        paths = [os.path.join(directory, f"{i:04d}.spill") for i in range(count)]
        for name, mac in cands.items():
            keep(name, "write", timed(write_all, paths, payloads, mac))
            sizes = [os.path.getsize(q) for q in paths]
            keep(name, "read", timed(read_all, paths, sizes, mac))
            for q in paths:
                os.unlink(q)
        files: list[Any] = []
        keep("store SpillDir", "write", timed(store_write, store_dir, payloads, files))
        keep("store SpillDir", "read", timed(store_read, store_dir, files))
        for f in files:
            f.remove()
    mib = nbytes / 2**20
    return {name: {k: mib / v for k, v in row.items()} for name, row in best.items()}


def hash_speeds(mib: int = 64, rounds: int = 5) -> dict[str, float]:
    """Single-call hash throughput (MiB/s) on one buffer, for reading the table."""
    buf = memoryview(np.random.default_rng(0).integers(0, 255, mib << 20, dtype=np.uint8))
    key = os.urandom(32)
    fns: dict[str, Callable[[], Any]] = {
        "sha256": lambda: hashlib.sha256(buf).digest(),
        "blake2b keyed": lambda: hashlib.blake2b(buf, key=key, digest_size=32).digest(),
    }
    try:
        import blake3

        fns["blake3 keyed, 1 thread"] = lambda: blake3.blake3(buf, key=key).digest()
        fns["blake3 keyed, AUTO threads"] = lambda: blake3.blake3(
            buf, key=key, max_threads=blake3.blake3.AUTO
        ).digest()
    except ImportError:
        pass
    out = {}
    for name, fn in fns.items():
        t = min((time.perf_counter(), fn(), time.perf_counter()) for _ in range(rounds))
        out[name] = mib / (t[2] - t[0])
    return out


def overlap_probe(directory: str, mib: int = 64, rounds: int = 5) -> dict[str, float]:
    """Whether this machine can hash and write at once (MiB/s of payload each way).

    A spill overlaps its MAC with its write, so it can beat the sequential sum of the two
    only where two threads really run in parallel. The probe times one write alone, one
    keyed BLAKE3 alone, two BLAKE3 threads on two buffers, and a write beside a hash;
    ``sequential ceiling`` is the spill/write ratio when nothing overlaps.
    """
    import blake3

    bufs = [memoryview(np.random.default_rng(i).integers(0, 255, mib << 20, dtype=np.uint8)) for i in (1, 2)]
    key = os.urandom(32)
    path = os.path.join(directory, "probe")

    def write() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        disk.writev_all(fd, [bufs[0]])
        os.close(fd)

    def hash_(i: int = 1) -> None:
        blake3.blake3(bufs[i], key=key).digest()

    def beside(main: Callable[[], None], other: Callable[[], None]) -> Callable[[], None]:
        def both() -> None:
            t = threading.Thread(target=other)
            t.start()
            main()
            t.join()

        return both

    def best(fn: Callable[[], None], moved: int) -> float:
        times = []
        for _ in range(rounds):
            if os.path.exists(path):
                os.unlink(path)
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        if os.path.exists(path):
            os.unlink(path)
        return moved * mib / min(times)

    out = {
        "write alone": best(write, 1),
        "blake3 alone": best(hash_, 1),
        "2 blake3 threads": best(beside(lambda: hash_(0), hash_), 2),
        "write beside blake3": best(beside(write, hash_), 2),
    }
    w, h = out["write alone"], out["blake3 alone"]
    out["sequential ceiling"] = (1 / (1 / w + 1 / h)) / w
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total-mib", type=int, default=256)
    ap.add_argument("--object-mib", default="4,64", help="object sizes (MiB), comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="directory for the files (default: tmp)")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="bench-mac-", dir=args.dir)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at start; files in {base}")
    try:
        for name, speed in hash_speeds().items():
            print(f"  hash alone: {name:<28} {speed:8.0f} MiB/s")
        probe = overlap_probe(base)
        ceiling = probe.pop("sequential ceiling")
        print("  parallel headroom: " + ", ".join(f"{k} {v:.0f} MiB/s" for k, v in probe.items()))
        print(f"  spill vs write if the MAC cannot overlap the write: {ceiling:.2f}x")
        for obj in (int(x) for x in args.object_mib.split(",")):
            res = bench(base, args.total_mib, obj, args.rounds)
            raw = res.pop("raw")
            print(f"\n{args.total_mib} MiB as {obj} MiB objects, best of {args.rounds} rounds: "
                  f"raw write {raw['write']:.0f} MiB/s, raw read {raw['read']:.0f} MiB/s")  # fmt: skip
            print(f"{'candidate':<26}{'spill MiB/s':>12}{'vs write':>10}{'unspill MiB/s':>15}{'vs read':>9}")
            for name, row in res.items():
                print(f"{name:<26}{row['write']:>12.0f}{row['write'] / raw['write']:>9.2f}x"
                      f"{row['read']:>15.0f}{row['read'] / raw['read']:>8.2f}x")  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
