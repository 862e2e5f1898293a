"""The disk tier: one authenticated file per spilled object.

File layout (all integers little-endian u64)::

    MAGIC | n_frames | len(header) | len(frame_0) ... | header | frames... | tag

``tag`` is HMAC-SHA256 under a per-store random key, over the file name and
every byte before it, and it is checked before a single byte is unpickled:
a spill file is code (pickle), so a tampered one must never be loaded.

Linux moves at most ~2 GiB per ``write``/``writev``/``readv`` call and accepts
at most ``IOV_MAX`` (1024) buffers per call, so every transfer loops until done.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import queue
import shutil
import struct
import tempfile
import threading
import weakref
from collections.abc import Sequence

import numpy as np

from .errors import SpillDirectoryError, SpillIntegrityError
from .serialize import Payload

MAGIC = b"PXYSPL01"
TAG_SIZE = hashlib.sha256().digest_size


def _iov_max() -> int:
    try:
        return max(16, min(int(os.sysconf("SC_IOV_MAX")), 1024))
    except (ValueError, OSError, AttributeError):
        return 1024


IOV_MAX = _iov_max()
_U64 = struct.Struct("<Q")
_MAX_FRAMES = 1 << 24


def writev_all(fd: int, buffers: Sequence[memoryview]) -> int:
    """Write every byte of ``buffers``, looping over short writes and IOV_MAX."""
    pending = [memoryview(b).cast("B") for b in buffers if memoryview(b).nbytes]
    total = 0
    start = 0
    while start < len(pending):
        batch = pending[start : start + IOV_MAX]
        n = os.writev(fd, batch)
        if n <= 0:
            raise OSError(f"writev wrote {n} bytes; the file system accepts no more data")
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


def readv_all(fd: int, buffers: Sequence[memoryview]) -> int:
    """Fill every byte of ``buffers``; a premature end of file raises EOFError."""
    pending = [memoryview(b).cast("B") for b in buffers if memoryview(b).nbytes]
    total = 0
    start = 0
    while start < len(pending):
        n = os.readv(fd, pending[start : start + IOV_MAX])
        if n <= 0:
            raise EOFError("spill file ended before all its frames were read")
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


# Hashing and I/O both release the GIL; overlapping them on big objects hides
# most of HMAC-SHA256's cost (about 1 GB/s on one core).
OVERLAP_MIN_BYTES = 1 << 20
_SLICE = 8 << 20


class _Hasher:
    """Feeds buffers to an HMAC, on a helper thread when the data is large."""

    def __init__(self, mac: hmac.HMAC, total: int) -> None:
        self._mac = mac
        self._queue: queue.SimpleQueue | None = None
        if total >= OVERLAP_MIN_BYTES:
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._run, name="spill-hmac", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        q = self._queue
        while (buf := q.get()) is not None:
            self._mac.update(buf)

    def feed(self, buffers: Sequence[memoryview]) -> None:
        if self._queue is None:
            for buf in buffers:
                self._mac.update(buf)
        else:
            for buf in buffers:
                self._queue.put(buf)

    def digest(self) -> bytes:
        if self._queue is not None:
            self._queue.put(None)
            self._thread.join()
        return self._mac.digest()


def _slices(buffers: Sequence[memoryview]) -> list[memoryview]:
    out = []
    for buf in buffers:
        view = memoryview(buf).cast("B")
        out.extend(view[i : i + _SLICE] for i in range(0, view.nbytes, _SLICE))
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


class SpillFile:
    """One spilled object on disk; the file is removed when this object dies."""

    __slots__ = ("path", "nbytes", "_finalizer", "__weakref__")

    def __init__(self, path: str, nbytes: int) -> None:
        self.path = path
        self.nbytes = nbytes
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

    def _mac(self, name: str) -> hmac.HMAC:
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        mac.update(name.encode())
        return mac

    def write(self, payload: Payload) -> SpillFile:
        """Write ``payload`` to a new 0600 file; a failed write leaves no file."""
        name = f"{next(self._names):08d}.spill"
        path = os.path.join(self.path, name)
        frames = [payload.header, *payload.frames]
        lengths = b"".join(_U64.pack(memoryview(f).nbytes) for f in frames)
        prefix = MAGIC + _U64.pack(len(payload.frames)) + lengths
        body = [memoryview(prefix), *map(memoryview, frames)]
        hasher = _Hasher(self._mac(name), sum(b.nbytes for b in body))
        hasher.feed(_slices(body))  # hashed while the body is being written
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
            size = os.fstat(fd).st_size
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
            hasher = _Hasher(self._mac(os.path.basename(path)), sum(lengths))
            hasher.feed([memoryview(head), memoryview(lengths_raw)])
            try:
                pieces = _slices(buffers)
                for i in range(0, len(pieces), 64):  # hash each batch while reading the next
                    readv_all(fd, pieces[i : i + 64])
                    hasher.feed(pieces[i : i + 64])
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
                f"spill file {path} of key {key} failed its HMAC check (tampered or corrupt)"
            )
        return Payload(bytes(buffers[0]), buffers[1:])
