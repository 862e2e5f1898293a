"""Candidate: ProxifyHostFile.lock is a class attribute, so every store in the
process shares one lock (a busy store blocks an unrelated one).

Run: ../../../.venv-daskcuda/bin/python class_level_lock.py
"""
import tempfile
import threading

from _common import DevArray, new_store, verdict, versions
from dask_cuda.proxify_host_file import ProxifyHostFile

root = tempfile.mkdtemp()  # both stores must share the (also class-level) disk path
a = new_store(10**6, None, spill_dir=root)
b = new_store(10**6, None, spill_dir=root)
same = a.lock is b.lock
in_class = "lock" in vars(ProxifyHostFile) and "lock" not in vars(a)

done = threading.Event()


def write_b():
    b["x"] = DevArray(10)
    done.set()


with a.lock:  # e.g. store `a` busy in __setitem__ / a long proxify
    t = threading.Thread(target=write_b, daemon=True)
    t.start()
    blocked = not done.wait(timeout=1.0)
t.join(timeout=5)
verdict(
    same and in_class and blocked,
    "the store lock is class-level: holding store A's lock blocks store B",
    [
        versions(),
        f"a.lock is b.lock: {same}; defined on the class, not the instance: {in_class}",
        f"b.__setitem__ blocked for 1 s while a.lock was held: {blocked}; finished after release: {done.is_set()}",
    ],
)
