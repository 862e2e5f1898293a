"""zict.File leaves a partial file behind when a write fails (zict 3.0.0, zict/file.py l.133-137).

File.__setitem__ opens the file, then writes; when the write raises (a full disk; here the
process's file-size limit, as the suite's STORE-DISK-006 and STORE-STATE-003 do), the file
stays in the directory with what was written, while the key is not recorded in
``File.filenames``: no later delete, clear or close of the mapping removes it.

Run: .venv/bin/python docs/findings/zict-repro/failed_write_leaves_file.py
"""

import os
import resource
import signal
import tempfile

import zict

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG
with tempfile.TemporaryDirectory() as d:
    f = zict.File(d)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, hard))
    try:
        f["a"] = b"x" * 100_000
    except OSError as exc:
        print("write failed:", exc)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print("keys:", list(f))  # []
    print("files:", {n: os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)})  # {'a#0': 2048}
    f.clear()
    print("after clear():", os.listdir(d))  # ['a#0'] still there
