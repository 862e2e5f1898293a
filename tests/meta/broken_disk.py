"""Broken adapters, disk: integrity, frames, file names, shared directories, threads.
Each wraps the reference with ONE bug a store author could make. Most patch the reference's
disk module (private, process-wide: ``Patching``)."""

from __future__ import annotations

import pickle
import struct

from broken_base import Patching, Wrapped, _Broken

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
class PeeksBeforeAuthenticating(Patching):
    """Every read unpickles the file's header first (to learn the value's type), then checks
    the tag: the magic is checked, so a payload at offset 0 is stopped, one after it is not."""

    name = "broken-peeks-before-authenticating"
    violates = ("10.5",)

    def patch(self):
        from reference_impl.store.disk import SpillDir

        real = SpillDir.read

        def read(self, file, key):
            try:
                payload = raw_payload(file.path)
                pickle.loads(payload.header, buffers=payload.frames)  # the peek
            except Exception:  # noqa: BLE001 - a bad peek is left to the real check
                pass
            return real(self, file, key)

        self.set(SpillDir, "read", read)


class PickledSpillUnauthenticated(Patching):
    """Pickling a value spilled to disk copies the file's frames as they are, without the tag
    check every get does; the receiver deserializes them."""

    name = "broken-pickled-spill-unauthenticated"
    violates = ("10.5",)

    def patch(self):
        from reference_impl.store.hostfile import ProxifyHostFile

        real = ProxifyHostFile.proxy_host_state

        def proxy_host_state(self, state):
            if state.tier == "disk":
                return raw_payload(state.held.path)
            return real(self, state)

        self.set(ProxifyHostFile, "proxy_host_state", proxy_host_state)


class MacIgnoresFileName(Patching):
    """The tag authenticates the file's content only, not which file (which key) it is."""

    name = "broken-mac-ignores-file-name"
    violates = ("10.3",)

    def patch(self):
        from reference_impl.store import disk

        real = disk._Mac.__init__

        def __init__(self, key, name, expected):
            real(self, key, "spill", expected)

        self.set(disk._Mac, "__init__", __init__)


class SharedHmacKey(Patching):
    """Every store authenticates with one module-level key, so any store accepts another
    store's files."""

    name = "broken-shared-hmac-key"
    violates = ("10.4",)

    def patch(self):
        import types

        from reference_impl.store import hostfile

        self.set(hostfile, "secrets", types.SimpleNamespace(
            token_bytes=lambda n: (b"proxify-spill-key" * 4)[:n]  # as long as asked (BLAKE3: 32)
        ))


# ------------------------------------------------------------------ frames and directories
class WritevIgnoresIovMax(Patching):
    """Hands every frame of a value to one writev/readv call: past IOV_MAX (1024) buffers the
    call fails with EINVAL, so a value of many frames can never be spilled to disk."""

    name = "broken-writev-ignores-iov-max"
    violates = ("9.8",)

    def patch(self):
        from reference_impl.store import disk

        self.set(disk, "IOV_MAX", 1 << 20)


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
        from conformance.store.harness import files_under

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


# ------------------------------------------------------------------ the rest of disk, integrity
class UnflushedTail(Patching):
    """Writes spill files through a buffered writer that is not flushed before the value is
    read back: the last partial 8 KiB buffer never reaches the file."""

    name = "broken-unflushed-tail"
    violates = ("9.1",)

    def patch(self):
        import os

        from reference_impl.store.disk import SpillDir

        real = SpillDir.write

        def write(self, payload):
            file = real(self, payload)
            size = os.path.getsize(file.path)
            os.truncate(file.path, size - size % 8192)
            return file

        self.set(SpillDir, "write", write)


class _WorldReadableWrapped(Wrapped):
    def __setitem__(self, key, value):
        import os

        super().__setitem__(key, value)
        for root, _dirs, files in os.walk(self.inner.spill_dir):
            os.chmod(root, 0o755)  # open() and makedirs() with the default umask
            for fn in files:
                os.chmod(os.path.join(root, fn), 0o644)


class SpillFilesWorldReadable(_Broken):
    """Creates spill files with open(path, 'wb') and the directory with os.makedirs: modes
    follow the umask (0644 and 0755), so other users can read spilled data."""

    name = "broken-spill-files-world-readable"
    wrapper = _WorldReadableWrapped
    violates = ("9.3",)


class OneTransferCall(Patching):
    """Calls writev/readv once per file and trusts it to move everything: a short transfer
    silently truncates the file (or the value read back)."""

    name = "broken-one-transfer-call"
    violates = ("9.7",)

    def patch(self):
        from reference_impl.store import disk

        def _transfer_all(call, fd, buffers, on_zero):
            views = [memoryview(b).cast("B") for b in buffers if memoryview(b).nbytes]
            return call(fd, views[: disk.IOV_MAX]) if views else 0

        self.set(disk, "_transfer_all", _transfer_all)


class _VagueErrorWrapped(Wrapped):
    def __getitem__(self, key):
        try:
            return self.inner[key]
        except KeyError:
            raise
        except Exception:
            raise OSError("a spill file could not be read back") from None


class ReadErrorDoesNotNameKey(_Broken):
    """Turns every error reading a spill file into a generic OSError that does not say
    which key was lost."""

    name = "broken-read-error-names-no-key"
    wrapper = _VagueErrorWrapped
    violates = ("10.2", "10.1")


