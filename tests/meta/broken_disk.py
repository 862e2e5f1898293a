"""Broken adapters, disk: integrity, frames, file names, shared directories, threads.
Each wraps the reference with ONE bug a store author could make. Most patch the reference's
disk module (private, process-wide): every zoo run is its own subprocess."""

from __future__ import annotations

import pickle
import struct

from broken_base import _Broken

_U64 = struct.Struct("<Q")


def raw_payload(path: str):
    """The reference's spill file parsed without checking its tag (what the bugs below do)."""
    from reference_impl.store.serialize import Payload

    with open(path, "rb") as f:
        data = f.read()
    nframes = _U64.unpack_from(data, 8)[0]
    lengths = [_U64.unpack_from(data, 16 + 8 * i)[0] for i in range(nframes + 1)]
    pos = 16 + 8 * (nframes + 1)
    chunks = []
    for n in lengths:
        chunks.append(memoryview(bytearray(data[pos : pos + n])))
        pos += n
    return Payload(bytes(chunks[0]), chunks[1:])


# ------------------------------------------------------------------ integrity
class PeeksBeforeAuthenticating(_Broken):
    """Every read unpickles the file's header first (to learn the value's type), then checks
    the tag: the magic is checked, so a payload at offset 0 is stopped, one after it is not."""

    name = "broken-peeks-before-authenticating"
    violates = ("10.5",)

    def __init__(self):
        super().__init__()
        from reference_impl.store.disk import SpillDir

        real = SpillDir.read

        def read(self, file, key):
            try:
                payload = raw_payload(file.path)
                pickle.loads(payload.header, buffers=payload.frames)  # the peek
            except Exception:  # noqa: BLE001 - a bad peek is left to the real check
                pass
            return real(self, file, key)

        SpillDir.read = read


class PickledSpillUnauthenticated(_Broken):
    """Pickling a value spilled to disk copies the file's frames as they are, without the tag
    check every get does; the receiver deserializes them."""

    name = "broken-pickled-spill-unauthenticated"
    violates = ("10.5",)

    def __init__(self):
        super().__init__()
        from reference_impl.store.hostfile import ProxifyHostFile

        real = ProxifyHostFile._pickle_state

        def _pickle_state(self, detail):
            if detail.obj is None and detail.payload is None and detail.file is not None:
                return raw_payload(detail.file.path)
            return real(self, detail)

        ProxifyHostFile._pickle_state = _pickle_state


class MacIgnoresFileName(_Broken):
    """The tag authenticates the file's content only, not which file (which key) it is."""

    name = "broken-mac-ignores-file-name"
    violates = ("10.3",)

    def __init__(self):
        super().__init__()
        from reference_impl.store import disk

        real = disk._TreeHasher.__init__

        def __init__(self, key, name, expected):
            real(self, key, "spill", expected)

        disk._TreeHasher.__init__ = __init__


class SharedHmacKey(_Broken):
    """Every store authenticates with one module-level key, so any store accepts another
    store's files."""

    name = "broken-shared-hmac-key"
    violates = ("10.4",)

    def __init__(self):
        super().__init__()
        import types

        from reference_impl.store import hostfile

        hostfile.secrets = types.SimpleNamespace(token_bytes=lambda n: b"proxify-spill-key"[:n])


# ------------------------------------------------------------------ frames and directories
class WritevIgnoresIovMax(_Broken):
    """Hands every frame of a value to one writev/readv call: past IOV_MAX (1024) buffers the
    call fails with EINVAL, so a value of many frames can never be spilled to disk."""

    name = "broken-writev-ignores-iov-max"
    violates = ("9.8",)

    def __init__(self):
        super().__init__()
        from reference_impl.store import disk

        disk.IOV_MAX = 1 << 20


class DiskBytesFromDirectory(_Broken):
    """Reports disk_bytes as the size of everything in the directory it was given (``du``), so
    it counts files that are not its own."""

    name = "broken-disk-bytes-from-directory"
    violates = ("11.2", "3.5")

    def create_store(self, env):
        store = super().create_store(env)
        store.given_dir = env.spill_dir
        return store

    def inspect(self, store):
        from conformance.api import Snapshot
        from conformance.harness import files_under

        snap = super().inspect(store)
        disk = sum(files_under(store.given_dir).values())
        return Snapshot(snap.tiers, snap.device_bytes, snap.host_bytes, disk, snap.lru)


class _TruncatingNames:
    """File names from a per-store counter, opened with truncation: 00000000.spill of one
    store overwrites 00000000.spill of another in the same directory."""

    def __init__(self, directory):
        import itertools

        self.directory = directory
        self.count = itertools.count()

    def __iter__(self):
        return self

    def __next__(self):
        import os

        n = next(self.count)
        try:
            os.unlink(os.path.join(self.directory, f"{n:08d}.spill"))  # O_TRUNC, in effect
        except FileNotFoundError:
            pass
        return n


class WritesIntoGivenDirectory(_Broken):
    """Writes its spill files straight into the directory it is given (no directory of its
    own), named by a per-store counter and opened with truncation: two stores given one
    directory overwrite each other's files."""

    name = "broken-writes-into-given-directory"
    violates = ("11.2", "9.2")

    def create_store(self, env):
        store = super().create_store(env)
        disk = store.inner._tiers.disk  # private: where the store writes, and its names
        disk.path = env.spill_dir
        disk._names = _TruncatingNames(env.spill_dir)
        return store


# ------------------------------------------------------------------ threads
class _BypassableLock:
    """The store's RLock, except on a thread inside register_external."""

    def __init__(self, lock, local):
        self._lock = lock
        self._local = local

    def _bypass(self):
        return getattr(self._local, "bypass", False)

    def __enter__(self):
        if not self._bypass():
            self._lock.acquire()
        return self

    def __exit__(self, *exc):
        if not self._bypass():
            self._lock.release()
        return False

    def acquire(self, blocking=True, timeout=-1):
        return True if self._bypass() else self._lock.acquire(blocking, timeout)

    def release(self):
        if not self._bypass():
            self._lock.release()


class RegisterExternalUnlocked(_Broken):
    """register_external skips the store's lock ("it only adds a weak reference"), so it races
    with sets, gets, deletes and finalizers on other threads."""

    name = "broken-register-external-unlocked"
    violates = ("7.5", "12.1")

    def create_store(self, env):
        import threading

        store = super().create_store(env)
        store.local = threading.local()
        store.inner._lock = _BypassableLock(store.inner._lock, store.local)  # private
        return store

    def register_external(self, store, obj):
        store.local.bypass = True
        try:
            return super().register_external(store, obj)
        finally:
            store.local.bypass = False


ZOO: dict[str, tuple[type, str]] = {
    "peeks_before_authenticating": (PeeksBeforeAuthenticating, "STORE-INTEG-004"),
    "pickled_spill_unauthenticated": (PickledSpillUnauthenticated, "STORE-INTEG-004"),
    "mac_ignores_file_name": (MacIgnoresFileName, "STORE-INTEG-005"),
    "shared_hmac_key": (SharedHmacKey, "STORE-INTEG-005"),
    "writev_ignores_iov_max": (WritevIgnoresIovMax, "STORE-DISK-009"),
    "disk_bytes_from_directory": (DiskBytesFromDirectory, "STORE-DISK-012"),
    "writes_into_given_directory": (WritesIntoGivenDirectory, "STORE-DISK-012"),
    "register_external_unlocked": (RegisterExternalUnlocked, "STORE-THREAD-006"),
}
