"""Deterministic: SpillBuffer's `assert key not in self.d` (distributed/spill.py, Slow.__setitem__).

Run: python docs/findings/distributed-spill-repro/key_in_fast_and_slow.py [--control]
Prints CONFIRMED (exit 0) when the forced interleaving makes SpillBuffer.evict()
raise that AssertionError and makes a deleted key come back; NOT REPRODUCED
(exit 1) otherwise.  Needs only distributed (and the zict it depends on).

The cause is zict's Buffer.__setitem__, which SpillBuffer inherits
(see docs/findings/zict-repro/buffer_setitem_gap.py for the zict-only version):

    def __setitem__(self, key, value):              # zict/buffer.py
        with self.lock:
            discard(self.slow, key)                  # critical section 1
            ...
        self.fast[key] = value                       # critical section 2, later

while another thread's eviction runs Buffer.fast_to_slow with no lock held
(LRU.evict calls it inside ``with self.unlock()``).  If that eviction is moving
the key's OLD value to slow, its write can land after the owner's discard (which
found nothing: the file is recorded only once written) and finish before the
owner's ``self.fast[key] = value``; the LRU's ``_cancel_evict`` flag is never set.
The key is then in fast (new value) and in slow (old value), and:

* the next eviction of that key reaches Slow.__setitem__,

      # Thanks to Buffer.__setitem__, we never update existing
      # keys in slow, but always delete them and reinsert them.
      assert key not in self.d

  and the AssertionError escapes SpillBuffer.__setitem__ / SpillBuffer.evict()
  (``_handle_errors`` catches MaxSpillExceeded, OSError and PickleError only),
  although evict() is documented as "This method never raises";
* ``del buf[key]`` removes only the fast copy, and the key reads back its old value.

Hooks (distributed's and zict's code is not modified): the Slow instance gets a
subclass whose ``__setitem__`` (the evictor's write) waits until the owner's
discard has run and whose ``__delitem__`` (the discard) signals it; ``buf.fast``
gets an LRU subclass whose ``__setitem__`` makes the owner wait, between its two
critical sections, until the eviction is over.  ``--control`` holds the
evictor's write until the owner's whole set has returned: SpillBuffer then
cancels the eviction correctly and the script prints NOT REPRODUCED.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import threading

import distributed
from distributed.spill import Slow, SpillBuffer
from zict.lru import LRU

TIMEOUT = 10.0
VALUE = 1000  # bytes per value; dask.sizeof weighs a bytes object at its length
TARGET = 2100  # two values fit in fast


def forced_interleaving(control: bool) -> SpillBuffer:
    """Return a SpillBuffer in the state the race leaves (or, for control, the right one)."""
    threads: dict[str, threading.Thread] = {}
    evict_writing = threading.Event()
    owner_discarded = threading.Event()
    evict_done = threading.Event()
    owner_set_done = threading.Event()

    def on_evictor() -> bool:
        return threads.get("evictor") is threading.current_thread()

    def on_owner() -> bool:
        return bool(threads) and threading.current_thread() is threading.main_thread()

    class HookedSlow(Slow):
        def __setitem__(self, key, value):
            if key == "k" and on_evictor():
                evict_writing.set()
                (owner_set_done if control else owner_discarded).wait(TIMEOUT)
            super().__setitem__(key, value)

        def __delitem__(self, key):
            try:
                super().__delitem__(key)
            finally:
                if key == "k" and on_owner():
                    owner_discarded.set()

    class HookedLRU(LRU):
        def __setitem__(self, key, value):
            if key == "k" and on_owner() and not control:
                evict_done.wait(TIMEOUT)  # between Buffer.__setitem__'s two critical sections
            super().__setitem__(key, value)

    buf = SpillBuffer(tempfile.mkdtemp(), target=TARGET)
    buf._slow_uncached.__class__ = HookedSlow
    buf.fast.__class__ = HookedLRU
    buf["k"] = b"o" * VALUE  # the owner's key: only the main thread writes or deletes "k"
    buf["x"] = b"x" * VALUE

    def other_thread() -> None:
        buf["y"] = b"y" * VALUE  # its own key; over target, so "k" (the oldest) is spilled
        evict_done.set()

    threads["evictor"] = threading.Thread(target=other_thread, name="evictor")
    threads["evictor"].start()
    if not evict_writing.wait(TIMEOUT):
        raise RuntimeError("the eviction of 'k' never started")
    buf["k"] = b"n" * VALUE  # the owner overwrites its own key
    owner_set_done.set()
    threads["evictor"].join(TIMEOUT)
    return buf


def main(control: bool = False) -> int:
    logging.getLogger("distributed.spill").setLevel(logging.CRITICAL)

    # 1. A deleted key comes back.
    buf = forced_interleaving(control)
    both = "k" in buf.fast and "k" in buf.slow
    del buf["k"]
    try:
        back = bytes(buf["k"])[:1].decode()  # "o": the old value, "n": the new one
    except KeyError:
        back = None
    resurrected = back is not None
    line1 = (
        f"after the overwrite 'k' in fast and slow={both}; after del buf['k']: "
        f"'k' in buf={'k' in buf}, "
        + (f"buf['k'] -> the {'OLD' if back == 'o' else 'new'} value" if back else "KeyError")
    )

    # 2. The next eviction of the key trips the assert (through evict(), "never raises").
    buf = forced_interleaving(control)
    raised = None
    try:
        while "k" in buf.fast and len(buf.fast) > 0:
            if buf.evict() < 0:
                break
    except AssertionError as exc:
        import traceback

        frame = traceback.extract_tb(exc.__traceback__)[-1]
        raised = f"AssertionError at {frame.filename.split('site-packages/')[-1]}:{frame.lineno}: {frame.line}"
    line2 = f"SpillBuffer.evict() until 'k' is spilled: {raised or 'no exception'}"

    head = f"(distributed {distributed.__version__})"
    if raised and resurrected:
        print(f"CONFIRMED {head}: {line2}; {line1}")
        return 0
    print(f"NOT REPRODUCED {head}: {line2}; {line1}")
    return 1


if __name__ == "__main__":
    sys.exit(main(control="--control" in sys.argv[1:]))
