"""Candidate: dask_cuda.disk_io ignores the byte counts returned by os.writev /
os.readv.  Linux moves at most MAX_RW_COUNT = 2 GiB - 4 KiB per call, so a
proxy whose frames total more than that is silently truncated on disk and read
back into uninitialised buffers.

Cheap by design: (1) shows the kernel cap with a writev of a 2.5 GiB *calloc'd*
buffer to /dev/null (no page is touched, no file written); (2) drives dask-cuda's
real disk-spill path with os.writev/os.readv patched to honour a 4 KiB cap,
i.e. the same short-transfer contract at a small scale, and checks whether
dask-cuda notices.

Run: ../../../.venv-daskcuda/bin/python writev_readv_truncation.py
"""
import os

import numpy as np
from _common import DevArray, new_store, tier, verdict, versions

evidence = [versions()]

# (1) the kernel cap, measured (skip with REPRO_NO_KERNEL_CHECK=1)
if os.environ.get("REPRO_NO_KERNEL_CHECK") != "1":
    big = np.zeros(5 << 29, dtype="u1")  # 2.5 GiB of untouched zero pages
    fd = os.open("/dev/null", os.O_WRONLY)
    try:
        n = os.writev(fd, [big])
    finally:
        os.close(fd)
    del big
    evidence.append(f"kernel: os.writev of {5 << 29:,} bytes to /dev/null returned {n:,} (short: {n < 5 << 29})")

# (2) dask-cuda's path with a scaled-down cap
CAP = 4096
real_writev, real_readv = os.writev, os.readv
calls = {"writev": [], "readv": []}


def capped_writev(fd, buffers):
    want = sum(memoryview(b).nbytes for b in buffers)
    out, left = [], CAP
    for b in buffers:
        mv = memoryview(b).cast("B")
        out.append(mv[:left])
        left -= len(out[-1])
        if left <= 0:
            break
    n = real_writev(fd, out)
    calls["writev"].append((want, n))
    return n


def capped_readv(fd, buffers):
    want = sum(memoryview(b).nbytes for b in buffers)
    out, left = [], CAP
    for b in buffers:
        mv = memoryview(b).cast("B")
        out.append(mv[:left])
        left -= len(out[-1])
        if left <= 0:
            break
    n = real_readv(fd, out)
    calls["readv"].append((want, n))
    return n


os.writev, os.readv = capped_writev, capped_readv
try:
    store = new_store(device_memory_limit=0, memory_limit=1)  # every item cascades to disk
    SIZE = 100_000
    error = None
    try:
        store["k"] = DevArray(SIZE, fill=7)
        p = store["k"]
        where = tier(p)
        path = str(p._pxy_get().obj[0]["disk-io-header"]["path"])
        lengths = p._pxy_get().obj[0]["disk-io-header"]["frame-lengths"]
        on_disk = os.path.getsize(path)
        # Keep the allocator from handing the freed original buffer (still full
        # of 7s) straight back to disk_read's np.empty():
        scrub = [np.full(SIZE, 0xAB, dtype="u1") for _ in range(4)]
        back = p.buf  # unspill: disk -> device
        intact = bool(np.all(back == 7))
    except Exception as exc:  # what a correct implementation would do
        error = exc
finally:
    os.writev, os.readv = real_writev, real_readv

if error is not None:
    verdict(False, "dask-cuda detected the short write/read", evidence + [f"raised {error!r}"])
else:
    evidence += [
        f"dask-cuda writev calls (requested, written): {calls['writev']}",
        f"dask-cuda readv calls (requested, read): {calls['readv']}",
        f"proxy tier after store: {where}; header frame-lengths={lengths} (sum {sum(lengths):,}); file size {on_disk:,}",
        f"no exception; value intact after unspill: {intact} "
        f"({int(np.count_nonzero(back != 7)):,} of {SIZE:,} bytes wrong)",
    ]
    verdict(
        on_disk < sum(lengths),
        "short os.writev/os.readv go unnoticed: the file holds only part of the frames, "
        "no error is raised, and the unread tail comes back as uninitialised np.empty() memory",
        evidence,
    )