class _DropDiskOnErrorWrapped(Wrapped):
    def __getitem__(self, key):
        try:
            return self.inner[key]
        except KeyError:
            raise
        except Exception:
            tiers = self.inner.snapshot().tiers
            for k, t in tiers.items():
                if t == "disk" and k != key:
                    del self.inner[k]  # "the disk tier cannot be trusted any more"
            raise


class ReadErrorDropsDiskTier(_Broken):
    """After one damaged spill file, drops every value on disk, not just the damaged one."""

    name = "broken-read-error-drops-disk-tier"
    wrapper = _DropDiskOnErrorWrapped
    violates = ("10.6",)


# ------------------------------------------------------------------ isolation and threads
class ClassLevelDeviceBytes(_Broken):
    """Keeps the device byte total as a class attribute: every store reports the sum over
    all stores on the device."""

    name = "broken-class-level-device-bytes"
    violates = ("11.1",)
    stores: list = []

    def create_store(self, env):
        store = super().create_store(env)
        ClassLevelDeviceBytes.stores.append(store)
        return store

    def inspect(self, store):
        from conformance.api import Snapshot

        snap = super().inspect(store)
        total = 0
        for other in ClassLevelDeviceBytes.stores:
            if other is store:
                total += snap.device_bytes
            elif not other.inner._closed:
                total += other.inner.snapshot().device_bytes
        return Snapshot(snap.tiers, total, snap.host_bytes, snap.disk_bytes, snap.lru)

    def close_store(self, store):
        super().close_store(store)
        ClassLevelDeviceBytes.stores.remove(store)


class _UnlockedDeleteWrapped(Wrapped):
    def __delitem__(self, key):
        self.local.bypass = True
        try:
            super().__delitem__(key)
        finally:
            self.local.bypass = False


class DeleteUnlocked(Patching):
    """Optimistic concurrency gone wrong: __delitem__ takes no lock ("a dict pop is atomic"),
    and a spill works on its own snapshot of the entries it moves and writes them back when it
    commits, so a key deleted while it was being spilled comes back."""

    name = "broken-delete-unlocked"
    wrapper = _UnlockedDeleteWrapped
    violates = ("12.3",)

    def patch(self):
        from reference_impl.store.mover import TierMover
        from reference_impl.store.records import Entry

        real = TierMover.spill_to_host

        def spill_to_host(self, group):
            moving = [u for u in group if isinstance(u, Entry)]
            real(self, group)
            for entry in moving:  # commit the snapshot: what was deleted meanwhile is back
                self.index.entries.setdefault(entry.key, entry)

        self.set(TierMover, "spill_to_host", spill_to_host)

    def create_store(self, env):
        import threading

        store = super().create_store(env)
        store.local = threading.local()
        store.inner._lock = _BypassableLock(store.inner._lock, store.local)  # private
        return store


class FinalizerTakesRegistryLock(_Broken):
    """Externals live in a registry guarded by a plain Lock that register_external holds; each
    external's finalizer takes the same lock to unregister. A collection that runs inside
    register_external (on that thread) finalizes an external there: it waits for itself."""

    name = "broken-finalizer-takes-registry-lock"
    violates = ("12.4",)

    def create_store(self, env):
        import threading

        store = super().create_store(env)
        store.registry_lock = threading.Lock()
        store.registry = {}
        return store

    def register_external(self, store, obj):
        import gc
        import weakref

        lock = store.registry_lock
        with lock:
            gc.collect()  # (any allocation may run the collector here)
            proxy = super().register_external(store, obj)
            token = id(proxy)
            store.registry[token] = True

        def unregister(_lock=lock, _reg=store.registry, _token=token):
            with _lock:
                _reg.pop(_token, None)

        weakref.finalize(proxy, unregister).atexit = False  # (a stuck run must still exit)
        return proxy


ZOO: dict[str, tuple[type, str]] = {
    "peeks_before_authenticating": (PeeksBeforeAuthenticating, "STORE-INTEG-004"),
    "pickled_spill_unauthenticated": (PickledSpillUnauthenticated, "STORE-INTEG-004"),
    "mac_ignores_file_name": (MacIgnoresFileName, "STORE-INTEG-005"),
    "shared_hmac_key": (SharedHmacKey, "STORE-INTEG-005"),
    "writev_ignores_iov_max": (WritevIgnoresIovMax, "STORE-DISK-009"),
    "disk_bytes_from_directory": (DiskBytesFromDirectory, "STORE-DISK-012"),
    "writes_into_given_directory": (WritesIntoGivenDirectory, "STORE-DISK-012"),
    "register_external_unlocked": (RegisterExternalUnlocked, "STORE-THREAD-006"),
    "unflushed_tail": (UnflushedTail, "STORE-DISK-001"),
    "spill_files_world_readable": (SpillFilesWorldReadable, "STORE-DISK-005"),
    "one_transfer_call": (OneTransferCall, "STORE-DISK-010"),
    "read_error_names_no_key": (ReadErrorDoesNotNameKey, "STORE-INTEG-002"),
    "read_error_drops_disk_tier": (ReadErrorDropsDiskTier, "STORE-INTEG-001"),
    "class_level_device_bytes": (ClassLevelDeviceBytes, "STORE-MAP-008"),
    "delete_unlocked": (DeleteUnlocked, "STORE-THREAD-004"),
    "finalizer_takes_registry_lock": (FinalizerTakesRegistryLock, "STORE-THREAD-005"),
}
