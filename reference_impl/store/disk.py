"""The disk tier: one authenticated file per spilled object.

File layout (all integers little-endian u64)::

    MAGIC | n_frames | len(header) | len(frame_0) ... | header | frames... | tag

``tag`` authenticates the file name and every byte before it (the *body*,
``total`` bytes), and it is checked before a single byte is unpickled: a spill
file is code (pickle), so a tampered one must never be loaded::

    tag = BLAKE3-keyed(key, MAGIC || u64(len(name)) || name || u64(total) || body)

``key`` is 32 random bytes per store; keyed BLAKE3 is a MAC (a PRF under that
key). Forging a tag needs the key; the name and the length are bound in, so a
file cannot be renamed, truncated or extended.

Why BLAKE3 (issue 14): the MAC shares the machine's cores with the write, so its
speed per core caps the spill. Measured side by side by ``benchmarks/disk_mac.py``
(figures in docs/benchmarks.md), keyed BLAKE3 hashed several times faster per
core than SHA-256 (even with SHA-NI) and keyed BLAKE2b, and spilled faster than
the SHA-256 tree MAC this format replaced (PXYSPL02). Bodies over one ``CHUNK``
are hashed on a worker thread while this thread writes them (or reads the next
batch), so the hash and the copy overlap; smaller ones are hashed inline, without a thread hop.

Linux moves at most ~2 GiB per ``write``/``writev``/``readv`` call and accepts
at most ``IOV_MAX`` (1024) buffers per call, so every transfer loops until done.
"""

from __future__ import annotations

import hmac
import itertools
import os
import shutil
import struct
import tempfile
import threading
import weakref
from collections import deque
from collections.abc import Sequence

import numpy as np
from blake3 import blake3

from .errors import SpillDirectoryError, SpillIntegrityError
from .serialize import Payload

MAGIC = b"PXYSPL03"  # 03: keyed BLAKE3 (02 was a SHA-256 tree MAC, 01 a flat HMAC)
TAG_SIZE = 32


def _iov_max() -> int:
    try:
        return max(16, min(int(os.sysconf("SC_IOV_MAX")), 1024))
    except (ValueError, OSError, AttributeError):
        return 1024


IOV_MAX = _iov_max()
_U64 = struct.Struct("<Q")
_MAX_FRAMES = 1 << 24


def _transfer_all(call, fd: int, buffers: Sequence[memoryview], on_zero: Exception) -> int:
    """Move every byte of ``buffers`` with ``call`` (os.writev or os.readv).

    One call moves at most ~2 GiB and IOV_MAX buffers on Linux, and may move
    less than asked, so this loops, trimming the buffers already done.
    """
    pending = [memoryview(b).cast("B") for b in buffers if memoryview(b).nbytes]
    total = 0
    start = 0
    while start < len(pending):
        n = call(fd, pending[start : start + IOV_MAX])
        if n <= 0:
            raise on_zero
        total += n
        while n:
            head = pending[start]
            if n >= head.nbytes:
                n -= head.nbytes
                start += 1
            else:
                pending[start] = head[n:]
                n = 0
    return total


def writev_all(fd: int, buffers: Sequence[memoryview]) -> int:
    """Write every byte of ``buffers``; a write that moves nothing raises OSError."""
    return _transfer_all(
        os.writev, fd, buffers, OSError("writev wrote 0 bytes; the file system accepts no more data")
    )


def readv_all(fd: int, buffers: Sequence[memoryview]) -> int:
    """Fill every byte of ``buffers``; a premature end of file raises EOFError."""
    return _transfer_all(
        os.readv, fd, buffers, EOFError("spill file ended before all its frames were read")
    )


CHUNK = 1 << 20
"""Bodies larger than this are hashed on a thread, overlapped with the write or read."""
_READ_BATCH = 4 * CHUNK  # read this much, then hand it to the hashing thread


