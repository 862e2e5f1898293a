"""Deterministic: zict 3.0's LRU.evict drops a value written by another thread.

Run: python docs/findings/zict-repro/lru_evict_gap.py [--control]
Prints CONFIRMED (exit 0) when the owner's freshly written value is gone,
NOT REPRODUCED (exit 1) otherwise.  Needs only zict; no project code.
``--control`` stops the evicting thread one step earlier, inside the on_evict
callbacks (before the flag is read): zict then sees the overwrite, cancels the
eviction, and the script prints NOT REPRODUCED.

The mechanism (zict/lru.py, LRU.evict, zict 3.0.0):

        self._cancel_evict[key] = False
        try:
            with self.unlock():
                for cb in self.on_evict:           # Buffer.fast_to_slow: slow[key] = value
                    cb(key, value)
                if self._cancel_evict[key]:        # <- read WITHOUT the LRU lock
                    ...
                    return None, None, 0
                                                   # <- GAP: still unlocked
        finally:
            del self._cancel_evict[key]
        del self.d[key]                            # deletes whatever is in d[key] NOW

An overwrite by another thread is detected (``_cancel_evict[key] = True`` in
``LRU.__delitem__``, reached through ``set_noevict`` -> ``discard``) only if it
happens before the flag is read.  An overwrite that lands after the read but
before ``unlock()`` re-acquires the lock is not seen: the evicting thread then
runs ``del self.d[key]`` on the *new* value.  The owner's ``Buffer.__setitem__``
had already discarded the old copy from slow, so the key is in neither mapping.

The hook: ``buf.fast.unlock`` is replaced, on this one LRU instance, by a
context manager that, on the evicting thread only, stops at the end of the
unlocked block (after the flag was read, before the lock is taken back) until
the owner's overwrite has finished.  zict's code is not modified.
"""

from __future__ import annotations

import contextlib
import pickle
import sys
import tempfile
import threading

import zict

TIMEOUT = 10.0


def main(control: bool = False) -> int:
    slow = zict.Func(pickle.dumps, pickle.loads, zict.File(tempfile.mkdtemp()))
    buf = zict.Buffer({}, slow, n=2, weight=lambda k, v: 1)  # two values fit in fast
    buf["k"] = "old"  # the owner's key (only the main thread writes "k")
    buf["x"] = "x"

    in_gap = threading.Event()
    overwritten = threading.Event()
    evictor: list[threading.Thread] = []
    original_unlock = buf.fast.unlock  # bound ZictBase.unlock of this LRU

    @contextlib.contextmanager
    def unlock_with_hook():
        with original_unlock():
            yield
            # End of the unlocked block of LRU.evict: the callbacks ran and
            # _cancel_evict[key] has been read; the lock is not held yet.
            if evictor and threading.current_thread() is evictor[0]:
                in_gap.set()
                overwritten.wait(TIMEOUT)

    def callback_with_hook(key, value) -> None:
        # Runs inside the unlocked block too, but BEFORE _cancel_evict[key] is read.
        if evictor and threading.current_thread() is evictor[0] and key == "k":
            in_gap.set()
            overwritten.wait(TIMEOUT)

    if control:
        buf.fast_to_slow_callbacks.append(callback_with_hook)
    else:
        buf.fast.unlock = unlock_with_hook

    def other_thread() -> None:
        buf["y"] = "y"  # its own key; over n, so the LRU evicts "k" (the oldest)

    evictor.append(threading.Thread(target=other_thread, name="evictor"))
    evictor[0].start()
    if not in_gap.wait(TIMEOUT):
        print("NOT REPRODUCED: the eviction of 'k' never reached the gap")
        return 1
    buf["k"] = "new"  # the owner overwrites its own key while the eviction is in the gap
    overwritten.set()
    evictor[0].join(TIMEOUT)

    fast, on_disk = "k" in buf.fast, "k" in buf.slow
    try:
        got = buf["k"]
    except KeyError:
        got = "KeyError"
    state = f"'k' in fast={fast}, in slow={on_disk}; buf['k'] -> {got!r}"
    if got != "new":
        print(
            f"CONFIRMED (zict {zict.__version__}): the owner wrote buf['k'] = 'new' while "
            f"another thread's LRU.evict was past its _cancel_evict check; the evictor's "
            f"`del self.d[key]` removed the new value: {state}"
        )
        return 0
    print(f"NOT REPRODUCED (zict {zict.__version__}): {state}")
    return 1


if __name__ == "__main__":
    sys.exit(main(control="--control" in sys.argv[1:]))
