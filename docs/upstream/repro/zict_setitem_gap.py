"""zict Buffer.__setitem__ updates slow and fast in two critical sections: an eviction of
the old value that writes it to slow between them leaves the key in fast (new value) and
slow (old value); del then removes only the fast copy, and the old value comes back."""

import threading
from collections import UserDict

import zict

armed, evict_writing, owner_discarded, evict_done = (threading.Event() for _ in range(4))


def owner():  # the main thread, once the hooks are armed
    return armed.is_set() and threading.current_thread() is threading.main_thread()


class Slow(UserDict):
    def __setitem__(self, key, value):  # the evictor's write of the old value
        if key == "k" and not owner():
            evict_writing.set()
            owner_discarded.wait(10)  # lands after the owner's discard(slow, "k")
        super().__setitem__(key, value)

    def __delitem__(self, key):
        try:
            super().__delitem__(key)
        finally:
            if key == "k" and owner():
                owner_discarded.set()


buf = zict.Buffer({}, Slow(), n=2, weight=lambda k, v: 1)
buf["k"] = "old"
buf["x"] = "x"


class HookedLRU(type(buf.fast)):
    def __setitem__(self, key, value):  # between Buffer.__setitem__'s two sections
        if key == "k" and owner():
            evict_done.wait(10)
        super().__setitem__(key, value)


buf.fast.__class__ = HookedLRU
armed.set()
evictor = threading.Thread(target=lambda: (buf.__setitem__("y", "y"), evict_done.set()))
evictor.start()  # buf["y"] evicts "k", the oldest, to slow
evict_writing.wait(10)
buf["k"] = "new"  # the owner overwrites its own key
evictor.join()
print(f"zict {zict.__version__}: 'k' in fast={'k' in buf.fast}, in slow={'k' in buf.slow}, "
      f"len(buf)={len(buf)} for 3 keys")
del buf["k"]
print(f"after del buf['k']: buf.get('k') -> {buf.get('k')!r}")