class _Mac:
    """The tag of a body fed in order; a big body is hashed on a thread as it is fed.

    One file's pieces must be hashed in order, so each file has at most one hashing
    thread at a time, draining its own queue; files spilled by other threads hash in
    parallel. BLAKE3 releases the GIL while hashing. The thread lives only as long as
    the write or read that started it (``digest`` joins it): a process-wide pool would
    outlive every store (found by STORE-DISK-013's leak check).
    """

    def __init__(self, key: bytes, name: str, expected: int) -> None:
        name_b = name.encode()
        self._h = blake3(MAGIC + _U64.pack(len(name_b)) + name_b + _U64.pack(expected), key=key)
        self._parallel = expected > CHUNK  # one chunk: no thread hop
        self._queue: deque[memoryview] = deque()
        self._lock = threading.Lock()
        self._running = False
        self._error: BaseException | None = None
        self._threads: list[threading.Thread] = []

    def feed(self, buffers: Sequence[memoryview]) -> None:
        views = [memoryview(b).cast("B") for b in buffers]
        if not self._parallel:
            for v in views:
                self._h.update(v)
            return
        with self._lock:
            self._queue.extend(views)
            if not self._running:
                self._running = True
                thread = threading.Thread(target=self._drain, name="spill-mac", daemon=True)
                self._threads.append(thread)
                thread.start()

    def _drain(self) -> None:
        queue, lock, update = self._queue, self._lock, self._h.update
        try:
            while True:
                with lock:
                    if not queue:
                        self._running = False
                        return
                    view = queue.popleft()
                update(view)
        except BaseException as exc:  # handed to digest(), which re-raises it in the caller
            with lock:
                self._running = False
                self._error = exc

    def digest(self) -> bytes:
        """The tag; joins the hashing thread (also after a failure: no work outlives us)."""
        for thread in self._threads:
            thread.join()
        if self._error is not None:
            raise self._error
        return self._h.digest()


def _batches(buffers: Sequence[memoryview], size: int) -> list[list[memoryview]]:
    """``buffers`` cut into consecutive batches of about ``size`` bytes each."""
    out: list[list[memoryview]] = []
    batch: list[memoryview] = []
    room = size
    for buf in buffers:
        view = memoryview(buf).cast("B")
        while view.nbytes:
            piece = view[:room]
            batch.append(piece)
            room -= piece.nbytes
            view = view[piece.nbytes :]
            if not room:
                out.append(batch)
                batch, room = [], size
    if batch:
        out.append(batch)
    return out


