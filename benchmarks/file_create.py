"""Cost of creating a small file in a directory, as the disk tier does for each spill.

Run from the repository root, with the directories to compare:

    .venv/bin/python benchmarks/file_create.py /tmp .bench-tmp

Each directory gets a fresh subdirectory; the loop creates ``--files`` files of
``--size`` bytes with ``O_CREAT | O_EXCL`` (as ``SpillDir.write`` does), keeping the last
``--live`` and unlinking older ones, and prints the mean µs per create, write and close.
On a VM's ext4 this has differed 50x between two directories of the same disk, which is
why ``store_scaling.py`` takes ``--dir``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections import deque


def create_cost(directory: str, files: int, size: int, live: int) -> float:
    """Mean seconds per create + write + close of one file under a fresh subdirectory."""
    os.makedirs(directory, exist_ok=True)
    d = tempfile.mkdtemp(prefix="file-create-", dir=directory)
    kept: deque[str] = deque()
    data = b"x" * size
    try:
        start = time.perf_counter()
        for i in range(files):
            path = os.path.join(d, f"{i:08d}.spill")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            os.write(fd, data)
            os.close(fd)
            kept.append(path)
            if len(kept) > live:
                os.unlink(kept.popleft())
        return (time.perf_counter() - start) / files
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", help="directories to compare")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--size", type=int, default=300, help="bytes per file (a spilled 128 B array)")
    ap.add_argument("--live", type=int, default=250, help="files kept before unlinking the oldest")
    args = ap.parse_args()
    for d in args.dirs:
        cost = create_cost(d, args.files, args.size, args.live)
        print(f"{os.path.abspath(d)}: {cost * 1e6:,.1f} µs per file created, written and closed")


if __name__ == "__main__":
    main()