def make_spill_dir(base: str | os.PathLike[str] | None) -> str:
    """A fresh 0700 directory for one store's files under ``base``.

    Raises :class:`SpillDirectoryError` naming ``base`` when it is unusable, at
    construction time rather than at the first spill.
    """
    base = os.fspath(base) if base is not None else tempfile.gettempdir()
    try:
        os.makedirs(base, exist_ok=True)
        path = tempfile.mkdtemp(prefix="proxify-spill-", dir=base)
        os.chmod(path, 0o700)
    except OSError as exc:
        raise SpillDirectoryError(
            f"spill directory base {base!r} is not usable: {exc.strerror or exc}"
        ) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        shutil.rmtree(path, ignore_errors=True)
        raise SpillDirectoryError(f"spill directory base {base!r} is not writable")
    return path


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    """What changes when anyone writes, truncates, replaces or touches a file (ctime too:
    resetting the mtime with ``utime`` moves it)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class SpillFile:
    """One spilled object on disk; the file is removed when this object dies."""

    __slots__ = ("path", "nbytes", "stamp", "_finalizer", "__weakref__")

    def __init__(self, path: str, nbytes: int) -> None:
        self.path = path
        self.nbytes = nbytes
        # The file's identity when it was last authenticated (see SpillDir.unchanged).
        self.stamp: tuple[int, ...] | None = None
        # A finalizer (not __del__): it takes no lock, so it is safe on any thread.
        self._finalizer = weakref.finalize(self, _unlink, path)

    def remove(self) -> None:
        self._finalizer()


class SpillDir:
    """Writes and reads authenticated spill files in one directory."""

    def __init__(self, path: str, key: bytes) -> None:
        self.path = path
        self._key = key
        self._names = itertools.count()

    def write(self, payload: Payload) -> SpillFile:
        """Write ``payload`` to a new 0600 file; a failed write leaves no file."""
        name = f"{next(self._names):08d}.spill"
        path = os.path.join(self.path, name)
        frames = [payload.header, *payload.frames]
        lengths = b"".join(_U64.pack(memoryview(f).nbytes) for f in frames)
        prefix = MAGIC + _U64.pack(len(payload.frames)) + lengths
        body = [memoryview(prefix), *map(memoryview, frames)]
        hasher = _Mac(self._key, name, sum(b.nbytes for b in body))
        hasher.feed(body)  # a big body is hashed on the pool while being written
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            written = writev_all(fd, body)
            tag = hasher.digest()
            written += writev_all(fd, [memoryview(tag)])
        except BaseException:
            hasher.digest()
            os.close(fd)
            _unlink(path)
            raise
        os.close(fd)
        return SpillFile(path, written)

    def read(self, file: SpillFile, key: str) -> Payload:
        """Read and authenticate ``file``; nothing is unpickled here."""
        path = file.path
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            raise SpillIntegrityError(f"spill file {path} of key {key} is missing") from exc
        try:
            st = os.fstat(fd)
            size = st.st_size
            head = bytearray(16)
            if size < 16 + 8 + TAG_SIZE:
                raise EOFError
            readv_all(fd, [memoryview(head)])
            if bytes(head[:8]) != MAGIC:
                raise SpillIntegrityError(
                    f"spill file {path} of key {key} has a bad header (tampered?)"
                )
            nframes = _U64.unpack_from(head, 8)[0]
            if nframes > _MAX_FRAMES or 16 + 8 * (nframes + 1) + TAG_SIZE > size:
                raise EOFError
            lengths_raw = bytearray(8 * (nframes + 1))
            readv_all(fd, [memoryview(lengths_raw)])
            lengths = [v for (v,) in _U64.iter_unpack(lengths_raw)]
            if 16 + len(lengths_raw) + sum(lengths) + TAG_SIZE != size:
                raise EOFError
            buffers = [memoryview(np.empty(n, dtype=np.uint8)) for n in lengths]
            total = 16 + len(lengths_raw) + sum(lengths)
            hasher = _Mac(self._key, os.path.basename(path), total)
            hasher.feed([memoryview(head), memoryview(lengths_raw)])
            try:
                for batch in _batches(buffers, _READ_BATCH):  # hash each while reading the next
                    readv_all(fd, batch)
                    hasher.feed(batch)
            finally:
                digest = hasher.digest()
            tag = bytearray(TAG_SIZE)
            readv_all(fd, [memoryview(tag)])
        except EOFError as exc:
            raise SpillIntegrityError(
                f"spill file {path} of key {key} is truncated or corrupt "
                f"(size does not match its header)"
            ) from exc
        finally:
            os.close(fd)
        if not hmac.compare_digest(digest, bytes(tag)):
            raise SpillIntegrityError(
                f"spill file {path} of key {key} failed its MAC check (keyed BLAKE3: tampered or corrupt)"
            )
        file.stamp = _stamp(st)
        return Payload(bytes(buffers[0]), buffers[1:])

    def unchanged(self, file: SpillFile) -> bool:
        """True if ``file`` is, to every appearance, the file last authenticated (a read).

        What a clean copy is checked with before the store reuses it: a file changed, cut,
        replaced or removed since is not reused (the value, intact in memory, is written
        anew). This is a cheap ``stat``, not the MAC: a change that keeps every stamp field
        is still caught by the MAC when the file is read (SPEC 10.1).
        """
        stamp = file.stamp
        if stamp is None:
            return False
        try:
            return _stamp(os.stat(file.path)) == stamp
        except OSError:
            return False
